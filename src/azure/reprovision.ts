/**
 * One poll of IMDS `reprovisiondata` (docs/protocol.md#reprovisiondata): a pool VM asks for the customer's ovf-env.xml. Until the VM is
 * claimed IMDS answers 404 (cloud-init also waits through 410 and 429); the chart polls again after its interval.
 * A 2xx is the claim: its document is judged at once, and one that is too large, not UTF-8 or not an Azure
 * ovf-env.xml ends the wait with a non-retryable error, since polling again would only fetch it again.
 */
import { randomUUID } from '../core/random.js';
import type { ImdsConfig } from '../config/defaults.js';
import { BootstateError } from '../core/errors.js';
import type { ParseOvfOptions } from './ovf.js';
import { AGENT } from '../core/version.js';
import { request, type HttpResponse } from './http.js';
import { MAX_OVF_BYTES, type MediaMetadata } from '../core/metadata.js';

export const REPROVISION_PATH = '/metadata/reprovisiondata?api-version=2019-06-01';

/** Answers that mean "not claimed yet" or "IMDS busy": keep waiting. */
export const REPROVISION_WAIT_STATUSES: ReadonlySet<number> = new Set([404, 410, 429, 500, 503]);

/** The `reprovisiondata` URL on the same IMDS as the instance endpoint (so a test's loopback IMDS serves both). */
export function reprovisionUrl(imdsEndpoint: string): string {
  return new URL(REPROVISION_PATH, imdsEndpoint).toString();
}

/** The body limit of a poll: `max_body_bytes`, and never more than an ovf-env.xml may be. */
export function reprovisionBodyLimit(config: Pick<ImdsConfig, 'max_body_bytes'>): number {
  return Math.min(config.max_body_bytes, MAX_OVF_BYTES);
}

/**
 * Makes one request and returns the document's text.
 *
 * @throws BootstateError HTTP_TRANSPORT (retryable), HTTP_STATUS (retryable for the wait statuses); not retryable:
 *   BODY_TOO_LARGE (a 2xx over `reprovisionBodyLimit`), OVF_INVALID (a 2xx body that is not UTF-8).
 */
export async function fetchReprovisionDataOnce(options: { config: ImdsConfig; signal?: AbortSignal }): Promise<string> {
  const url = reprovisionUrl(options.config.endpoint);
  const res = await request(url, {
    method: 'GET',
    headers: { Metadata: 'true', 'User-Agent': AGENT, 'x-ms-client-request-id': randomUUID() },
    connectTimeoutMs: options.config.connection_timeout_secs * 1000,
    requestTimeoutMs: options.config.request_timeout_secs * 1000,
    maxBodyBytes: reprovisionBodyLimit(options.config),
    signal: options.signal,
  });
  return reprovisionTextFrom(res, url);
}

/** The document in one answer to `url`, or the error that answer is (same errors as above, transport aside). */
export function reprovisionTextFrom(res: HttpResponse, url: string): string {
  if (res.status < 200 || res.status > 299) {
    throw new BootstateError('HTTP_STATUS', `reprovisiondata answered HTTP ${res.status}`, {
      data: [
        ['endpoint', url],
        ['status', String(res.status)],
      ],
      retryable: REPROVISION_WAIT_STATUSES.has(res.status),
    });
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(res.body);
  } catch {
    throw new BootstateError('OVF_INVALID', 'reprovisiondata: body is not valid UTF-8', { data: [['problem', 'body is not valid UTF-8']] });
  }
}

/**
 * The customer's ovf-env.xml from a claim's text, parsed as the media's is (the parser loads only now: most boots
 * never claim).
 *
 * @throws BootstateError OVF_INVALID (not well-formed, not an Azure ovf-env.xml) or PASSWORD_TOO_LONG; never retryable.
 */
export async function parseReprovisionData(text: string, options: ParseOvfOptions = {}): Promise<MediaMetadata> {
  const { parseOvfEnv } = await import('./ovf.js');
  return parseOvfEnv(text, { device: 'reprovisiondata', ...options });
}
