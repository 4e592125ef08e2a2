/**
 * The allow-listed view of a run: one record per macrostep of the root actor, built field by field from the
 * inspection stream. Event payloads and errors are never read; from context only numbers (the run's timer values)
 * and the allow-listed fields of a recorded failure, which the failure report already sends to the fabric, so no
 * secret can reach a journal or a live inspector through here whatever the machine carries.
 */
import type { InspectionEvent, StateValue } from 'xstate';
import { KINDS, escapeValue, isFailure, type Failure } from '../core/errors.js';
import { edgeKey } from './edge-key.js';

/** The allow-listed part of a final state's output. */
export interface RunOutput {
  result?: string;
  reason?: string;
  code?: string;
  exitCode?: number;
  /** The failure in words, from the allow-listed keys of its supporting data. */
  cause?: string;
}

/** One macrostep as the journal and the live inspector see it. */
export interface MacrostepRecord {
  machine: string;
  seq: number;
  event: string;
  value: StateValue;
  tags: string[];
  transitions: string[];
  status: 'active' | 'done' | 'error' | 'stopped';
  output?: RunOutput;
  /** The run's own timer values in ms (named delays evaluated with its context), on the first record and whenever they change. */
  timers?: Record<string, number>;
}

/** Which output fields may leave the process; reasons and codes must also be ones the error taxonomy defines. */
export interface AllowList {
  output: ReadonlyArray<keyof RunOutput>;
}

export const DEFAULT_ALLOW: AllowList = { output: ['result', 'reason', 'code', 'exitCode', 'cause'] };

/** Supporting-data keys whose values describe a failure without carrying metadata, in the order they are told. */
const CAUSE_KEYS = ['error', 'last_error', 'phase', 'status', 'step', 'key'] as const;
/** Context fields where the machines keep the failure that ended a run, most decisive first. */
const FAILURE_FIELDS = ['failure', 'reportFailure', 'imdsFailure'] as const;

const KNOWN_REASONS = new Set<string>(Object.values(KINDS).map((kind) => kind.reason));
const KNOWN_CODES = new Set<string>(Object.keys(KINDS));
const RESULT_WORD = /^[a-z][a-z0-9-]{0,39}$/;
const STATUSES = new Set(['active', 'done', 'error', 'stopped']);

/** Picks the allow-listed output fields, dropping any whose value is not a known code, reason or integer. */
export function projectOutput(output: unknown, allow: AllowList = DEFAULT_ALLOW): RunOutput | undefined {
  if (!output || typeof output !== 'object') return undefined;
  const source = output as Record<string, unknown>;
  const picked: RunOutput = {};
  const fields = new Set(allow.output);
  if (fields.has('result') && typeof source.result === 'string' && RESULT_WORD.test(source.result)) {
    picked.result = source.result;
  }
  if (fields.has('reason') && typeof source.reason === 'string') {
    picked.reason = KNOWN_REASONS.has(source.reason) ? source.reason : '(unlisted reason)';
  }
  if (fields.has('code') && typeof source.code === 'string' && KNOWN_CODES.has(source.code)) picked.code = source.code;
  if (fields.has('exitCode') && Number.isInteger(source.exitCode)) picked.exitCode = source.exitCode as number;
  return picked;
}

/**
 * A failure in words from its allow-listed data: `IMDS did not answer within 20 s; last error: http status error
 * (status: 503)`. An unhandled error's message is anybody's text, so it is told by its reason alone.
 */
export function causeOf(failure: Failure): string {
  if (failure.code === 'UNHANDLED') return failure.reason;
  const data = new Map(failure.data.filter(([key]) => (CAUSE_KEYS as readonly string[]).includes(key)));
  const text = (key: string): string | undefined => (data.has(key) ? escapeValue(String(data.get(key)), 160) : undefined);
  const head = text('error') ?? failure.reason;
  const lastError = text('last_error');
  const details = CAUSE_KEYS.slice(2).flatMap((key) => (text(key) === undefined ? [] : [`${key}: ${text(key)}`]));
  return `${head}${lastError ? `; last error: ${lastError}` : ''}${details.length ? ` (${details.join(', ')})` : ''}`;
}

