/**
 * `bootstate kvp …`: read and edit a KVP pool file by hand, for support engineers on a live VM and for tests.
 * Every command goes through KvpStore, so it takes the same locks as the agent. Its commands have their own
 * arities, so it parses its own argv (`ownArgv` in the table, src/commands/index.ts); `--help` is answered by the
 * CLI from that table before this runs.
 */
import { parseArgs } from 'node:util';
import { describeParseError, suggestion } from '../cli/argv.js';
import { BootstateError } from '../core/errors.js';
import type { KvpRecord } from '../kvp/codec.js';
import { KvpStore, poolPath } from '../kvp/store.js';

export interface KvpCliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

/** The options every command accepts, as node:util parseArgs takes them; the table's help describes each. */
export const KVP_OPTIONS = {
  pool: { type: 'string' }, dir: { type: 'string' }, file: { type: 'string' },
  json: { type: 'boolean' }, repair: { type: 'boolean' }, unsafe: { type: 'boolean' },
  lossy: { type: 'boolean' }, append: { type: 'boolean' }, 'if-stale': { type: 'boolean' },
} as const;

const SEE_HELP = " (see 'bootstate kvp --help')\n";

const ARITY: Record<string, number> = {
  info: 0, dump: 0, entries: 0, read: 1, write: 2, delete: 1, clear: 0, 'is-stale': 0,
};

/** Escapes backslashes and control characters so one record prints as one line, e.g. `a\nb` → `a\\nb`. */
export function escapeControl(text: string): string {
  return text.replace(/[\\\u0000-\u001f\u007f]/g, (ch) => {
    if (ch === '\\') return '\\\\';
    if (ch === '\n') return '\\n';
    if (ch === '\r') return '\\r';
    if (ch === '\t') return '\\t';
    return `\\x${ch.charCodeAt(0).toString(16).padStart(2, '0')}`;
  });
}

const line = (key: string, value: string) => `${escapeControl(key)}=${escapeControl(value)}\n`;

/** Runs one `bootstate kvp` command line and returns its exit code: 0 ok, 1 failure (or "no"), 2 usage. */
export async function runKvpCommand(argv: string[], io: KvpCliIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: KVP_OPTIONS,
    });
  } catch (error) {
    io.stderr(`bootstate kvp: ${describeParseError(error, Object.keys(KVP_OPTIONS))}${SEE_HELP}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...args] = positionals;
  if (command === undefined || !(command in ARITY) || args.length !== ARITY[command]) {
    const why = command === undefined ? 'missing command' : command in ARITY ? `wrong number of arguments for ${command}` : `unknown command '${command}'${suggestion(command, Object.keys(ARITY))}`;
    io.stderr(`bootstate kvp: ${why}${SEE_HELP}`);
    return 2;
  }
  if ((values.append && command !== 'write') || (values['if-stale'] && command !== 'clear')) {
    io.stderr(`bootstate kvp: ${values.append ? '--append' : '--if-stale'} does not apply to ${command}${SEE_HELP}`);
    return 2;
  }
  const pool = values.pool === undefined ? 1 : Number(values.pool);
  if (!/^\d+$/.test(values.pool ?? '1') || pool > 4) {
    io.stderr(`bootstate kvp: --pool must be 0..4, got '${values.pool}'${SEE_HELP}`);
    return 2;
  }
  const json = values.json === true;
  const print = (value: unknown) => io.stdout(`${JSON.stringify(value, null, 2)}\n`);
  try {
    const store = new KvpStore({
      path: values.file ?? poolPath(values.dir, pool),
      repair: values.repair, unsafe: values.unsafe, lossy: values.lossy,
    });
    switch (command) {
      case 'info': {
        const info = store.info();
        if (json) print(info);
        else for (const [key, value] of Object.entries(info)) io.stdout(line(key, String(value)));
        return 0;
      }
      case 'dump': {
        const records = store.dump();
        if (json) print(records);
        else for (const r of records) io.stdout(line(r.key, r.value));
        return 0;
      }
      case 'entries': {
        const entries = store.entries();
        if (json) print(Object.fromEntries(entries));
        else for (const [key, value] of entries) io.stdout(line(key, value));
        return 0;
      }
      case 'read': {
        const value = store.read(args[0]);
        if (value === undefined) {
          io.stderr(`bootstate kvp: no record with key '${escapeControl(args[0])}' in ${store.path}\n`);
          return 1;
        }
        if (json) print({ key: args[0], value });
        else io.stdout(line(args[0], value));
        return 0;
      }
      case 'write':
        return write(store, { key: args[0], value: args[1] }, values.append === true, json, io, print);
      case 'delete': {
        const deleted = store.delete(args[0]);
        if (json) print({ deleted });
        else io.stdout(`deleted=${deleted}\n`);
        return 0;
      }
      case 'clear': {
        const cleared = values['if-stale'] ? store.clearIfStale() : (store.clear(), true);
        if (json) print({ cleared });
        else io.stdout(`cleared=${cleared}\n`);
        return 0;
      }
      default: {
        const stale = store.isStale();
        if (json) print({ stale });
        else io.stdout(`stale=${stale}\n`);
        return stale ? 0 : 1;
      }
    }
  } catch (error) {
    const message = error instanceof BootstateError || error instanceof Error ? error.message : String(error);
    io.stderr(`bootstate kvp: ${message}\n`);
    return 1;
  }
}

function write(store: KvpStore, record: KvpRecord, append: boolean, json: boolean, io: KvpCliIo, print: (v: unknown) => void): number {
  if (append) {
    const result = store.append([record]);
    if (json) print(result);
    if (result.dropped > 0) {
      io.stderr(`bootstate kvp: pool ${store.path} already holds 1024 records; record not written\n`);
      return 1;
    }
    return 0;
  }
  const result = store.upsert(record.key, record.value);
  if (json) print(result);
  else if (result.action === 'evicted') io.stderr(`bootstate kvp: pool full; replaced the record of '${escapeControl(result.evictedKey ?? '')}'\n`);
  return 0;
}
