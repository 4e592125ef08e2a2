/**
 * The IMDS heartbeat (docs/protocol.md#imds-heartbeat): one `GET /metadata/instance?api-version=2018-02-01` whose answer says
 * whether IMDS itself is serving. Failures on our side of the wire (no route, throttling, a 4xx the service
 * would not retry) say nothing about IMDS, so they count as healthy; service errors and documents missing the
 * network fields a VM depends on count as unhealthy, with the reason kept for the observation's `Value`.
 */
import { request } from '../azure/http.js';
import type { CheckOptions, CheckResult } from '../azure/hostplugin.js';
import { BootstateError } from '../core/errors.js';
import { AGENT } from '../core/version.js';

export const IMDS_HEARTBEAT_PATH = '/metadata/instance?api-version=2018-02-01';
/** Statuses restutil retries; one that is still there after the retries is a service error (429 excepted). */
const RETRY_CODES: ReadonlySet<number> = new Set([205, 206, 403, 500, 501, 502, 503, 504, 507, 429]);
const THROTTLED = 429;
const RESOURCE_GONE = 410;

/** Classifies an IMDS status that is not 200: client-side problems are healthy, service errors are not. */
export function classifyImdsStatus(status: number): CheckResult {
  const value = `IMDS answered HTTP status ${status}`;
  if (status === THROTTLED) return { ok: true, value };
  if (status >= 500 || status === RESOURCE_GONE || RETRY_CODES.has(status)) return { ok: false, value };
  if (status >= 400) return { ok: true, value };
  return { ok: false, value };
}

/** Validates an IMDS document; the reason names the first missing or empty field, e.g. `Missing field: [network]`. */
export function validateImdsDocument(text: string): CheckResult {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    return { ok: false, value: `JSON parsing failed: ${(error as Error).message}` };
  }
  try {
    const network = requireField(doc, 'network');
    const iface = (requireField(network, 'interface') as unknown[])[0];
    requireField(iface, 'macAddress');
    const ipv4 = requireField(iface, 'ipv4');
    const address = (requireField(ipv4, 'ipAddress') as unknown[])[0];
    requireField(address, 'privateIpAddress');
  } catch (reason) {
    if (reason instanceof FieldError) return { ok: false, value: reason.message };
    throw reason;
  }
  return { ok: true, value: '' };
}

class FieldError extends Error {}

/** Returns `parent[name]`, or throws the validation reason when it is absent, null or empty. */
function requireField(parent: unknown, name: string): unknown {
  const value = typeof parent === 'object' && parent !== null ? (parent as Record<string, unknown>)[name] : undefined;
  if (value === undefined || value === null) throw new FieldError(`Missing field: [${name}]`);
  if (isEmpty(value)) throw new FieldError(`Empty field: [${name}]`);
  return value;
}

function isEmpty(value: unknown): boolean {
  if (typeof value === 'string' || Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object' && value !== null) return Object.keys(value).length === 0;
  return false;
}

/** One IMDS heartbeat against `origin` (e.g. `http://169.254.169.254`); never throws. */
export async function checkImdsHeartbeat(origin: string, options: CheckOptions): Promise<CheckResult> {
  let res;
  try {
    res = await request(`${origin.replace(/\/+$/, '')}${IMDS_HEARTBEAT_PATH}`, {
      headers: { metadata: 'true', 'user-agent': `${AGENT}+health` },
      connectTimeoutMs: options.requestTimeoutMs,
      requestTimeoutMs: options.requestTimeoutMs,
      signal: options.signal,
    });
  } catch (error) {
    // A 200 too large to read is IMDS serving a document nobody can validate, not a problem on our side.
    if (error instanceof BootstateError && error.code === 'BODY_TOO_LARGE') return { ok: false, value: `IMDS document unreadable: ${error.message}` };
    return { ok: true, value: `IMDS unreachable: ${(error as Error).message}` };
  }
  if (res.status !== 200) return classifyImdsStatus(res.status);
  return validateImdsDocument(res.body.toString('utf8'));
}
