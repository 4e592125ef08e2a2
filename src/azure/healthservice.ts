/**
 * The fabric's health store (`POST /HealthService` on the wireserver, docs/protocol.md#healthservice). Observations carry no
 * timestamps, so the client keeps almost nothing: a pending list of at most ten, posted whole and dropped
 * after every attempt, whatever the answer. A failed POST is logged and never thrown: the channel being
 * watched may be the very thing that is down.
 */
import { request } from './http.js';
import { AGENT } from '../core/version.js';

/** One health observation as it goes on the wire (field names and order: docs/protocol.md#healthservice-document). */
export interface Observation {
  ObservationName: string;
  IsHealthy: boolean;
  Description: string;
  Value: string;
}

/** The document posted to the health store. */
export interface HealthDocument {
  Api: 'reporttargethealth';
  Version: '1.0';
  Source: string;
  Observations: Observation[];
}

/** The pino-compatible subset of a logger the monitor writes to. */
export interface MonitorLog {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface HealthServiceOptions {
  /** Full URL, normally `http://168.63.129.16:80/HealthService`. */
  url: string;
  /** Budget for one POST: connect, headers and body. */
  requestTimeoutMs: number;
  /** Receives every unhealthy observation after each POST attempt (the integrator wires it to KVP). */
  onUnhealthy: (observation: Observation) => void;
  log: MonitorLog;
  /** Observer name in the document. */
  source?: string;
  /** Aborts any POST in flight, e.g. when the process must exit now. */
  signal?: AbortSignal;
  /** Told the outcome of every POST: the HTTP status, or the error when there was no answer. */
  onPosted?: (batch: readonly Observation[], outcome: PostOutcome) => void;
}

export interface PostOutcome {
  ok: boolean;
  status?: number;
  error?: string;
}

export const MAX_OBSERVATIONS = 10;
const NAME_MAX = 64;
const DESCRIPTION_MAX = 128;
const VALUE_MAX = 128;

/** Builds the wire form of an observation, truncating name, description and value to 64/128/128 characters. */
export function toWireObservation(observation: Observation): Observation {
  return {
    ObservationName: sliceChars(observation.ObservationName, NAME_MAX),
    IsHealthy: observation.IsHealthy,
    Description: sliceChars(observation.Description ?? '', DESCRIPTION_MAX),
    Value: sliceChars(observation.Value ?? '', VALUE_MAX),
  };
}

/** Appends with the buffering rule (docs/protocol.md#healthservice-buffering): a list already holding ten or more keeps only its newest entry first. */
export function appendObservation(list: Observation[], observation: Observation): Observation[] {
  const kept = list.length >= MAX_OBSERVATIONS ? list.slice(-1) : list;
  return [...kept, observation];
}

/** Builds the document for a list of observations. */
export function healthDocument(observations: Observation[], source = 'bootstate'): HealthDocument {
  return { Api: 'reporttargethealth', Version: '1.0', Source: source, Observations: observations };
}

/**
 * Posts observations to the health store one attempt at a time.
 *
 * @example
 *   const client = new HealthServiceClient({ url, requestTimeoutMs: 10_000, onUnhealthy, log });
 *   await client.report({ ObservationName: 'GuestAgentPluginHeartbeat', IsHealthy: true, Description: '', Value: '' });
 */
export class HealthServiceClient {
  readonly #options: HealthServiceOptions;
  #pending: Observation[] = [];
  #draining: Promise<void> | null = null;

  constructor(options: HealthServiceOptions) {
    this.#options = options;
  }

  /** Observations waiting for the next POST (at most ten). */
  get pending(): readonly Observation[] {
    return this.#pending;
  }

  /**
   * Queues one observation and posts. Only one POST is ever in flight: what arrives meanwhile waits for the
   * next one, so a POST normally carries exactly one observation. Resolves once the queue is empty again.
   */
  report(observation: Observation): Promise<void> {
    this.#pending = appendObservation(this.#pending, toWireObservation(observation));
    return this.flush();
  }

  /** Resolves when everything queued has had its one POST attempt (immediately if nothing is queued). */
  flush(): Promise<void> {
    if (!this.#draining && this.#pending.length > 0) {
      this.#draining = this.#drain().finally(() => {
        this.#draining = null;
      });
    }
    return this.#draining ?? Promise.resolve();
  }

  async #drain(): Promise<void> {
    while (this.#pending.length > 0) {
      const batch = this.#pending;
      this.#pending = [];
      await this.#post(batch);
      this.#emitUnhealthy(batch);
    }
  }

  async #post(batch: Observation[]): Promise<void> {
    const { url, requestTimeoutMs, log, signal } = this.#options;
    const body = JSON.stringify(healthDocument(batch, this.#options.source));
    try {
      const res = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': AGENT },
        body,
        connectTimeoutMs: requestTimeoutMs,
        requestTimeoutMs,
        maxBodyBytes: 64 * 1024,
        signal,
      });
      const ok = res.status >= 200 && res.status < 300;
      if (ok) {
        log.debug({ observations: batch.length, status: res.status }, 'health observations sent');
      } else {
        log.warn({ observations: batch.length, status: res.status }, 'HealthService refused the observations');
      }
      this.#options.onPosted?.(batch, { ok, status: res.status });
    } catch (error) {
      log.warn({ observations: batch.length, error: (error as Error).message }, 'HealthService POST failed');
      this.#options.onPosted?.(batch, { ok: false, error: (error as Error).message });
    }
  }

  #emitUnhealthy(batch: Observation[]): void {
    for (const observation of batch) {
      if (observation.IsHealthy) continue;
      try {
        this.#options.onUnhealthy(observation);
      } catch (error) {
        this.#options.log.warn({ error: (error as Error).message }, 'unhealthy-observation sink failed');
      }
    }
  }
}

/** Cuts a string to at most `max` characters (code points, so a surrogate pair is never split). */
function sliceChars(text: string, max: number): string {
  if (text.length <= max) return text;
  return Array.from(text).slice(0, max).join('');
}
