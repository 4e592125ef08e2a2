/**
 * The human-readable form of the log for stderr: one line per event, `message key=value …`. Under systemd
 * (stderr is the journal) each line starts with its syslog priority, `<3>` error … `<7>` debug, which journald
 * strips and stores, so `journalctl -u bootstate -p warning` finds the failures and the console stays readable.
 */
import { fstatSync } from 'node:fs';
import type { DestinationStream } from 'pino';

export type LogFormat = 'json' | 'text';

/** syslog(3) priority of each pino level: fatal → crit, error → err, warn → warning, info → info, debug → debug. */
const PRIORITY: Record<number, number> = { 10: 7, 20: 7, 30: 6, 40: 4, 50: 3, 60: 2 };
const LABEL: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const OMITTED = new Set(['level', 'time', 'pid', 'hostname', 'msg']);

/**
 * Whether fd 2 is the journal: systemd sets JOURNAL_STREAM to `device:inode` of the stream it connected, and only
 * when stderr is still that stream (not redirected by a wrapper) is the priority prefix understood.
 */
export function stderrIsJournal(env: NodeJS.ProcessEnv = process.env, fd = 2): boolean {
  const [dev, ino] = (env.JOURNAL_STREAM ?? '').split(':');
  if (!dev || !ino) return false;
  try {
    const st = fstatSync(fd);
    return String(st.dev) === dev && String(st.ino) === ino;
  } catch {
    return false;
  }
}

/** `text` under systemd, `json` otherwise; `--log-format` (or BOOTSTATE_LOG_FORMAT) decides when given. */
export function stderrFormat(requested: string | undefined, env: NodeJS.ProcessEnv = process.env): LogFormat {
  const chosen = requested ?? env.BOOTSTATE_LOG_FORMAT;
  if (chosen === 'json' || chosen === 'text') return chosen;
  return stderrIsJournal(env) ? 'text' : 'json';
}

function formatValue(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return /^[^\s"=]+$/.test(text) ? text : JSON.stringify(text);
}

/** One pino JSON line as one text line, e.g. `<4>IMDS attempt 2 failed: … code=HTTP_STATUS`. */
export function formatTextLine(json: string, syslogPrefix: boolean): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return `${syslogPrefix ? '<6>' : ''}${json.replace(/\s+$/, '')}\n`;
  }
  const level = typeof entry.level === 'number' ? entry.level : 30;
  const fields = Object.entries(entry)
    .filter(([key, value]) => !OMITTED.has(key) && value !== undefined)
    .map(([key, value]) => `${key}=${formatValue(value)}`);
  // pino's msg is a string; a line from elsewhere may carry any JSON value there, written as JSON like the fields.
  const message = (typeof entry.msg === 'string' ? entry.msg : entry.msg == null ? '' : JSON.stringify(entry.msg)).replace(/[\r\n]+/g, ' ');
  const head = syslogPrefix ? `<${PRIORITY[level] ?? 6}>` : `${LABEL[level] ?? 'INFO'} `;
  return `${head}${[message, ...fields].filter(Boolean).join(' ')}\n`;
}

/** A pino destination that turns each JSON line into a text line and writes it to `out`. */
export function textDestination(out: { write(line: string): unknown }, syslogPrefix: boolean): DestinationStream {
  return { write: (line: string) => void out.write(formatTextLine(line, syslogPrefix)) };
}
