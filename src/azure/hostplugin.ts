/**
 * The host GA plugin's liveness endpoints (port 32526 on the wireserver address, docs/protocol.md#host-plugin). Each check is one
 * attempt whose answer is classified, never thrown: the monitor statechart decides what a streak of failures
 * means. A 502 is the plugin telling us its upstream (storage) failed, so it never counts against the plugin.
 */
import { request } from './http.js';
import { AGENT } from '../core/version.js';

/** The outcome of one check: whether this single answer counts as healthy, and the text worth reporting. */
export interface CheckResult {
  ok: boolean;
  /** Empty when there is nothing to say; otherwise the error or reason, for the observation's `Value`. */
  value: string;
}

/** A `/versions` check also says whether the plugin speaks the protocol version we need. */
export interface VersionsResult extends CheckResult {
  available: boolean;
}

export interface CheckOptions {
  requestTimeoutMs: number;
  signal?: AbortSignal;
}

export const OK_CODES: ReadonlySet<number> = new Set([200, 201, 202]);
export const HOST_PLUGIN_UPSTREAM_FAILURE = 502;
/** The protocol version whose presence in `/versions` makes the plugin usable. */
export const REQUIRED_API_VERSION = '2015-09-01';

/** Whether a status means the plugin itself failed: a server error other than the upstream-failure 502. */
export function failedAtHostPlugin(status: number): boolean {
  return status >= 500 && status !== HOST_PLUGIN_UPSTREAM_FAILURE;
}

/** Classifies a `/health` answer: OK codes and 502 are healthy, every other status is a failure. */
export function classifyHealth(status: number): CheckResult {
  if (OK_CODES.has(status) || status === HOST_PLUGIN_UPSTREAM_FAILURE) return { ok: true, value: '' };
  return { ok: false, value: `HTTP status ${status}` };
}

/** Classifies a `/versions` answer: healthy unless the plugin failed; available iff the list names 2015-09-01. */
export function classifyVersions(status: number, body: string): VersionsResult {
  if (failedAtHostPlugin(status)) return { ok: false, available: false, value: `HTTP status ${status}` };
  if (!OK_CODES.has(status)) return { ok: true, available: false, value: `HTTP status ${status}` };
  let versions: unknown;
  try {
    versions = JSON.parse(body);
  } catch {
    return { ok: true, available: false, value: 'versions list is not JSON' };
  }
  if (!Array.isArray(versions)) return { ok: true, available: false, value: 'versions list is not a JSON array' };
  if (!versions.includes(REQUIRED_API_VERSION)) {
    return { ok: true, available: false, value: `version ${REQUIRED_API_VERSION} not supported` };
  }
  return { ok: true, available: true, value: '' };
}

/**
 * Talks to the host GA plugin.
 *
 * @example
 *   const plugin = new HostPluginClient('http://168.63.129.16:32526');
 *   const { ok } = await plugin.checkHealth({ requestTimeoutMs: 10_000, signal });
 */
export class HostPluginClient {
  readonly #base: string;

  /** `base` is the plugin's origin, e.g. `http://168.63.129.16:32526`. */
  constructor(base: string) {
    this.#base = base.replace(/\/+$/, '');
  }

  /** One `GET /health`; a transport failure (refused, reset, timeout) counts as a failed heartbeat. */
  async checkHealth(options: CheckOptions): Promise<CheckResult> {
    try {
      const res = await this.#get('/health', options);
      return classifyHealth(res.status);
    } catch (error) {
      return { ok: false, value: (error as Error).message };
    }
  }

  /** One `GET /versions`; a transport failure is unhealthy and leaves the plugin unavailable. */
  async checkVersions(options: CheckOptions): Promise<VersionsResult> {
    try {
      const res = await this.#get('/versions', options);
      return classifyVersions(res.status, res.body.toString('utf8'));
    } catch (error) {
      return { ok: false, available: false, value: (error as Error).message };
    }
  }

  #get(path: string, { requestTimeoutMs, signal }: CheckOptions) {
    return request(`${this.#base}${path}`, {
      headers: { 'user-agent': AGENT },
      connectTimeoutMs: requestTimeoutMs,
      requestTimeoutMs,
      maxBodyBytes: 64 * 1024,
      signal,
    });
  }
}
