/**
 * One retry loop, the shape of every request the chart repeats: `requesting` invokes the actor; a retryable error
 * records it (`onRetry`) and waits in `backoff` for `every`, then asks again; any other error takes `onFatal`; an
 * answer takes `onDone`. With a `deadline`, the loop as a whole is bounded: leaving it aborts the request in flight,
 * so no server can stretch the deadline. `meta.retry` names both delays for the overview, which draws the loop as
 * one box with a badge.
 */
import type { ErrorActorEvent } from 'xstate';
import { chart } from './setup.js';

type StateConfig = Parameters<typeof chart.createStateConfig>[0];
type Invoke = Exclude<NonNullable<StateConfig['invoke']>, readonly unknown[]>;
type Delay = Extract<keyof NonNullable<StateConfig['after']>, string>;
type AfterTransition = NonNullable<StateConfig['after']>[Delay];
type Transition = Exclude<NonNullable<Invoke['onError']>, readonly unknown[]>;
type Actions = NonNullable<Extract<Transition, { actions?: unknown }>['actions']>;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
type Request = DistributiveOmit<Invoke, 'onError'>;

/** What the overview reads from a retry loop's state. */
export interface RetryMeta {
  retry: { attempt: 'requesting'; backoff: 'backoff'; every: string; deadline?: string };
}

export interface Retried<I extends Request = Request> {
  /** The request: id, src, input, and where an answer goes. */
  invoke: I;
  /** The delay between attempts. */
  every: Delay;
  /** The loop's total deadline and where it leads, if the loop has one. */
  deadline?: { after: Delay; then: AfterTransition };
  /** Recorded on a retryable error before the backoff. */
  onRetry?: Actions;
  /** A non-retryable error: one transition, or guarded ones tried in order. */
  onFatal: Transition | readonly Transition[];
  /** Anything else the loop's own state has (entry actions, event handlers, tags). */
  state?: Omit<StateConfig, 'initial' | 'states' | 'after' | 'meta' | 'invoke'>;
}

/** The error an actor failed with, as the `params` of an action or guard. */
export const withError = ({ event }: { event: ErrorActorEvent }) => ({ error: event.error });

/** Any step's error fails the run: recorded, then the failure report. */
export const failRun = { target: '#provisioning.reportingFailure', actions: { type: 'recordFailure', params: withError } } as const;

/** Builds the state of a retry loop. */
export function retried<I extends Request>({ invoke, every, deadline, onRetry, onFatal, state }: Retried<I>): StateConfig {
  const meta: RetryMeta = { retry: { attempt: 'requesting', backoff: 'backoff', every, ...(deadline ? { deadline: deadline.after } : {}) } };
  return chart.createStateConfig({
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
  });
}
