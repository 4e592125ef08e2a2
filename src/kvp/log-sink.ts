/**
 * A pino destination that copies warnings and errors into KVP telemetry. Log lines can carry anything a
 * caller put in them (metadata, command lines, passwords by mistake), so only the message, level, time and an
 * allow-list of short diagnostic fields are ever copied; everything else is dropped unread.
 */
import { type KvpLevel, type KvpTelemetry, levelRank } from './telemetry.js';

/** Log fields copied into the event text; all are codes or short identifiers, never payloads. */
export const ALLOWED_LOG_FIELDS = ['state', 'reason', 'code', 'step', 'backend', 'status', 'endpoint'] as const;

const PINO_LEVEL_NAMES: Record<string, KvpLevel> = {
  trace: 'TRACE', debug: 'DEBUG', info: 'INFO', warn: 'WARN', error: 'ERROR', fatal: 'ERROR',
};

/** Maps a pino level (number, or label when a level formatter is used) to a KVP level. */
export function kvpLevelOf(level: unknown): KvpLevel | undefined {
  if (typeof level === 'string') return PINO_LEVEL_NAMES[level.toLowerCase()];
  if (typeof level !== 'number') return undefined;
  if (level >= 50) return 'ERROR';
  if (level >= 40) return 'WARN';
  if (level >= 30) return 'INFO';
  if (level >= 20) return 'DEBUG';
  return 'TRACE';
}

function scalar(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return undefined;
}

/** Renders one parsed pino line as `msg; field=value, …` from the allow-listed fields only. */
export function describeLogLine(line: Record<string, unknown>): string {
  const fields: string[] = [];
  for (const name of ALLOWED_LOG_FIELDS) {
    const value = scalar(line[name]);
    if (value !== undefined) fields.push(`${name}=${value}`);
  }
  const msg = scalar(line.msg) ?? '';
  return fields.length === 0 ? msg : `${msg}; ${fields.join(', ')}`;
}

function timeOf(value: unknown): Date {
  const time = typeof value === 'number' || typeof value === 'string' ? new Date(value) : new Date();
  return Number.isNaN(time.getTime()) ? new Date() : time;
}

/**
 * Returns a pino destination (`pino(options, dest)` or a `pino.multistream` entry) that turns lines at warn or
 * above, and at or above the telemetry's own level, into `event` records named after the line's `state` field
 * (else `log`). Unparseable lines are ignored; the destination never throws.
 */
export function pinoDestination(telemetry: KvpTelemetry): { write(chunk: string): void } {
  const threshold = Math.max(levelRank('WARN'), levelRank(telemetry.minLevel));
  return {
    write(chunk: string): void {
      for (const text of String(chunk).split('\n')) {
        if (text.trim() === '') continue;
        let line: unknown;
        try {
          line = JSON.parse(text);
        } catch {
          continue;
        }
        if (typeof line !== 'object' || line === null) continue;
        const record = line as Record<string, unknown>;
        const level = kvpLevelOf(record.level);
        if (level === undefined || levelRank(level) < threshold) continue;
        const name = typeof record.state === 'string' && record.state !== '' ? record.state : 'log';
        telemetry.event(level, name, describeLogLine(record), timeOf(record.time));
      }
    },
  };
}
