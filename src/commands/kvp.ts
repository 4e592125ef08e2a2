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
import { printDiagnostics } from './kvp-diagnostics.js';

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
  info: 0, dump: 0, entries: 0, read: 1, write: 2, delete: 1, clear: 0, 'is-stale': 0, diag: 0,
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

const parseKvpArgv = (argv: string[]) =>
  parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: KVP_OPTIONS,
  });

type KvpValues = ReturnType<typeof parseKvpArgv>['values'];

/** How a command answers: JSON (`--json`) or one `key=value` line per item, on the command's io. */
interface KvpOutput {
  io: KvpCliIo;
  json: boolean;
  print: (value: unknown) => void;
}

/** Why a parsed command line cannot run (exit 2), or undefined when it can. */
function usageError(command: string | undefined, args: string[], values: KvpValues): string | undefined {
  if (command === undefined || !(command in ARITY) || args.length !== ARITY[command]) {
    return command === undefined ? 'missing command' : command in ARITY ? `wrong number of arguments for ${command}` : `unknown command '${command}'${suggestion(command, Object.keys(ARITY))}`;
  }
  if ((values.append && command !== 'write') || (values['if-stale'] && command !== 'clear')) {
    return `${values.append ? '--append' : '--if-stale'} does not apply to ${command}`;
  }
  const pool = values.pool === undefined ? 1 : Number(values.pool);
  if (!/^\d+$/.test(values.pool ?? '1') || pool > 4) return `--pool must be 0..4, got '${values.pool}'`;
  return undefined;
}

/** Runs one `bootstate kvp` command line and returns its exit code: 0 ok, 1 failure (or "no"), 2 usage. */
export async function runKvpCommand(argv: string[], io: KvpCliIo): Promise<number> {
  let parsed;
  try {
    parsed = parseKvpArgv(argv);
  } catch (error) {
    io.stderr(`bootstate kvp: ${describeParseError(error, Object.keys(KVP_OPTIONS))}${SEE_HELP}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...args] = positionals;
  const why = usageError(command, args, values);
  if (why !== undefined) {
    io.stderr(`bootstate kvp: ${why}${SEE_HELP}`);
    return 2;
  }
  const pool = values.pool === undefined ? 1 : Number(values.pool);
  const out: KvpOutput = { io, json: values.json === true, print: (value) => io.stdout(`${JSON.stringify(value, null, 2)}\n`) };
  try {
    const store = new KvpStore({
      path: values.file ?? poolPath(values.dir, pool),
      repair: values.repair, unsafe: values.unsafe, lossy: values.lossy,
    });
    return runOnStore(store, command, args, values, out);
  } catch (error) {
    const message = error instanceof BootstateError || error instanceof Error ? error.message : String(error);
    io.stderr(`bootstate kvp: ${message}\n`);
    return 1;
  }
}

/** Runs a command line that passed `usageError` on its pool and returns its exit code. */
function runOnStore(store: KvpStore, command: string, args: string[], values: KvpValues, out: KvpOutput): number {
  const { io, json, print } = out;
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
    case 'read':
      return read(store, args[0], out);
    case 'diag':
      return printDiagnostics(store.dump(), out);
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
}

function read(store: KvpStore, key: string, { io, json, print }: KvpOutput): number {
  const value = store.read(key);
  if (value === undefined) {
    io.stderr(`bootstate kvp: no record with key '${escapeControl(key)}' in ${store.path}\n`);
    return 1;
  }
  if (json) print({ key, value });
  else io.stdout(line(key, value));
  return 0;
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
