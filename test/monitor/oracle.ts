/**
 * What `bootstate monitor` must send and measure, from the HealthService protocol (docs/protocol.md#healthservice) and
 * docs/monitor.md, never from machines/monitor.ts. It is told what happened (a measurement finished, broke, a period
 * elapsed, STOP, the flush ended, the reporter broke) and answers how many requests each check has made, which are in
 * flight, the observations sent, and the output.
 *
 * - Each signal is measured at start; every finished measurement sends exactly one observation about its signal
 *   (heartbeat and IMDS rolled up: unhealthy once the failure streak is as old as the roll-up window; versions as
 *   measured). A measurement that breaks (a bug) sends nothing and keeps the streak.
 * - Without --once each signal is measured again one period after its last measurement ended; /versions only until
 *   the plugin is available. With --once each signal is measured once, then the queue is flushed: "completed", 0.
 * - STOP aborts the measurements in flight, flushes once: "stopped", 0. A broken reporter ends the run at once
 *   (nothing more to send to): "failed", 1.
 * - A run going on from an earlier one (the timer's --once cycles) starts with its streaks, and does not measure
 *   /versions again once the plugin was found available. Every output carries the streaks and that finding on.
 */
import { HEARTBEAT, IMDS_HEARTBEAT, VERSIONS, type MonitorInput, type MonitorState } from '../../machines/monitor.js';
import type { Observation } from '../../src/azure/healthservice.js';

export type Signal = 'heartbeat' | 'versions' | 'imds';
export const CHECK: Record<Signal, string> = { heartbeat: 'checkHeartbeat', versions: 'checkVersions', imds: 'checkImds' };
const NAME: Record<Signal, string> = { heartbeat: HEARTBEAT, versions: VERSIONS, imds: IMDS_HEARTBEAT };

export interface SeenMeasurement {
  ok: boolean;
  value: string;
  at: number;
  available?: boolean;
}

export class MonitorOracle {
  observations: Observation[] = [];
  requests: Record<string, number>;
  output: { result: 'completed' | 'stopped' | 'failed'; exitCode: number; state: MonitorState } | null = null;
  signals: Record<Signal, 'measuring' | 'waiting' | 'done'>;
  private phase: 'running' | 'flushing' | 'over' = 'running';
  private stopRequested = false;
  private streak: Record<'heartbeat' | 'imds', number | null>;
  private available: boolean;

  constructor(private readonly input: MonitorInput) {
    this.streak = { heartbeat: input.saved?.heartbeatStreak ?? null, imds: input.saved?.imdsStreak ?? null };
    this.available = input.saved?.versionsAvailable ?? false;
    this.signals = { heartbeat: 'measuring', versions: this.available ? 'done' : 'measuring', imds: 'measuring' };
    this.requests = { checkHeartbeat: 1, checkVersions: this.available ? 0 : 1, checkImds: 1, flush: 0 };
  }

  /** The actors in flight. */
  inFlight(): string[] {
    if (this.phase === 'flushing') return ['flush'];
    if (this.phase === 'over') return [];
    return (Object.keys(this.signals) as Signal[]).filter((s) => this.signals[s] === 'measuring').map((s) => CHECK[s]).sort();
  }

  get running(): boolean {
    return this.phase === 'running';
  }

  get flushing(): boolean {
    return this.phase === 'flushing';
  }

  get over(): boolean {
    return this.phase === 'over';
  }

  measured(signal: Signal, m: SeenMeasurement): void {
    this.expectMeasuring(signal);
    if (signal === 'versions') {
      this.available = m.available === true;
      this.observations.push({ ObservationName: VERSIONS, IsHealthy: m.ok, Description: '', Value: m.value });
    } else {
      const rollup = signal === 'heartbeat' ? this.input.heartbeatRollupMs : this.input.imdsRollupMs;
      const start = m.ok ? null : (this.streak[signal] ?? m.at);
      this.streak[signal] = start;
      const unhealthy = start !== null && m.at - start >= rollup;
      this.observations.push({ ObservationName: NAME[signal], IsHealthy: !unhealthy, Description: '', Value: signal === 'heartbeat' ? '' : m.value });
    }
    this.next(signal, signal === 'versions' && m.available === true);
  }

  broke(signal: Signal): void {
    this.expectMeasuring(signal);
    this.next(signal, false);
  }

  periodOver(signal: Signal): void {
    if (this.phase !== 'running' || this.signals[signal] !== 'waiting') throw new Error(`oracle: ${signal} is not waiting`);
    this.signals[signal] = 'measuring';
    this.requests[CHECK[signal]]!++;
  }

  stop(): void {
    if (this.phase !== 'running') return;
    this.stopRequested = true;
    this.flush();
  }

  flushEnded(): void {
    if (this.phase !== 'flushing') throw new Error('oracle: no flush is running');
    this.phase = 'over';
    this.output = { result: this.stopRequested ? 'stopped' : 'completed', exitCode: 0, state: this.carried() };
  }

  reporterBroke(): void {
    if (this.phase === 'over') throw new Error('oracle: the run is over, there is no reporter');
    this.phase = 'over';
    this.output = { result: 'failed', exitCode: 1, state: this.carried() };
  }

  private carried(): MonitorState {
    return { heartbeatStreak: this.streak.heartbeat, imdsStreak: this.streak.imds, versionsAvailable: this.available };
  }

  /** The state that decides the next answers: the streaks too, which the output carries on. */
  key(): string {
    const { observations: _o, requests: _r, input: _i, ...rest } = this as any;
    return JSON.stringify(rest);
  }

  clone(): MonitorOracle {
    return Object.assign(Object.create(MonitorOracle.prototype), structuredClone({ ...this })) as MonitorOracle;
  }

  private next(signal: Signal, available: boolean) {
    this.signals[signal] = this.input.once || available ? 'done' : 'waiting';
    if (Object.values(this.signals).every((s) => s === 'done')) this.flush();
  }

  private flush() {
    this.phase = 'flushing';
    this.requests.flush!++;
  }

  private expectMeasuring(signal: Signal) {
    if (this.phase !== 'running' || this.signals[signal] !== 'measuring') throw new Error(`oracle: ${signal} is not being measured`);
  }
}
