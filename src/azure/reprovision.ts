/**
 * One poll of IMDS `reprovisiondata` (spec §1.1): a pool VM asks for the customer's ovf-env.xml. Until the VM is
 * claimed IMDS answers 404 (cloud-init also waits through 410 and 429); the chart polls again after its interval.
 */
import { randomUUID } from '../random.js';
import type { ImdsConfig } from '../config/defaults.js';
import { BootstateError } from '../errors.js';
import { AGENT } from '../version.js';
import { request } from './http.js';

export const REPROVISION_PATH = '/metadata/reprovisiondata?api-version=2019-06-01';

/** Answers that mean "not claimed yet" or "IMDS busy": keep waiting. */
export const REPROVISION_WAIT_STATUSES: ReadonlySet<number> = new Set([404, 410, 429, 500, 503]);

/** The `reprovisiondata` URL on the same IMDS as the instance endpoint (so a test's loopback IMDS serves both). */
export function reprovisionUrl(imdsEndpoint: string): string {
  return new URL(REPROVISION_PATH, imdsEndpoint).toString();
}

/**
 * Makes one request and returns the document's text.
 *
 * @throws BootstateError HTTP_TRANSPORT (retryable), HTTP_STATUS (retryable for the wait statuses), OVF_INVALID for
 *   a body that is not UTF-8.
 */
export async function fetchReprovisionDataOnce(options: { config: ImdsConfig; signal?: AbortSignal }): Promise<string> {
  const url = reprovisionUrl(options.config.endpoint);
  const res = await request(url, {
    method: 'GET',
    headers: { Metadata: 'true', 'User-Agent': AGENT, 'x-ms-client-request-id': randomUUID() },
    connectTimeoutMs: options.config.connection_timeout_secs * 1000,
    requestTimeoutMs: options.config.request_timeout_secs * 1000,
    maxBodyBytes: options.config.max_body_bytes,
    signal: options.signal,
  });
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
