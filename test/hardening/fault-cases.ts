/**
 * The fault matrix: one row per way IMDS or the wireserver (its Ready report) can misbehave, with the outcome the
 * agent must reach (docs/reliability.md). Deadlines are short so the whole table runs quickly.
 */
import type { Behaviour, FakeFabric } from '../../src/fabric/fake-fabric.js';
import { withOsProfile } from '../../src/fabric/imds-document.js';
import type { Endpoint } from './endpoints.js';

export type Service = 'imds' | 'wireserver';

export interface CaseEnv {
  fabric: FakeFabric;
  /** A loopback port nobody listens on. */
  closedPort: number;
  /** Where redirects point; it must receive nothing. */
  redirectTarget: Endpoint;
  /** A wireserver that answers Ready with a body of one byte per second. */
  trickler: Endpoint;
}

export interface Expected {
  /** Final state of the run: provisioned, or failed with this reason. */
  result: 'provisioned' | 'failed';
  reason: string | null;
  exitCode: number;
  /** IMDS only: `last_error` of the ProvisioningFailed report (the kind of the last attempt's failure). */
  lastError?: string;
  /** IMDS only: `status` of the ProvisioningFailed report. */
  status?: string;
  /** IMDS only: supporting data the ProvisioningFailed report must carry, e.g. `{ key: 'compute.vmId' }`. */
  data?: Record<string, string>;
  /** How many attempts the endpoint must see: exactly one, or more than one (it was retried). */
  attempts?: 'one' | 'several';
  /**
   * Longest allowed time from entering the faulty phase to the final report (IMDS) or to exit (wireserver):
   * the configured total deadline plus one second, for prompt failures too (`attempts: 'one'` shows they
   * did not wait for it).
   */
  maxMs: number;
}

export interface FaultCase {
  service: Service;
  fault: string;
  /** Scripts the fabric; returns config values to override (e.g. the endpoint). */
  arrange(env: CaseEnv): Record<string, number | string | boolean> | void;
  /** Config for the faulty service, over the defaults below. */
  config?: Record<string, number>;
  expected: Expected;
}

export const TOTAL_SECS = 2;
export const IMDS_CONFIG = { total_retry_timeout_secs: TOTAL_SECS, retry_interval_secs: 0.2, request_timeout_secs: 1, connection_timeout_secs: 1 };
export const WIRESERVER_CONFIG = { total_retry_timeout_secs: TOTAL_SECS, retry_interval_secs: 0.2, read_timeout_secs: 1, connection_timeout_secs: 1 };

const DEADLINE_MS = TOTAL_SECS * 1000 + 1000;
/** Only the total deadline may end these attempts. */
const LONG_IMDS_ATTEMPT = { request_timeout_secs: 60 };
const LONG_WIRESERVER_ATTEMPT = { read_timeout_secs: 60 };

const IMDS_RETRYABLE = [400, 404, 410, 429, 500, 503];
const WIRESERVER_RETRYABLE = [429, 500, 503];
const NON_RETRYABLE = [401, 403, 405, 408, 409, 501, 502, 504];
const REDIRECTS = [300, 301, 302, 303, 304, 307, 308];
const WIRESERVER_ONLY_NON_RETRYABLE = [400, 404, 410];

const timedOut = (lastError?: string): Expected => ({
  result: 'failed',
  reason: 'operation timed out',
  exitCode: 1,
  lastError,
  maxMs: DEADLINE_MS,
});
const refusedStatus = (status: number): Expected => ({
  result: 'failed',
  reason: 'http status error',
  exitCode: 1,
  status: String(status),
  attempts: 'one',
  maxMs: DEADLINE_MS,
});
/**
 * A well-formed 2xx that can never be used (IMDS fails rather than answer partially: docs/protocol.md#imds-request):
 * one attempt, then the failure naming what was wrong with it.
 */
const refusedAnswer = (reason: string, exitCode: number, data: Record<string, string>): Expected => ({
  result: 'failed',
  reason,
  exitCode,
  data,
  attempts: 'one',
  maxMs: DEADLINE_MS,
});
const accepted: Expected = { result: 'provisioned', reason: null, exitCode: 0, attempts: 'one', maxMs: DEADLINE_MS };

const imdsEndpoint = (port: number) => `http://127.0.0.1:${port}/metadata/instance?api-version=2023-11-15&extended=true`;

/** Plays `behaviour` to the Ready report only; InProgress is always accepted. */
const onReady = (fabric: FakeFabric, behaviour: Behaviour) =>
  fabric.setWireserver((request) => (request.body.includes('"Ready"') ? behaviour : 'ok'));

const imds = (fault: string, arrange: FaultCase['arrange'], expected: Expected, config?: Record<string, number>): FaultCase => ({
  service: 'imds',
  fault,
  arrange,
  expected,
  config,
});
const wire = (fault: string, behaviour: Behaviour, expected: Expected, config?: Record<string, number>): FaultCase => ({
  service: 'wireserver',
  fault,
  arrange: ({ fabric }) => onReady(fabric, behaviour),
  expected,
  config,
});

