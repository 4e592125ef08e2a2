/**
 * Test doubles for running the monitor chart on the real interpreter: gated measurement actors that settle only
 * when a test says so, a reporter that records what the chart sent it, and clocks that move only when told.
 */
import { fromCallback, fromPromise, SimulatedClock } from 'xstate';
import type { Measurement, ReporterEvent, VersionsMeasurement } from '../../machines/monitor.js';
import type { Observation } from '../../src/azure/healthservice.js';

/**
 * A SimulatedClock that fires one chosen timer: a model path may let a later timer fire before an earlier one,
 * which `increment` would never allow, so time only moves when a timer is fired.
 */
export class StepClock extends SimulatedClock {
  #now = 0;
  readonly #timers = new Map<number, { timeout: number; due: number; fn: () => void }>();

  override now(): number {
    return this.#now;
  }

  override setTimeout(fn: (...args: unknown[]) => void, timeout: number): number {
    const id = super.setTimeout(fn, timeout);
    this.#timers.set(id, { timeout, due: this.#now + timeout, fn });
    return id;
  }

  override clearTimeout(id: number): void {
    super.clearTimeout(id);
    this.#timers.delete(id);
  }

  /** Fires the one pending timer scheduled with `timeout` ms, moving the clock to its due time if later. */
  fire(timeout: number): void {
    const matching = [...this.#timers].filter(([, t]) => t.timeout === timeout);
    if (matching.length !== 1) throw new Error(`expected one pending ${timeout} ms timer, found ${matching.length}`);
    const [id, timer] = matching[0];
    this.clearTimeout(id);
    this.#now = Math.max(this.#now, timer.due);
    timer.fn();
  }

  /** How many timers are pending. */
  get pending(): number {
    return this.#timers.size;
  }
}

interface Gate {
  resolve(value: unknown): void;
  reject(error: unknown): void;
  signal: AbortSignal;
}

/** Promise actors that settle only when the test resolves or rejects their gate by actor id. */
export class Gates {
  readonly #open = new Map<string, Gate>();
  /** Every signal handed to a gated actor, by actor id, in invocation order. */
  readonly signals = new Map<string, AbortSignal[]>();
  /** How many times each actor was invoked. */
  readonly invocations = new Map<string, number>();

  /** A promise actor registered under `id` that waits for its gate. */
  actor<T>(id: string) {
    return fromPromise<T>(
      ({ signal }) =>
        new Promise<T>((resolve, reject) => {
          this.#open.set(id, { resolve: resolve as (v: unknown) => void, reject, signal });
          this.signals.set(id, [...(this.signals.get(id) ?? []), signal]);
          this.invocations.set(id, (this.invocations.get(id) ?? 0) + 1);
        }),
    );
  }

  /** The ids of the actors whose gate is open and whose signal is not aborted. */
  inFlight(): string[] {
    return [...this.#open].filter(([, g]) => !g.signal.aborted).map(([id]) => id).sort();
  }

  /** Resolves the open gate of `id`. */
  resolve(id: string, value: unknown): void {
    this.#take(id).resolve(value);
  }

  /** Rejects the open gate of `id`. */
  reject(id: string, error: unknown): void {
    this.#take(id).reject(error);
  }

  #take(id: string): Gate {
    const gate = this.#open.get(id);
    if (!gate) throw new Error(`no open gate for ${id}`);
    this.#open.delete(id);
    return gate;
  }
}

/** The event a test sends the fake reporter to make it throw, as a broken reporter would. */
export const BREAK_REPORTER = { type: 'TEST.BREAK' } as const;

/** A reporter that records every observation the chart sends; it throws when sent BREAK_REPORTER. */
export function recordingReporter(observations: Observation[]) {
  return fromCallback<ReporterEvent>(({ receive }) => {
    receive((event) => {
      if ((event.type as string) === BREAK_REPORTER.type) throw new Error('reporter broke');
      observations.push(event.observation);
    });
  });
}

/** Gated implementations of every actor of the monitor chart. */
export function gatedActors(gates: Gates, observations: Observation[]) {
  return {
    checkHeartbeat: gates.actor<Measurement>('checkHeartbeat'),
    checkVersions: gates.actor<VersionsMeasurement>('checkVersions'),
    checkImds: gates.actor<Measurement>('checkImds'),
    reporter: recordingReporter(observations),
    flush: gates.actor<void>('flush'),
  };
}

/** Lets promise callbacks and the events they send run to completion. */
export async function settle(rounds = 3): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}
