/**
 * The observers of one provisioning run, as one XState `inspect` callback: the journal, KVP transition telemetry, the
 * live feed (`--inspect ws://…`), the caller's own observer, systemd's STATUS= lines and, when an OTLP endpoint is
 * configured, the run's trace (run-trace.ts). Each is behind its sink
 * (src/logging/sinks.ts): whatever one throws turns that one off, and the chart runs on.
 */
import type { InspectionEvent } from 'xstate';
import type { LiveInspector } from '../inspect/live.js';
import type { KvpTelemetry } from '../kvp/telemetry.js';
import type { Sinks } from '../logging/sinks.js';
import { JournalObserver, type JournalSettings } from './journal.js';
import type { RunTrace } from './run-trace.js';
import { TransitionTelemetry } from './transition-telemetry.js';

export interface ObserverOptions {
  journal: JournalSettings;
  /** KVP telemetry, when this run writes to KVP: each state left becomes a record. */
  kvp: KvpTelemetry | null;
  /** `--inspect ws://…`: where the live feed goes, and where its problems are told. */
  liveUrl?: string;
  onLiveProblem(message: string): void;
  /** The caller's own observer (the demo prints transitions). */
  caller?: (event: InspectionEvent) => void;
  /** systemd's STATUS= lines, under Type=notify. */
  status: { inspect(event: InspectionEvent): void } | null;
  /** The run's trace, recorded only when it is to be exported. */
  trace?: RunTrace | null;
}

export class RunObservers {
  readonly journal: JournalObserver;
  readonly #transitions: TransitionTelemetry | null;
  readonly #live: LiveInspector | null;
  /** The one observer the chart's actor is given. */
  readonly inspect: (event: InspectionEvent) => void;

  private constructor(private readonly sinks: Sinks, options: ObserverOptions, live: LiveInspector | null) {
    this.journal = new JournalObserver(sinks, options.journal);
    const transitions = options.kvp ? new TransitionTelemetry(options.kvp) : null;
    this.#transitions = transitions;
    this.#live = live;
    const observeTransitions = transitions ? sinks.observer('kvp telemetry', (event: InspectionEvent) => transitions.inspect(event)) : null;
    const observeLive = live ? sinks.observer('live inspector', (event: InspectionEvent) => live.inspect(event)) : null;
    const observeCaller = options.caller ? sinks.observer('inspect', options.caller) : null;
    const { trace } = options;
    const observeTrace = trace ? sinks.observer('trace', (event: InspectionEvent) => trace.inspect(event)) : null;
    const { journal } = this;
    const { status } = options;
    this.inspect = (event) => {
      journal.inspect(event);
      observeTransitions?.(event);
      observeLive?.(event);
      observeCaller?.(event);
      status?.inspect(event);
      observeTrace?.(event);
    };
  }

  /** The observers of a run; the live feed's module is loaded only when `liveUrl` asks for it. */
  static async start(sinks: Sinks, options: ObserverOptions): Promise<RunObservers> {
    let live: LiveInspector | null = null;
    if (options.liveUrl) {
      const { startLiveInspector } = await import('../inspect/live.js');
      live = startLiveInspector(options.liveUrl, { onProblem: options.onLiveProblem });
    }
    return new RunObservers(sinks, options, live);
  }

  /** Records the states still active (the final one) as KVP telemetry. */
  flushTelemetry(): void {
    this.sinks.observer('kvp telemetry', () => this.#transitions?.flush())();
  }

  /** Closes the journal and stops the live feed; returns where the journal is (null when there is none). */
  async close(): Promise<string | null> {
    const path = this.journal.path;
    this.journal.close();
    try {
      await this.#live?.stop();
    } catch (error) {
      this.sinks.fail('live inspector', error);
    }
    return path;
  }
}
