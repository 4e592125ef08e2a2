/**
 * The building blocks every chart repeats, in one place: the retry loop (`retryFor(chart)` → `retried`), the
 * periodic loop (`periodic`), the guard that tells a retryable error from a final one, the TIMEOUT failure a loop's
 * deadline leaves, and durations in seconds as timer delays.
 *
 * A retry loop: `requesting` invokes the actor; a retryable error records it (`onRetry`) and waits in `backoff` for
 * `every`, then asks again; any other error takes `onFatal`; an answer takes `onDone`. With a `deadline`, the loop
 * as a whole is bounded: leaving it aborts the request in flight, so no server can stretch the deadline. `meta.retry`
 * names both delays for the overview, which draws the loop as one box with a badge; `meta.budget` and
 * `meta.attempts` name the deadline and the actor whose starts are attempts, for the observers.
 */
import type { ErrorActorEvent } from 'xstate';
import { MAX_TIMER_MS } from '../src/config/schema.js';
import { failure, toFailure, type Failure } from '../src/core/errors.js';

/** What `setup(...)` returns, as far as the builders here use it. */
export interface AnyChart {
  createStateConfig(config: never): unknown;
}
type StateConfig<C extends AnyChart> = Parameters<C['createStateConfig']>[0];
type Invoke<C extends AnyChart> = Exclude<NonNullable<StateConfig<C>['invoke']>, readonly unknown[]>;
type Delay<C extends AnyChart> = Extract<keyof NonNullable<StateConfig<C>['after']>, string>;
type AfterTransition<C extends AnyChart> = NonNullable<StateConfig<C>['after']>[Delay<C>];
type Transition<C extends AnyChart> = Exclude<NonNullable<Invoke<C>['onError']>, readonly unknown[]>;
type Actions<C extends AnyChart> = NonNullable<Extract<Transition<C>, { actions?: unknown }>['actions']>;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
type Request<C extends AnyChart> = DistributiveOmit<Invoke<C>, 'onError'>;

/**
 * What a state tells the observers about itself: the delay that bounds it (`budget`, a delay of the chart, or
 * seconds when the bound is not the chart's own), and the invoked actor whose starts are its attempts.
 */
export interface PhaseMeta {
  budget?: string | number;
  attempts?: string;
}

/** What the overview reads from a retry loop's state, and the observers its budget and attempts. */
export interface RetryMeta extends PhaseMeta {
  retry: { attempt: 'requesting'; backoff: 'backoff'; every: string; deadline?: string };
}

export interface Retried<C extends AnyChart> {
  /** The request: id, src, input, and where an answer goes. */
  invoke: Request<C>;
  /** The delay between attempts. */
  every: Delay<C>;
  /** The loop's total deadline and where it leads, if the loop has one. */
  deadline?: { after: Delay<C>; then: AfterTransition<C> };
  /** Recorded on a retryable error before the backoff. */
  onRetry?: Actions<C>;
  /** A non-retryable error: one transition, or guarded ones tried in order. */
  onFatal: Transition<C> | readonly Transition<C>[];
  /** Anything else the loop's own state has (entry actions, event handlers, tags). */
  state?: Omit<StateConfig<C>, 'initial' | 'states' | 'after' | 'meta' | 'invoke'>;
}

/** The error an actor failed with, as the `params` of an action or guard. */
export const withError = ({ event }: { event: ErrorActorEvent }) => ({ error: event.error });

/** The guard every retry loop asks (`retryable`, with `withError`): whether the error says to try again. */
export const retryable = (_: unknown, params: { error: unknown }) => toFailure(params.error).retryable;

/** A TIMEOUT failure saying what did not happen in time, with the last error seen before, if any. */
export function timedOut(error: string, last: Failure | null): Failure {
  return failure('TIMEOUT', [['error', error], ...(last ? ([['last_error', last.reason]] as [string, string][]) : [])]);
}

/**
 * A duration in seconds as a timer delay in ms, never above 2^31−1 (beyond it the runtime fires after 1 ms) nor below
 * `min`.
 */
export const timerMs = (secs: number, min = 0): number => Math.min(MAX_TIMER_MS, Math.max(min, Math.round(secs * 1000)));

/** The retry loop builder of one chart: `retried` states typed against that chart's actors, delays and actions. */
export function retryFor<C extends AnyChart>(chart: C) {
  return function retried({ invoke, every, deadline, onRetry, onFatal, state }: Retried<C>): StateConfig<C> {
    const meta: RetryMeta = {
      retry: { attempt: 'requesting', backoff: 'backoff', every, ...(deadline ? { deadline: deadline.after } : {}) },
      ...(deadline ? { budget: deadline.after } : {}),
      attempts: (invoke as unknown as { id: string }).id,
    };
    const config = {
      ...state,
      meta,
      initial: 'requesting',
      ...(deadline ? { after: { [deadline.after]: deadline.then } } : {}),
      states: {
        requesting: {
          invoke: { ...invoke, onError: [{ guard: { type: 'retryable', params: withError }, target: 'backoff', actions: onRetry ?? [] }, ...[onFatal].flat()] },
        },
        backoff: { after: { [every]: 'requesting' } },
      },
    };
    return chart.createStateConfig(config as never) as StateConfig<C>;
  };
}

export interface Periodic<C extends AnyChart> {
  /** The measurement: id, src, and where each answer and error goes (`'done'` ends the loop, `'waiting'` goes on). */
  invoke: Invoke<C>;
  /** The pause between measurements. */
  every: Delay<C>;
  /** A state before the first measurement (default: none, the loop starts measuring). */
  starting?: StateConfig<C>;
}

/** A loop that measures, waits `every`, and measures again, until a transition of the measurement goes to `done`. */
export function periodicFor<C extends AnyChart>(chart: C) {
  return ({ invoke, every, starting }: Periodic<C>): StateConfig<C> => {
    const config = {
      initial: starting ? 'starting' : 'measuring',
      states: {
        ...(starting ? { starting } : {}),
        measuring: { invoke },
        waiting: { after: { [every]: 'measuring' } },
        done: { type: 'final' },
      },
    };
    return chart.createStateConfig(config as never) as StateConfig<C>;
  };
}
