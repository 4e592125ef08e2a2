/**
 * A run as a trace, built from the chart's inspection events with no tracing library: one root span for the run, a
 * span per state from entered to left (nested as the states are, in order) and a span per actor invocation under the
 * state that invoked it. `otlp-export.ts` sends what this records; a run without an OTLP endpoint never makes one.
 *
 * Only state paths, invoke ids, actor names, event types and the allow-listed parts of a failure are read — the same
 * allow-list as the journal (src/inspect/projection.ts): never context values, event payloads or error messages.
 */
import type { InspectionEvent } from 'xstate';
import { activePaths } from '../core/state-path.js';
import { KINDS, toFailure, type Failure } from '../core/errors.js';
import { causeOf, projectOutput } from '../inspect/projection.js';
import { preciseNow } from '../core/clock.js';

export { preciseNow };

/** A span attribute's value. */
export type AttributeValue = string | number | boolean;
export type Attributes = Record<string, AttributeValue>;

/** One recorded span; times are epoch milliseconds with sub-millisecond precision. */
export interface SpanRecord {
  /** A number of its own, increasing: a parent always comes before its children in the record list. */
  id: number;
  parent: number | null;
  name: string;
  kind: 'run' | 'state' | 'actor' | 'cycle';
  start: number;
  end: number | null;
  attributes: Attributes;
  /** Set when the span ended in an error: the status message (a failure's reason). */
  error?: string;
}

/** The attribute names the spans carry (docs/telemetry.md lists them). */
export const ATTR = {
  state: 'bootstate.state',
  leftBy: 'bootstate.state.left_by',
  step: 'bootstate.step',
  actor: 'bootstate.actor',
  attempt: 'bootstate.attempt',
  outcome: 'bootstate.outcome',
  result: 'bootstate.result',
  exitCode: 'bootstate.exit_code',
  reason: 'bootstate.error.reason',
  retryable: 'bootstate.error.retryable',
  cause: 'bootstate.error.cause',
  errorType: 'error.type',
  httpStatus: 'http.response.status_code',
  folded: 'bootstate.folded',
  foldedMs: 'bootstate.folded_ms',
} as const;

/**
 * Spans kept of one name under one parent (a retry loop's states and attempts): past them only the latest is kept,
 * with how many before it were folded. A pool VM polls every second with no deadline, for days: its trace, held in
 * memory until the run ends, stays this size whatever the wait.
 */
export const LOOP_SPANS = 50;

const KNOWN_REASONS = new Set<string>(Object.values(KINDS).map((kind) => kind.reason));
const DONE = 'xstate.done.actor.';
const ERROR = 'xstate.error.actor.';


/** A failure's allow-listed attributes: its code, reason, whether retryable, the HTTP status it names, its cause. */
export function failureAttributes(failure: Failure): Attributes {
  const out: Attributes = { [ATTR.errorType]: failure.code, [ATTR.retryable]: failure.retryable };
  if (KNOWN_REASONS.has(failure.reason)) out[ATTR.reason] = failure.reason;
  const status = Number(failure.data.find(([key]) => key === 'status')?.[1]);
  if (Number.isInteger(status) && status >= 100 && status <= 599) out[ATTR.httpStatus] = status;
  out[ATTR.cause] = causeOf(failure);
  return out;
}

/** The state path that invokes each invoke id, read from the machine's definition. */
function invokers(logic: unknown): Map<string, string> {
  const out = new Map<string, string>();
  type Node = { path?: string[]; invoke?: Array<{ id?: string }>; states?: Record<string, Node> };
  const visit = (node: Node | undefined): void => {
    if (!node) return;
    for (const invoke of node.invoke ?? []) if (typeof invoke.id === 'string') out.set(invoke.id, (node.path ?? []).join('.'));
    for (const child of Object.values(node.states ?? {})) visit(child);
  };
  visit((logic as { root?: Node } | undefined)?.root);
  return out;
}

export class RunTrace {
  readonly spans: SpanRecord[] = [];
  #nextId = 0;
  /** Spans opened under each parent id, by kind and name; the latest past LOOP_SPANS, to be replaced by the next. */
  readonly #loops = new Map<number | null, Map<string, { count: number; latest: SpanRecord | null }>>();
  /** Open state spans by path. */
  readonly #states = new Map<string, SpanRecord>();
  /** Open actor spans by invoke id. */
  readonly #actors = new Map<string, SpanRecord>();
  /** Starts of each invoke id within the span of its invoking state's parent (a retry loop's attempts). */
  readonly #attempts = new Map<string, number>();
  #invokers: Map<string, string> | null = null;
  /** Actors started in the macrostep under way: their state's span opens only with the snapshot that ends it. */
  readonly #started: Array<{ id: string; src: unknown; at: number }> = [];
  readonly root: SpanRecord;

  constructor(name: string, private readonly now: () => number = preciseNow) {
    this.root = this.#open(name, 'run', null, {});
  }

