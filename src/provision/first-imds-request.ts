/**
 * A first boot's first IMDS request, sent by src/provision/provision.ts as soon as the config is loaded, the instance lock is
 * held and no marker says this VM is provisioned: before the logger, the chart and the OS code are even loaded. The chart is told it was sent (`imdsSent` in its input) and its IMDS attempt 1 takes it; from then on it is
 * an attempt like any other: the actor's signal aborts it, the chart's deadline and retries apply, its failure is
 * the actor's error. A run that ends without taking it drops it, aborting it if still in flight.
 */
import type { ImdsConfig } from '../config/defaults.js';
import { headStart } from '../../machines/provisioning/head-start.js';
import type { HttpResponse } from '../azure/http.js';
import { requestInstanceMetadata } from '../azure/imds.js';

/** The request as its taker sees it. */
export interface TakenRequest {
  /** IMDS's answer, unread; rejects as `request()` does (transport errors, aborts). */
  response: Promise<HttpResponse>;
  /** Settles once the request has been written to its socket; never if it was not. */
  sent: Promise<void>;
}

export class FirstImdsRequest {
  readonly #controller = new AbortController();
  readonly #response: Promise<HttpResponse>;
  readonly #sent: Promise<void>;
  #open = true;

  constructor(config: ImdsConfig) {
    let markSent!: () => void;
    this.#sent = new Promise((resolve) => (markSent = resolve));
    this.#response = requestInstanceMetadata({ config, signal: this.#controller.signal, onSent: () => markSent() });
    // Nobody awaits it until it is taken: its failure is the taker's to report, not an unhandled rejection.
    this.#response.catch(() => undefined);
  }

  /** The request, for the IMDS attempt whose signal is `signal`. Once only; null after that or after `drop`. */
  take(signal: AbortSignal): TakenRequest | null {
    if (!this.#open) return null;
    this.#open = false;
    if (signal.aborted) this.#controller.abort(signal.reason);
    else signal.addEventListener('abort', () => this.#controller.abort(signal.reason), { once: true });
    return { response: this.#response, sent: this.#sent };
  }

  /**
   * Settles once the request is on its socket or its attempt has ended, or after `ms` at most (a connection that
   * hangs). The connection and the write each need a turn of the event loop, which the synchronous loading of the
   * rest of the agent would otherwise hold up until it is done.
   */
  written(ms: number): Promise<void> {
    const gate = headStart(ms);
    void this.#sent.then(gate.open);
    void this.#response.then(gate.open, gate.open);
    return gate.wait(this.#controller.signal);
  }

  /** Nobody is to take it (the chart went another way, or the run ended): aborts it if still in flight. */
  drop(): void {
    if (!this.#open) return;
    this.#open = false;
    this.#controller.abort();
  }
}
