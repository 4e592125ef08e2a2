/**
 * A journal read back is input like any other: a hand-edited or corrupted file may hold any JSON. Each line is
 * rebuilt field by field into the shape the trace expects, so a wrong type shows as a placeholder instead of
 * breaking the page.
 */
import type { StateValue } from 'xstate';
import type { JournalLine } from './journal.js';
import type { RunOutput } from './projection.js';

const text = (value: unknown, fallback: string): string => (typeof value === 'string' ? value : fallback);
const texts = (value: unknown): string[] => (Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : []);

/** A state value's shape: strings and nested objects of them, nothing else. */
function stateValue(value: unknown, depth = 0): StateValue {
  if (typeof value === 'string') return value;
  const out: Record<string, StateValue> = {};
  if (value && typeof value === 'object' && !Array.isArray(value) && depth < 32) {
    for (const [key, child] of Object.entries(value)) out[key] = stateValue(child, depth + 1);
  }
  return out;
}

function output(value: unknown): RunOutput | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const source = value as Record<string, unknown>;
  const out: RunOutput = {};
  for (const key of ['result', 'reason', 'code', 'cause'] as const) if (typeof source[key] === 'string') out[key] = source[key];
  if (Number.isInteger(source.exitCode)) out.exitCode = source.exitCode as number;
  return out;
}

function timers(value: unknown): Record<string, number> | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const entries = Object.entries(value).filter((entry): entry is [string, number] => typeof entry[1] === 'number' && Number.isFinite(entry[1]) && entry[1] >= 0);
  return entries.length ? Object.fromEntries(entries) : undefined;
}

/** Rebuilds one parsed journal line into a well-typed one; `seq` falls back to the line's index. */
export function normalizeLine(raw: unknown, index: number): JournalLine {
  const line = (raw && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  const status = ['active', 'done', 'error', 'stopped'].includes(line.status as string) ? (line.status as JournalLine['status']) : 'active';
  const normal: JournalLine = {
    t: text(line.t, new Date(0).toISOString()),
    machine: text(line.machine, ''),
    seq: Number.isSafeInteger(line.seq) ? (line.seq as number) : index,
    event: text(line.event, '(unknown)'),
    value: stateValue(line.value),
    tags: texts(line.tags),
    transitions: texts(line.transitions),
    status,
  };
  const out = output(line.output);
  if (out) normal.output = out;
  const recorded = timers(line.timers);
  if (recorded) normal.timers = recorded;
  return normal;
}

/** Rebuilds parsed journal lines into well-typed ones; `seq` falls back to the line's index. */
export function normalizeLines(lines: unknown[]): JournalLine[] {
  return lines.map((raw, index) => normalizeLine(raw, index));
}

/** The run's own timer values, gathered line by line: the last recorded before any SIGTERM shortened them. */
export class TimerRecord {
  #merged: Record<string, number> | undefined;
  #terminated = false;

  add(line: JournalLine): void {
    if (this.#terminated) return;
    if (line.event === 'TERMINATE') this.#terminated = true;
    else if (line.timers) this.#merged = { ...this.#merged, ...line.timers };
  }

  get timers(): Record<string, number> | undefined {
    return this.#merged;
  }
}

/** The run's own timer values: the last recorded before any SIGTERM shortened them. */
export function recordedTimers(lines: JournalLine[]): Record<string, number> | undefined {
  const record = new TimerRecord();
  for (const line of lines) record.add(line);
  return record.timers;
}
