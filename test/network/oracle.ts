/**
 * What the network step must do, from its documented behaviour (the doc comments of machines/network.ts and of its
 * input's deadlines), not from the chart's states:
 * ask IMDS for its document; a retryable error waits the retry interval and asks again; any other error leaves the
 * machine as it is (`kept`) with IMDS's failure; IMDS's total deadline ends the asking whatever is in flight, `kept`
 * with a TIMEOUT failure carrying the last error seen. A document is planned: a plan goes on to configure, no plan is
 * `kept` with the plan's reason, an error is `failed`. Configuring inspects the machine (a stack goes on to render, no
 * stack is `kept` with the reason), renders, writes and applies (done: `configured`); any error there is `failed`, and so is
 * outliving the configure deadline, counted from the moment configuring began, whatever is in flight then.
 * Only IMDS is asked again: an error of any other step ends the run, retryable or not.
 */
import { KINDS, toFailure, type ErrorCode } from '../../src/core/errors.js';

/** The run's five actors, in the order the step asks them. */
export const ACTORS = ['fetchDocument', 'plan', 'inspect', 'render', 'apply'] as const;
export type ActorName = (typeof ACTORS)[number];

/**
 * The output as the oracle sees it. `why` and `failure.error` are phrases the chart's own must contain: the step's
 * behaviour fixes what they mention (the plan's reason, IMDS's failure, which deadline), not their wording.
 */
export interface SeenNetworkOutput {
  result: 'configured' | 'kept' | 'failed';
  why: string | null;
  failure: { code: ErrorCode; error: string | null; lastError: string | null } | null;
}

export interface NetworkTimings {
  retryIntervalMs: number;
  totalTimeoutMs: number;
  configureTimeoutMs: number;
}

const counts = () => Object.fromEntries(ACTORS.map((a) => [a, 0])) as Record<ActorName, number>;

/** `3500` → `3.5 s`: how a deadline is named in its TIMEOUT failure. */
const seconds = (ms: number) => `${ms / 1000} s`;

export class NetworkOracle {
  now = 0;
  /** Each actor's starts, its starts still running, and its starts a deadline cut short. */
  started = counts();
  aborted = counts();
  inFlight: ActorName | null = 'fetchDocument';
  /** The document each `plan` was given, in order. */
  planInputs: unknown[] = [];
  output: SeenNetworkOutput | null = null;
  private retryAt: number | null = null;
  /** The reason of IMDS's last retryable error, while no answer came. */
  private lastError: string | null = null;
  /** When configuring must have ended; null before configuring began. */
  private configureBy: number | null = null;

  constructor(private readonly timings: NetworkTimings) {
    this.started.fetchDocument = 1;
  }

  /** When the next retry or deadline falls due. */
  get nextDue(): number | null {
    if (this.output) return null;
    if (this.configureBy !== null) return this.configureBy;
    if (this.inFlight === 'plan') return null;
    return Math.min(this.timings.totalTimeoutMs, this.retryAt ?? Infinity);
  }

  /** The actor in flight answered. */
  done(actor: ActorName, value: unknown): void {
    this.expectInFlight(actor);
    if (actor === 'fetchDocument') {
      this.lastError = null;
      this.planInputs.push(value);
      return this.start('plan');
    }
    if (actor === 'plan') {
      const { planned, why } = value as { planned: boolean; why: string | null };
      if (!planned) return this.end({ result: 'kept', why, failure: null });
      this.configureBy = this.now + this.timings.configureTimeoutMs;
      return this.start('inspect');
    }
    if (actor === 'inspect') {
      const { stack, why } = value as { stack: string | null; why: string | null };
      return stack === null ? this.end({ result: 'kept', why, failure: null }) : this.start('render');
    }
    if (actor === 'render') return this.start('apply');
    this.end({ result: 'configured', why: null, failure: null });
  }

  /** The actor in flight failed with `error`. */
  failed(actor: ActorName, error: unknown): void {
    this.expectInFlight(actor);
    const f = toFailure(error);
    const summary = { code: f.code, error: f.data.find(([k]) => k === 'error')?.[1] ?? null, lastError: null };
    this.inFlight = null;
    if (actor !== 'fetchDocument') return this.end({ result: 'failed', why: null, failure: summary });
    if (!f.retryable) return this.end({ result: 'kept', why: f.reason, failure: summary });
    this.lastError = f.reason;
    this.retryAt = this.now + this.timings.retryIntervalMs;
  }

  /** Time passes to `to`: retries start, deadlines end the run. */
  advanceTo(to: number): void {
    while (this.output === null && this.nextDue !== null && this.nextDue <= to) {
      const due = this.nextDue;
      this.now = due;
      if (this.configureBy !== null) this.expire(seconds(this.timings.configureTimeoutMs), 'failed', null);
      else if (due >= this.timings.totalTimeoutMs) this.expire(seconds(this.timings.totalTimeoutMs), 'kept', this.lastError);
      else {
        this.retryAt = null;
        this.start('fetchDocument');
      }
    }
    this.now = to;
  }

  key(): string {
    return JSON.stringify(this);
  }

  clone(): NetworkOracle {
    return Object.assign(Object.create(NetworkOracle.prototype), structuredClone({ ...this })) as NetworkOracle;
  }

  private start(actor: ActorName) {
    this.inFlight = actor;
    this.started[actor]++;
  }

  private end(output: SeenNetworkOutput) {
    this.inFlight = null;
    this.retryAt = null;
    this.output = output;
  }

  /** A deadline passed: whatever is in flight is cut short. IMDS's leaves the machine as it is, saying why. */
  private expire(deadline: string, result: 'kept' | 'failed', lastError: string | null) {
    if (this.inFlight) this.aborted[this.inFlight]++;
    this.end({ result, why: result === 'kept' ? KINDS.TIMEOUT.reason : null, failure: { code: 'TIMEOUT', error: deadline, lastError } });
  }

  private expectInFlight(actor: ActorName) {
    if (this.output !== null || this.inFlight !== actor) throw new Error(`oracle: ${actor} finished, but it is not in flight`);
  }
}
