/**
 * The allow-listed view of a run: one record per macrostep of the root actor, built field by field from the
 * inspection stream. Context, event payloads and errors are never read, so no secret can reach a journal or a
 * live inspector through here whatever the machine carries.
 */
import type { InspectionEvent, StateValue } from 'xstate';
import { KINDS } from '../errors.js';
import { edgeKey } from './edge-key.js';

/** The allow-listed part of a final state's output. */
export interface RunOutput {
  result?: string;
  reason?: string;
  code?: string;
  exitCode?: number;
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
}

/** Which output fields may leave the process; reasons and codes must also be ones the error taxonomy defines. */
export interface AllowList {
  output: ReadonlyArray<keyof RunOutput>;
}

export const DEFAULT_ALLOW: AllowList = { output: ['result', 'reason', 'code', 'exitCode'] };

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
  return (event) => {
    if (event.actorRef.sessionId !== event.rootId) return;
    if (event.type === '@xstate.microstep') {
      for (const transition of event._transitions) taken.push(edgeKey(transition.source, transition));
      return;
    }
    if (event.type !== '@xstate.snapshot') return;
    const snapshot = event.snapshot as { value?: unknown; tags?: Iterable<unknown>; status?: unknown; output?: unknown };
    const machine = (event.actorRef as { logic?: { root?: { key?: unknown } } }).logic?.root?.key;
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
    if (status === 'done') {
      const output = projectOutput(snapshot.output, allow);
      if (output) record.output = output;
    }
    taken = [];
    onStep(record);
  };
}
