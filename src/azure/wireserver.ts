/**
 * Provisioning health reports to the wireserver's JSON endpoint (docs/protocol.md#health-reports): one POST per call, classified as
 * accepted, worth retrying, or refused. The statechart owns retries and the total deadline, and
 * `Retry-After` is ignored so no server can stretch that deadline.
 */
import type { WireserverConfig } from '../config/defaults.js';
import { BootstateError, failure } from '../core/errors.js';
import type { Health } from './health.js';
import { request } from './http.js';
import { encodeFailureReport } from './report.js';
import { AGENT } from '../core/version.js';

export type { Health };

/** Statuses after which the same report may be accepted later. */
export const WIRESERVER_RETRYABLE_STATUSES: ReadonlySet<number> = new Set([429, 500, 503]);

export interface DebugLogger {
  debug(obj: object, msg: string): void;
}

export interface PostHealthOptions {
  config: WireserverConfig;
  health: Health;
  vmId: string;
  /** The encoded failure report; required in spirit for ProvisioningFailed (a generic one is used otherwise). */
  description?: string;
  signal?: AbortSignal;
  log?: DebugLogger;
  /** Called as the report is written to its socket; never if it is not. */
  onSent?: () => void;
}

export interface HealthPostResult {
  /** False when HealthReporter skipped an in-progress report because a final one had started. */
  sent: boolean;
  status: number | null;
}

/**
 * Builds the exact compact JSON body for a health state (keys in the order azure-init sends them).
 *
 * @example
 *   healthBody('Ready', vmId) // '{"state":"Ready"}'
 */
export function healthBody(health: Health, vmId: string, description?: string): string {
  if (health === 'Ready') return JSON.stringify({ state: 'Ready' });
  if (health === 'NotReady/Provisioning') {
    return JSON.stringify({
      details: { description: `Provisioning is still in progress for vm_id=${vmId}.`, subStatus: 'Provisioning' },
      state: 'NotReady',
    });
  }
  const report =
    description ?? encodeFailureReport(failure('UNHANDLED', [['error', 'no failure report was supplied']]), { vmId });
  return JSON.stringify({ details: { description: report, subStatus: 'ProvisioningFailed' }, state: 'NotReady' });
}

/**
 * Sends one health report to `config.health_endpoint`.
 *
 * @throws BootstateError HTTP_TRANSPORT (retryable), HTTP_STATUS (retryable for 429/500/503, otherwise not).
 */
export async function postHealthOnce(options: PostHealthOptions): Promise<HealthPostResult> {
  const { config } = options;
  const endpoint = config.health_endpoint;
  const res = await request(endpoint, {
    method: 'POST',
    headers: {
      'User-Agent': AGENT,
      'x-ms-guest-agent-name': AGENT,
      'content-type': 'application/json',
    },
    body: healthBody(options.health, options.vmId, options.description),
    connectTimeoutMs: config.connection_timeout_secs * 1000,
    requestTimeoutMs: config.read_timeout_secs * 1000,
    // The status is the wireserver's verdict; its body carries nothing we use.
    readBody: false,
    signal: options.signal,
    onSent: options.onSent,
  });
  options.log?.debug({ endpoint, health: options.health, status: res.status, headers: res.headers }, 'wireserver response');
  if (res.status >= 200 && res.status <= 299) return { sent: true, status: res.status };
  throw new BootstateError('HTTP_STATUS', `wireserver answered HTTP ${res.status} to ${options.health}`, {
    data: [
      ['endpoint', endpoint],
      ['status', String(res.status)],
    ],
    retryable: WIRESERVER_RETRYABLE_STATUSES.has(res.status),
  });
}

/** How long an in-progress report whose owner gave up on it may still take to get onto its socket. */
export const IN_PROGRESS_LINGER_MS = 50;

/**
 * An in-progress report's signal and write hook, such that aborting the owner's signal before the report has been
 * written takes effect only once it has been (or after IN_PROGRESS_LINGER_MS). A run that fails a moment after
 * provisioning began (an IMDS answer already in when the chart started, then MissingCustomData) leaves the state
 * that sent the report before its connection is even open; without this the fabric would hear ProvisioningFailed
 * without ever hearing that provisioning started. Its answer is never waited for, and the final report, which
 * waits for it to settle, follows it on the wire.
 */
function lingerUntilWritten(options: PostHealthOptions): Pick<PostHealthOptions, 'signal' | 'onSent'> {
  const owner = options.signal;
  if (!owner) return {};
  const own = new AbortController();
  let written = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const abort = () => {
    clearTimeout(timer);
    own.abort(owner.reason);
  };
  const onOwnerAbort = () => {
    if (written) abort();
    else timer = setTimeout(abort, IN_PROGRESS_LINGER_MS).unref();
  };
  if (owner.aborted) onOwnerAbort();
  else owner.addEventListener('abort', onOwnerAbort, { once: true });
  return {
    signal: own.signal,
    onSent: () => {
      written = true;
      options.onSent?.();
      // Called just before undici writes the request: the abort waits for the write, which the same tick does.
      if (owner.aborted) setImmediate(abort);
    },
  };
}

/**
 * Orders health reports within one run: once a final report (Ready or ProvisioningFailed) is being posted, no
 * in-progress report may reach the wireserver after it. A final post first waits for every in-flight
 * in-progress attempt to settle (their owner aborts them, and an abort before the write waits for the write:
 * lingerUntilWritten), and later in-progress posts are skipped.
 */
export class HealthReporter {
  readonly #inFlight = new Set<Promise<unknown>>();
  #final = false;

  /** Posts one report attempt, keeping the ordering guarantee described on the class. */
  async post(options: PostHealthOptions): Promise<HealthPostResult> {
    if (options.health === 'NotReady/Provisioning') {
      if (this.#final) return { sent: false, status: null };
      const attempt = postHealthOnce({ ...options, ...lingerUntilWritten(options) });
      const settled = attempt.then(
        () => undefined,
        () => undefined,
      );
      this.#inFlight.add(settled);
      // `settled` never rejects (both of its handlers return): nothing waits for this bookkeeping, nothing is lost.
      void settled.finally(() => this.#inFlight.delete(settled));
      return attempt;
    }
    this.#final = true;
    await untilSettledOrAborted([...this.#inFlight], options.signal);
    return postHealthOnce(options);
  }
}

/** Waits for the promises to settle, or rejects as soon as `signal` aborts. */
function untilSettledOrAborted(pending: Promise<unknown>[], signal: AbortSignal | undefined): Promise<void> {
  if (pending.length === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () =>
      reject(
        new BootstateError('HTTP_TRANSPORT', 'aborted while waiting for an in-progress report to settle', {
          data: [['error', 'aborted']],
          retryable: true,
        }),
      );
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    // The in-flight promises never reject (HealthReporter.post keeps them settled-only), so neither does this.
    void Promise.all(pending).then(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
