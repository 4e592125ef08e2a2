/**
 * The agent's logger: pino JSON lines to the log file (0600, appended) and to any extra sink (the KVP telemetry
 * destination); on stderr JSON too, or one text line per event (log-text.ts) under systemd or with
 * `--log-format text`. Everything is synchronous so the last lines survive an exit or a crash. Every destination
 * goes through `Sinks`, so a full disk or a closed pipe turns that destination off instead of throwing out of a
 * log call.
 */
import { closeSync, constants, fchmodSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import pino, { type DestinationStream, type Logger, type StreamEntry } from 'pino';
import { stderrFormat, stderrIsJournal, textDestination, type LogFormat } from './log-text.js';
import { openRegularSync } from '../system/open-regular.js';
import { Sinks } from './sinks.js';

export type { Logger };

export interface LoggerOptions {
  /** Log file path; empty disables it. A file that cannot be opened is reported once on stderr and skipped. */
  logPath?: string;
  /** Level for stderr (default `info`, or BOOTSTATE_LOG). */
  stderrLevel?: pino.Level;
  /** Level for the file (default `debug`). */
  fileLevel?: pino.Level;
  /** Further destinations, e.g. the KVP telemetry sink (`sink` names it in failure notes; default `extra`). */
  extra?: Array<{ level: pino.Level; stream: DestinationStream; sink?: string }>;
  /** Where stderr lines go (tests pass their own). */
  stderr?: DestinationStream;
  /** Form of the stderr lines; default: `text` when stderr is the journal, else `json` (see log-text.ts). */
  format?: LogFormat;
  /** The run's sinks; a failing destination is turned off there and told on the others. Default: a new one. */
  sinks?: Sinks;
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
export function createLogger(options: LoggerOptions = {}): { log: Logger; close(): void; sinks: Sinks } {
  const sinks = options.sinks ?? new Sinks();
  const stderrLevel = options.stderrLevel ?? levelFromEnv(process.env) ?? 'info';
  const stderr = sinks.stream('stderr', options.stderr ?? pino.destination({ dest: 2, sync: true }));
  const format = options.format ?? stderrFormat(undefined);
  const streams: StreamEntry[] = [
    { level: stderrLevel, stream: format === 'text' ? sinks.stream('stderr', textDestination(stderr, stderrIsJournal())) : stderr },
  ];
  let fileFd: number | null = null;
  if (options.logPath) {
    try {
      mkdirSync(dirname(options.logPath), { recursive: true, mode: 0o755 });
      fileFd = openRegularSync(options.logPath, { flags: constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT });
      fchmodSync(fileFd, 0o600);
      streams.push({ level: options.fileLevel ?? 'debug', stream: sinks.stream('log file', pino.destination({ dest: fileFd, sync: true })) });
    } catch (error) {
      if (fileFd !== null) closeSync(fileFd);
      fileFd = null;
      sinks.fail('log file', new Error(`cannot open log file ${options.logPath}: ${(error as Error).message}`));
    }
  }
  for (const extra of options.extra ?? []) streams.push({ level: extra.level, stream: sinks.stream(extra.sink ?? 'extra', extra.stream) });
  const log = pino(
    {
      base: { pid: process.pid },
      level: 'debug',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.multistream(streams),
  );
  sinks.onFailure(({ sink, error }) => log.error({ step: 'sinks', sink }, `${sink} turned off: ${error}`));
  return {
    log,
    sinks,
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
