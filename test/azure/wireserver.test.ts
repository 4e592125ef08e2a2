import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closeAll } from '../../src/azure/http.js';
import { encodeFailureReport } from '../../src/azure/report.js';
import { HealthReporter, IN_PROGRESS_LINGER_MS, healthBody, postHealthOnce } from '../../src/azure/wireserver.js';
import { DEFAULT_CONFIG, type WireserverConfig } from '../../src/config/defaults.js';
import { failure } from '../../src/core/errors.js';
import { AGENT } from '../../src/core/version.js';
import { type FakeFabric, startFakeFabric } from '../../src/fabric/fake-fabric.js';
import { errorOf } from '../support/errors.js';
import { backlogFullListener } from '../support/listeners.js';

const vmId = 'd0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8';
let fabric: FakeFabric;
let config: WireserverConfig;

beforeAll(async () => {
  fabric = await startFakeFabric();
  config = { ...DEFAULT_CONFIG.wireserver, health_endpoint: fabric.healthUrl, connection_timeout_secs: 2, read_timeout_secs: 0.2 };
});
afterEach(() => fabric.setWireserver());
afterAll(async () => {
  await closeAll();
  await fabric.close();
});

function recordingLogger() {
  const entries: Array<{ obj: Record<string, unknown>; msg: string }> = [];
  return { entries, debug: (obj: object, msg: string) => entries.push({ obj: obj as Record<string, unknown>, msg }) };
}

describe('healthBody', () => {
  it('is {"state":"Ready"} for Ready', () => {
    expect(healthBody('Ready', vmId)).toBe('{"state":"Ready"}');
  });

  it('names the VM in the in-progress description', () => {
    expect(healthBody('NotReady/Provisioning', vmId)).toBe(
      `{"details":{"description":"Provisioning is still in progress for vm_id=${vmId}.","subStatus":"Provisioning"},"state":"NotReady"}`,
    );
  });

  it('carries the encoded report as the failure description', () => {
    const report = encodeFailureReport(failure('HOSTNAME_FAILED', [['error', 'a "quoted" | piped']]), { vmId });
    expect(healthBody('NotReady/ProvisioningFailed', vmId, report)).toBe(
      `{"details":{"description":${JSON.stringify(report)},"subStatus":"ProvisioningFailed"},"state":"NotReady"}`,
    );
  });

  it('falls back to an unhandled-error report when a failure has no description', () => {
    const body = JSON.parse(healthBody('NotReady/ProvisioningFailed', vmId));
    expect(body.details.description).toContain('reason=unhandled error');
  });
});

describe('postHealthOnce', () => {
  it('POSTs the body with exactly the agent, guest-agent-name and content-type headers', async () => {
    await postHealthOnce({ config, health: 'Ready', vmId });
    const seen = fabric.requestsTo('health').at(-1)!;
    expect(seen.method).toBe('POST');
    expect(seen.url).toBe('/provisioning/health');
    expect(seen.body).toBe('{"state":"Ready"}');
    expect(seen.headers['user-agent']).toBe(AGENT);
    expect(seen.headers['x-ms-guest-agent-name']).toBe(AGENT);
    expect(seen.headers['content-type']).toBe('application/json');
    expect(fabric.reports.at(-1)).toEqual({ state: 'Ready' });
  });

  it.each([200, 201, 202, 204])('accepts HTTP %i', async (status) => {
    fabric.setWireserver({ status });
    await expect(postHealthOnce({ config, health: 'NotReady/Provisioning', vmId })).resolves.toEqual({ sent: true, status });
  });

  it.each([429, 500, 503])('classifies HTTP %i as retryable and ignores Retry-After', async (status) => {
    fabric.setWireserver({ status, headers: { 'retry-after': '86400' } });
    const started = Date.now();
    const error = await errorOf(postHealthOnce({ config, health: 'Ready', vmId }));
    expect(Date.now() - started).toBeLessThan(1000);
    expect(error.code).toBe('HTTP_STATUS');
    expect(error.retryable).toBe(true);
    expect(error.data).toEqual([
      ['endpoint', fabric.healthUrl],
      ['status', String(status)],
    ]);
  });

  it.each([400, 401, 403, 404, 405, 408, 410, 501, 502, 504, 301, 302])(
    'classifies HTTP %i as a non-retryable status error',
    async (status) => {
      fabric.setWireserver({ status });
      const error = await errorOf(postHealthOnce({ config, health: 'Ready', vmId }));
      expect(error.code).toBe('HTTP_STATUS');
      expect(error.retryable).toBe(false);
      expect(error.data).toEqual([
        ['endpoint', fabric.healthUrl],
        ['status', String(status)],
      ]);
    },
  );

  it('classifies a stalled wireserver as a retryable transport error within the attempt budget', async () => {
    fabric.setWireserver('stall');
    const started = Date.now();
    const error = await errorOf(postHealthOnce({ config, health: 'Ready', vmId }));
    expect(error.code).toBe('HTTP_TRANSPORT');
    expect(error.retryable).toBe(true);
    expect(Date.now() - started).toBeLessThan(200 + 1000);
  });

  it('classifies a refused connection as a retryable transport error', async () => {
    const gone = await startFakeFabric();
    const url = gone.healthUrl;
    await gone.close();
    const error = await errorOf(postHealthOnce({ config: { ...config, health_endpoint: url }, health: 'Ready', vmId }));
    expect(error.code).toBe('HTTP_TRANSPORT');
    expect(error.retryable).toBe(true);
  });

  it('logs the headers of accepted and refused responses at debug', async () => {
    const log = recordingLogger();
    fabric.setWireserver({ status: 200, headers: { 'x-ms-request-id': 'abc' } }, { status: 403, headers: { 'x-ms-request-id': 'def' } });
    await postHealthOnce({ config, health: 'NotReady/Provisioning', vmId, log });
    await errorOf(postHealthOnce({ config, health: 'Ready', vmId, log }));
    expect(log.entries.map((e) => [e.obj.status, (e.obj.headers as Record<string, string>)['x-ms-request-id']])).toEqual([
      [200, 'abc'],
      [403, 'def'],
    ]);
  });
});

