/**
 * The agent's logger: pino JSON lines to the log file (0600, appended) and to any extra sink (the KVP telemetry
 * destination); on stderr JSON too, or one text line per event (log-text.ts) under systemd or with
 * `--log-format text`. Everything is synchronous so the last lines survive an exit or a crash.
 */
import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import pino, { type DestinationStream, type Logger, type StreamEntry } from 'pino';
import { stderrFormat, stderrIsJournal, textDestination, type LogFormat } from './log-text.js';

export type { Logger };

export interface LoggerOptions {
  /** Log file path; empty disables it. A file that cannot be opened is reported once on stderr and skipped. */
  logPath?: string;
  /** Level for stderr (default `info`, or BOOTSTATE_LOG). The file always gets `debug` and above. */
  stderrLevel?: pino.Level;
  /** Further destinations, e.g. the KVP telemetry sink. */
  extra?: Array<{ level: pino.Level; stream: DestinationStream }>;
  /** Where stderr lines go (tests pass their own). */
  stderr?: DestinationStream;
  /** Form of the stderr lines; default: `text` when stderr is the journal, else `json` (see log-text.ts). */
  format?: LogFormat;
}

/** Field paths whose values are replaced before any destination sees them: secrets never reach a log line. */
export const REDACT_PATHS = [
  'password',
  '*.password',
  'adminPassword',
  '*.adminPassword',
  'UserPassword',
  '*.UserPassword',
  'customData',
  '*.customData',
  'CustomData',
  '*.CustomData',
  'secret',
  '*.secret',
];

/**
 * The stderr level from BOOTSTATE_LOG, else azure-init's AZURE_INIT_LOG (a tracing filter such as `debug` or
 * `info,libazureinit=debug`, whose bare level is taken), e.g. `levelFromEnv({ AZURE_INIT_LOG: 'debug' })` → `debug`.
 */
export function levelFromEnv(env: Record<string, string | undefined>): pino.Level | undefined {
  for (const value of [env.BOOTSTATE_LOG, env.AZURE_INIT_LOG]) {
    const bare = value?.split(',').map((d) => d.trim().toLowerCase()).find((d) => d in pino.levels.values);
    if (bare) return bare as pino.Level;
  }
  return undefined;
}

/** Creates the logger; returns it with a `close` that releases the file descriptor. */
export function createLogger(options: LoggerOptions = {}): { log: Logger; close(): void } {
  const stderrLevel = options.stderrLevel ?? levelFromEnv(process.env) ?? 'info';
  const stderr = options.stderr ?? pino.destination({ dest: 2, sync: true });
  const format = options.format ?? stderrFormat(undefined);
  const streams: StreamEntry[] = [
    { level: stderrLevel, stream: format === 'text' ? textDestination(stderr, stderrIsJournal()) : stderr },
  ];
  let fileFd: number | null = null;
  if (options.logPath) {
    try {
      mkdirSync(dirname(options.logPath), { recursive: true, mode: 0o755 });
      fileFd = openSync(options.logPath, 'a', 0o600);
      chmodSync(options.logPath, 0o600);
      streams.push({ level: 'debug', stream: pino.destination({ dest: fileFd, sync: true }) });
    } catch (error) {
      process.stderr.write(`bootstate: cannot open log file ${options.logPath}: ${(error as Error).message}\n`);
    }
  }
  for (const extra of options.extra ?? []) streams.push(extra);
  const log = pino(
    {
      base: { pid: process.pid },
      level: 'debug',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.multistream(streams),
  );
  return {
    log,
    close() {
      if (fileFd !== null) {
        try {
          closeSync(fileFd);
        } catch {
          // already closed
        }
        fileFd = null;
      }
    },
  };
}