/** The failure a finished run recorded in its context, if any. */
function recordedFailure(context: unknown): Failure | undefined {
  if (!context || typeof context !== 'object') return undefined;
  const record = context as Record<string, unknown>;
  for (const field of FAILURE_FIELDS) if (isFailure(record[field])) return record[field] as Failure;
  return undefined;
}

/** How XState calls a delay given as a function. */
type DelayFunction = (args: { context: unknown; event: { type: string } }, params: undefined) => unknown;

/** The machine's named delays evaluated with the run's context: numbers only. */
function timerValues(logic: unknown, context: unknown): Record<string, number> | undefined {
  const delays = (logic as { implementations?: { delays?: Record<string, unknown> } } | undefined)?.implementations?.delays;
  if (!delays) return undefined;
  const out: Record<string, number> = {};
  for (const [name, delay] of Object.entries(delays)) {
    try {
      const value = typeof delay === 'function' ? (delay as DelayFunction)({ context, event: { type: '' } }, undefined) : delay;
      if (typeof value === 'number' && Number.isFinite(value) && value >= 0) out[name] = value;
    } catch {
      // A delay that cannot be evaluated outside a transition is left unnamed.
    }
  }
  return Object.keys(out).length ? out : undefined;
}

/** Copies a state value keeping only its shape: state names come from the machine definition, never from data. */
function copyValue(value: unknown): StateValue {
  if (typeof value === 'string') return value;
  const out: Record<string, StateValue> = {};
  if (value && typeof value === 'object') {
    for (const [key, child] of Object.entries(value)) out[key] = copyValue(child);
  }
  return out;
}

/**
 * Returns an `inspect` observer that calls `onStep` once per macrostep of the root actor, with the transitions
 * its microsteps took.
 */
export function recordMacrosteps(
  onStep: (step: MacrostepRecord) => void,
  allow: AllowList = DEFAULT_ALLOW,
): (event: InspectionEvent) => void {
  let seq = 0;
  let taken: string[] = [];
  let lastTimers = '';
  return (event) => {
    if (event.actorRef.sessionId !== event.rootId) return;
    if (event.type === '@xstate.microstep') {
      for (const transition of event._transitions) taken.push(edgeKey(transition.source, transition));
      return;
    }
    if (event.type !== '@xstate.snapshot') return;
    const snapshot = event.snapshot as { value?: unknown; tags?: Iterable<unknown>; status?: unknown; output?: unknown; context?: unknown };
    const logic = (event.actorRef as { logic?: { root?: { key?: unknown } } }).logic;
    const machine = logic?.root?.key;
    const status = STATUSES.has(String(snapshot.status)) ? (String(snapshot.status) as MacrostepRecord['status']) : 'active';
    const record: MacrostepRecord = {
      machine: typeof machine === 'string' ? machine : '(machine)',
      seq: seq++,
      event: typeof event.event?.type === 'string' ? event.event.type : '(unknown)',
      value: copyValue(snapshot.value),
      tags: [...(snapshot.tags ?? [])].filter((tag): tag is string => typeof tag === 'string').sort(),
      transitions: taken,
      status,
    };
    const timers = timerValues(logic, snapshot.context);
    if (timers && JSON.stringify(timers) !== lastTimers) {
      record.timers = timers;
      lastTimers = JSON.stringify(timers);
    }
    if (status === 'done') {
      const output = projectOutput(snapshot.output, allow);
      const failure = recordedFailure(snapshot.context);
      if (output && output.exitCode !== 0 && failure && allow.output.includes('cause')) output.cause = causeOf(failure);
      if (output) record.output = output;
    }
    taken = [];
    onStep(record);
  };
}