describe('HealthReporter', () => {
  it.each([
    ['aborted by its owner', true],
    ['answered by the server', false],
  ])('holds a final report until the in-flight in-progress attempt is %s', async (_how, abort) => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    fabric.setWireserver((request) => (request.body.includes('"Provisioning"') ? { gate } : 'ok'));
    const before = fabric.requestsTo('health').length;
    const reporter = new HealthReporter();
    const inProgress = new AbortController();
    const progress = reporter.post({
      config: { ...config, read_timeout_secs: 30 },
      health: 'NotReady/Provisioning',
      vmId,
      signal: inProgress.signal,
    });
    progress.catch(() => undefined);
    await fabric.waitForRequests('health', before + 1);

    const ready = reporter.post({ config, health: 'Ready', vmId });
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(fabric.requestsTo('health')).toHaveLength(before + 1);

    if (abort) inProgress.abort();
    else release();
    await expect(ready).resolves.toEqual({ sent: true, status: 200 });
    release();
    const states = fabric.requestsTo('health').slice(before).map((r) => JSON.parse(r.body).state);
    expect(states).toEqual(['NotReady', 'Ready']);
  });

  it('still sends an in-progress report its owner aborted before it was written, and the final report after it', async () => {
    const before = fabric.requestsTo('health').length;
    const reporter = new HealthReporter();
    const owner = new AbortController();
    const progress = reporter.post({ config, health: 'NotReady/Provisioning', vmId, signal: owner.signal });
    // Aborted in the same tick: its connection is not even open yet (a run that fails as soon as it starts).
    owner.abort();
    await expect(progress).rejects.toMatchObject({ code: 'HTTP_TRANSPORT' });
    await expect(reporter.post({ config, health: 'NotReady/ProvisioningFailed', vmId, description: 'result=error' })).resolves.toEqual({ sent: true, status: 200 });
    const subStatuses = fabric.requestsTo('health').slice(before).map((r) => JSON.parse(r.body).details?.subStatus);
    expect(subStatuses).toEqual(['Provisioning', 'ProvisioningFailed']);
  });

  it('gives up an aborted in-progress report whose connection never completes after the linger bound', async () => {
    const listener = await backlogFullListener();
    if (!listener) throw new Error('python3 is needed to hold a listener with a full accept queue');
    try {
      const reporter = new HealthReporter();
      const owner = new AbortController();
      const started = performance.now();
      const progress = reporter.post({
        config: { ...config, health_endpoint: `http://127.0.0.1:${listener.port}/provisioning/health`, connection_timeout_secs: 30 },
        health: 'NotReady/Provisioning',
        vmId,
        signal: owner.signal,
      });
      owner.abort();
      await expect(progress).rejects.toMatchObject({ code: 'HTTP_TRANSPORT' });
      const took = performance.now() - started;
      expect(took).toBeGreaterThanOrEqual(IN_PROGRESS_LINGER_MS - 5);
      expect(took).toBeLessThan(IN_PROGRESS_LINGER_MS + 2000);
    } finally {
      listener.close();
    }
  });

  it('never sends an in-progress report once a final one has started', async () => {
    const reporter = new HealthReporter();
    await reporter.post({ config, health: 'NotReady/ProvisioningFailed', vmId, description: 'result=error' });
    const before = fabric.requestsTo('health').length;
    await expect(reporter.post({ config, health: 'NotReady/Provisioning', vmId })).resolves.toEqual({ sent: false, status: null });
    expect(fabric.requestsTo('health')).toHaveLength(before);
  });

  it('sends a final report at once when nothing is in flight', async () => {
    const reporter = new HealthReporter();
    await reporter.post({ config, health: 'NotReady/Provisioning', vmId });
    await expect(reporter.post({ config, health: 'Ready', vmId })).resolves.toEqual({ sent: true, status: 200 });
  });

  it('lets a final report be aborted while it waits', async () => {
    fabric.setWireserver('stall');
    const reporter = new HealthReporter();
    const progress = reporter.post({ config: { ...config, read_timeout_secs: 30 }, health: 'NotReady/Provisioning', vmId });
    progress.catch(() => undefined);
    const controller = new AbortController();
    const ready = errorOf(reporter.post({ config, health: 'Ready', vmId, signal: controller.signal }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const abortedAt = Date.now();
    controller.abort();
    const error = await ready;
    expect(Date.now() - abortedAt).toBeLessThan(100);
    expect(error.data).toContainEqual(['error', 'aborted']);
  });
});