export const IMDS_CASES: FaultCase[] = [
  imds('connection refused', ({ closedPort }) => ({ endpoint: imdsEndpoint(closedPort) }), { ...timedOut('HTTP error'), attempts: 'several' }),
  imds('accept, then silence', ({ fabric }) => fabric.setImds('stall'), { ...timedOut(), attempts: 'one' }, LONG_IMDS_ATTEMPT),
  imds('headers, then silence', ({ fabric }) => fabric.setImds('headers-then-stall'), { ...timedOut(), attempts: 'one' }, LONG_IMDS_ATTEMPT),
  imds('body trickling 1 byte/s', ({ fabric }) => fabric.setImds({ trickle: 1 }), { ...timedOut(), attempts: 'one' }, LONG_IMDS_ATTEMPT),
  imds('connection reset mid-body', ({ fabric }) => fabric.setImds('reset-mid-body'), { ...timedOut('HTTP error'), attempts: 'several' }),
  imds('10 MiB body (a 200)', ({ fabric }) => fabric.setImds({ bigBody: 10 * 1024 * 1024 }),
    refusedAnswer('response body too large', 1, { limit: '1048576', path: '/metadata/instance' })),
  imds('503 with a 2 MiB error page', ({ fabric }) => fabric.setImds({ status: 503, body: 'x'.repeat(2 * 1024 * 1024) }), {
    ...timedOut('http status error'),
    attempts: 'several',
  }),
  // A garbled body is damage in transit, not IMDS's answer: asked again within the budget (azure-init's malformed_response).
  imds('invalid UTF-8 (a 200)', ({ fabric }) => fabric.setImds('invalid-utf8'), { ...timedOut('error parsing IMDS metadata'), attempts: 'several' }),
  imds('body cut short, Content-Length saying so (a 200)', ({ fabric }) => fabric.setImds('truncated-body'),
    { ...timedOut('error parsing IMDS metadata'), attempts: 'several' }),
  imds('body shorter than its Content-Length, then a clean close', ({ fabric }) => fabric.setImds('short-body'),
    { ...timedOut('HTTP error'), attempts: 'several' }),
  imds('valid JSON, wrong shape (array)', ({ fabric }) => fabric.setImds({ status: 200, body: [1, 2, 3] }),
    refusedAnswer('invalid IMDS metadata', 78, { key: '(document)' })),
  imds('valid JSON, wrong shape (wrong types)', ({ fabric }) => fabric.setImds({ status: 200, body: { compute: { osProfile: { adminUsername: 42 } } } }),
    refusedAnswer('invalid IMDS metadata', 78, { key: 'compute.osProfile.adminUsername' })),
  imds('the example document with computerName a number', ({ fabric }) => fabric.setImdsDocument(withOsProfile({ computerName: 42 })),
    refusedAnswer('invalid IMDS metadata', 78, { key: 'compute.osProfile.computerName' })),
  ...IMDS_RETRYABLE.map((status) =>
    imds(`${status} forever`, ({ fabric }) => fabric.setImds({ status }), { ...timedOut('http status error'), attempts: 'several' }),
  ),
  ...NON_RETRYABLE.map((status) => imds(`${status}`, ({ fabric }) => fabric.setImds({ status }), refusedStatus(status))),
  ...REDIRECTS.map((status) =>
    imds(`${status} redirect to another server`, ({ fabric, redirectTarget }) =>
      fabric.setImds({ status, headers: { location: `${redirectTarget.url}/metadata/instance` } }), refusedStatus(status)),
  ),
  ...[503, 429].map((status) =>
    imds(`${status} with Retry-After: 99999`, ({ fabric }) => fabric.setImds({ status, headers: { 'retry-after': '99999' } }), {
      ...timedOut('http status error'),
      attempts: 'several',
    }),
  ),
  imds('200 with an empty body', ({ fabric }) => fabric.setImds({ status: 200, body: '' }), { ...timedOut('error parsing IMDS metadata'), attempts: 'several' }),
];

export const WIRESERVER_CASES: FaultCase[] = [
  {
    service: 'wireserver',
    fault: 'connection refused',
    arrange: ({ closedPort }) => ({ health_endpoint: `http://127.0.0.1:${closedPort}/provisioning/health` }),
    expected: { ...timedOut(), attempts: 'several' },
  },
  wire('accept, then silence', 'stall', { ...timedOut(), attempts: 'one' }, LONG_WIRESERVER_ATTEMPT),
  // A health report's answer is its status: a 200 whose body stalls, trickles, breaks or never ends was accepted.
  wire('headers, then silence (a 200: accepted on its status)', 'headers-then-stall', accepted, LONG_WIRESERVER_ATTEMPT),
  {
    service: 'wireserver',
    fault: 'body trickling 1 byte/s (a 200: accepted on its status)',
    arrange: ({ trickler }) => ({ health_endpoint: `${trickler.url}/provisioning/health` }),
    expected: accepted,
    config: LONG_WIRESERVER_ATTEMPT,
  },
  wire('connection reset mid-body (a 200: accepted on its status)', 'reset-mid-body', accepted),
  wire('10 MiB body (a 200: accepted on its status)', { bigBody: 10 * 1024 * 1024 }, accepted),
  wire('invalid UTF-8 (a 200: accepted)', 'invalid-utf8', accepted),
  wire('valid JSON, odd shape (a 200: accepted)', { status: 200, body: { unexpected: [1, { state: 'NotReady' }] } }, accepted),
  ...WIRESERVER_RETRYABLE.map((status) => wire(`${status} forever`, { status }, { ...timedOut(), attempts: 'several' })),
  ...[...WIRESERVER_ONLY_NON_RETRYABLE, ...NON_RETRYABLE].map((status) => wire(`${status}`, { status }, refusedStatus(status))),
  ...REDIRECTS.map((status) => ({
    service: 'wireserver' as const,
    fault: `${status} redirect to another server`,
    arrange: ({ fabric, redirectTarget }: CaseEnv) =>
      onReady(fabric, { status, headers: { location: `${redirectTarget.url}/provisioning/health` } }),
    expected: refusedStatus(status),
  })),
  ...[503, 429].map((status) =>
    wire(`${status} with Retry-After: 99999`, { status, headers: { 'retry-after': '99999' } }, { ...timedOut(), attempts: 'several' }),
  ),
  wire('200 with an empty body', { status: 200, body: '' }, accepted),
];