  /** An XState `inspect` observer. */
  inspect(event: InspectionEvent): void {
    if (event.type === '@xstate.actor') {
      const actor = event.actorRef as { id?: string; src?: unknown; _parent?: { sessionId?: string } };
      if (actor._parent?.sessionId === event.rootId && typeof actor.id === 'string') this.#started.push({ id: actor.id, src: actor.src, at: this.now() });
    }
    if (event.actorRef.sessionId !== event.rootId) return;
    if (event.type === '@xstate.event') this.#rootEvent(event.event);
    if (event.type !== '@xstate.snapshot') return;
    this.#invokers ??= invokers((event.actorRef as { logic?: unknown }).logic);
    const snapshot = event.snapshot as { value?: unknown; status?: string };
    if (snapshot.value === undefined) return;
    this.#statesAt(activePaths(snapshot.value), event.event.type);
    for (const started of this.#started.splice(0)) this.#actorStarted(started);
    // The final state's span ends with the chart, not with the teardown after it.
    if (snapshot.status === 'done') this.#statesAt([], 'final');
  }

  /** Ends every span still open, the root last, with the run's output (allow-listed) and its failure, if any. */
  finish(output?: unknown, failure?: Failure): SpanRecord[] {
    this.#statesAt([], 'final');
    // Actors the chart itself invoked (the KVP writer) run until it stops.
    for (const id of [...this.#actors.keys()]) this.#endActor(id, 'stopped');
    const picked = projectOutput(output);
    if (picked?.result) this.root.attributes[ATTR.result] = picked.result;
    if (picked?.exitCode !== undefined) this.root.attributes[ATTR.exitCode] = picked.exitCode;
    if (failure && picked?.result === 'failed') {
      Object.assign(this.root.attributes, failureAttributes(failure));
      this.root.error = failure.reason;
    }
    if (this.root.end === null) this.root.end = this.now();
    return this.spans;
  }

  /** Opens the spans of states entered and ends those of states left (children before parents). */
  #statesAt(paths: string[], event: string): void {
    const current = new Set(paths);
    for (const [path, span] of [...this.#states].reverse()) {
      if (current.has(path)) continue;
      for (const [id, actor] of this.#actors) if (actor.parent === span.id) this.#endActor(id, 'stopped');
      span.attributes[ATTR.leftBy] = event;
      span.end = this.now();
      this.#states.delete(path);
    }
    for (const path of paths) {
      if (this.#states.has(path)) continue;
      const parent = this.#states.get(path.slice(0, Math.max(0, path.lastIndexOf('.'))))?.id ?? this.root.id;
      this.#states.set(path, this.#open(path, 'state', parent, { [ATTR.state]: path }));
    }
  }

  /** An invocation's span, under the state that invoked it, with its attempt: the nth start within the loop's span. */
  #actorStarted({ id, src, at }: { id: string; src: unknown; at: number }): void {
    const invoker = this.#invokers?.get(id);
    const state = invoker === undefined ? undefined : this.#states.get(invoker);
    const loop = invoker === undefined ? undefined : this.#states.get(invoker.slice(0, Math.max(0, invoker.lastIndexOf('.'))));
    const key = `${loop?.id ?? state?.id ?? this.root.id}:${id}`;
    const attempt = (this.#attempts.get(key) ?? 0) + 1;
    this.#attempts.set(key, attempt);
    const attributes: Attributes = { [ATTR.step]: id, [ATTR.attempt]: attempt };
    if (typeof src === 'string') attributes[ATTR.actor] = src;
    this.#endActor(id, 'stopped');
    const span = this.#open(`invoke ${id}`, 'actor', state?.id ?? this.root.id, attributes);
    span.start = at;
    this.#actors.set(id, span);
  }

  /** An invoked actor's answer or error, as the chart receives it. */
  #rootEvent(event: { type: string; error?: unknown }): void {
    if (event.type.startsWith(DONE)) this.#endActor(event.type.slice(DONE.length), 'done');
    if (event.type.startsWith(ERROR)) this.#endActor(event.type.slice(ERROR.length), 'error', toFailure(event.error));
  }

  #endActor(id: string, outcome: 'done' | 'error' | 'stopped', failure?: Failure): void {
    const span = this.#actors.get(id);
    if (!span) return;
    span.attributes[ATTR.outcome] = outcome;
    if (failure) {
      Object.assign(span.attributes, failureAttributes(failure));
      span.error = failure.reason;
    }
    span.end = this.now();
    this.#actors.delete(id);
  }

  #open(name: string, kind: SpanRecord['kind'], parent: number | null, attributes: Attributes): SpanRecord {
    const span: SpanRecord = { id: this.#nextId++, parent, name, kind, start: this.now(), end: null, attributes };
    let loops = this.#loops.get(parent);
    if (!loops) this.#loops.set(parent, (loops = new Map<string, { count: number; latest: SpanRecord | null }>()));
    const key = `${kind} ${name}`;
    const loop = loops.get(key) ?? { count: 0, latest: null };
    loops.set(key, loop);
    loop.count++;
    if (loop.count > LOOP_SPANS) {
      // Ended by now (its state was left, its actor answered or was stopped): it and what it held make way, its
      // time added to what the folded ones took.
      const previous = loop.latest;
      if (previous) this.#drop(previous.id);
      const before = previous ? Number(previous.attributes[ATTR.foldedMs] ?? 0) + (previous.end ?? previous.start) - previous.start : 0;
      span.attributes[ATTR.folded] = loop.count - LOOP_SPANS - 1;
      span.attributes[ATTR.foldedMs] = before;
      loop.latest = span;
    }
    this.spans.push(span);
    return span;
  }

  /** Takes span `id` and every span under it out of the record list. */
  #drop(id: number): void {
    const dropped = new Set([id]);
    let kept = 0;
    for (const span of this.spans) {
      if (dropped.has(span.id) || (span.parent !== null && dropped.has(span.parent))) dropped.add(span.id);
      else this.spans[kept++] = span;
    }
    this.spans.length = kept;
    for (const gone of dropped) this.#loops.delete(gone);
  }
}
