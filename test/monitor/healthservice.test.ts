import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  appendObservation,
  HealthServiceClient,
  MAX_OBSERVATIONS,
  toWireObservation,
  type Observation,
} from '../../src/azure/healthservice.js';
import { AGENT } from '../../src/core/version.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { deferred, recordingLog, refusedPort } from './helpers.js';

const obs = (name: string, healthy = true, value = ''): Observation => ({
  ObservationName: name,
  IsHealthy: healthy,
  Description: '',
  Value: value,
});

let fabric: FakeFabric;
beforeEach(async () => {
  fabric = await startFakeFabric();
});
afterEach(async () => {
  await fabric.close();
});

function client(url = fabric.healthServiceUrl, requestTimeoutMs = 2_000, signal?: AbortSignal) {
  const unhealthy: Observation[] = [];
  const log = recordingLog();
  const c = new HealthServiceClient({ url, requestTimeoutMs, log, signal, onUnhealthy: (o) => unhealthy.push(o) });
  return { c, unhealthy, log };
}

const bodies = () => fabric.requestsTo('healthService').map((r) => r.body);

describe('HealthService document', () => {
  it('posts one observation as the exact reporttargethealth document with our headers', async () => {
    const { c } = client();
    await c.report(obs('GuestAgentPluginHeartbeat'));
    expect(bodies()).toEqual([
      '{"Api":"reporttargethealth","Version":"1.0","Source":"bootstate","Observations":[{"ObservationName":"GuestAgentPluginHeartbeat","IsHealthy":true,"Description":"","Value":""}]}',
    ]);
    const [request] = fabric.requestsTo('healthService');
    expect(request.method).toBe('POST');
    expect(request.headers['content-type']).toBe('application/json');
    expect(request.headers['user-agent']).toBe(AGENT);
  });

  it('truncates name, description and value to 64, 128 and 128 characters', async () => {
    const { c } = client();
    await c.report({ ObservationName: 'n'.repeat(100), IsHealthy: false, Description: 'd'.repeat(300), Value: 'v'.repeat(300) });
    const sent = JSON.parse(bodies()[0]).Observations[0];
    expect([sent.ObservationName.length, sent.Description.length, sent.Value.length]).toEqual([64, 128, 128]);
  });

  it('counts characters, not UTF-16 units, when truncating', () => {
    const wire = toWireObservation(obs('x', true, '😀'.repeat(200)));
    expect(Array.from(wire.Value)).toHaveLength(128);
    expect(wire.Value.endsWith('😀')).toBe(true);
  });
});

describe('HealthService buffering', () => {
  it('keeps only the newest entry of a full list before appending', () => {
    let list: Observation[] = [];
    for (let i = 0; i < MAX_OBSERVATIONS; i++) list = appendObservation(list, obs(`o${i}`));
    expect(list).toHaveLength(10);
    list = appendObservation(list, obs('o10'));
    expect(list.map((o) => o.ObservationName)).toEqual(['o9', 'o10']);
  });

  it('queues what arrives during a POST, trimmed by the buffer rule, and sends it with the next POST', async () => {
    const hold = deferred();
    fabric.setHealthService({ gate: hold.promise }, 'ok');
    const { c } = client();
    const first = c.report(obs('o0'));
    await fabric.waitForRequests('healthService', 1);
    for (let i = 1; i <= 12; i++) void c.report(obs(`o${i}`));
    expect(c.pending.map((o) => o.ObservationName)).toEqual(['o10', 'o11', 'o12']);
    hold.resolve();
    await first;
    await c.flush();
    const sent = bodies().map((b) => JSON.parse(b).Observations.map((o: Observation) => o.ObservationName));
    expect(sent).toEqual([['o0'], ['o10', 'o11', 'o12']]);
    expect(c.pending).toEqual([]);
  });

  it('clears the list after a refused POST, so the next POST carries only the new observation', async () => {
    fabric.setHealthService({ status: 500 }, 'ok');
    const { c, log } = client();
    await c.report(obs('first'));
    await c.report(obs('second'));
    const sent = bodies().map((b) => JSON.parse(b).Observations.map((o: Observation) => o.ObservationName));
    expect(sent).toEqual([['first'], ['second']]);
    expect(log.lines.filter((l) => l.level === 'warn')).toHaveLength(1);
  });

  it('hands every unhealthy observation to the sink after its POST attempt, and only those', async () => {
    const { c, unhealthy } = client();
    await c.report(obs('a', true));
    await c.report(obs('b', false, 'Missing field: [network]'));
    expect(unhealthy).toEqual([obs('b', false, 'Missing field: [network]')]);
  });
});

describe('HealthService failures', () => {
  it('logs a refused connection and resolves, still handing unhealthy observations to the sink', async () => {
    const { c, unhealthy, log } = client(`http://127.0.0.1:${await refusedPort()}/HealthService`);
    await expect(c.report(obs('x', false))).resolves.toBeUndefined();
    expect(unhealthy).toHaveLength(1);
    expect(log.lines.some((l) => l.level === 'warn' && l.msg === 'HealthService POST failed')).toBe(true);
  });

  it('records a 200 whose body is too large to read as a failed POST naming the limit, and resolves', async () => {
    fabric.setHealthService({ bigBody: 1024 * 1024 });
    const posted: unknown[] = [];
    const c = new HealthServiceClient({
      url: fabric.healthServiceUrl,
      requestTimeoutMs: 2_000,
      log: recordingLog(),
      onUnhealthy: () => undefined,
      onPosted: (_batch, result) => posted.push(result),
    });
    await expect(c.report(obs('x'))).resolves.toBeUndefined();
    expect(posted).toEqual([{ ok: false, error: 'response body from /HealthService is larger than 65536 bytes' }]);
    expect(c.pending).toEqual([]);
  });

  it('gives up on a stalled POST after the request timeout', async () => {
    fabric.setHealthService('stall');
    const { c } = client(fabric.healthServiceUrl, 200);
    const started = Date.now();
    await c.report(obs('x'));
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(c.pending).toEqual([]);
  });

  it('abandons a POST in flight when its signal aborts', async () => {
    fabric.setHealthService('stall');
    const abort = new AbortController();
    const { c } = client(fabric.healthServiceUrl, 30_000, abort.signal);
    const pending = c.report(obs('x'));
    await fabric.waitForRequests('healthService', 1);
    abort.abort();
    await expect(pending).resolves.toBeUndefined();
  });

  it('survives a sink that throws', async () => {
    const log = recordingLog();
    const c = new HealthServiceClient({
      url: fabric.healthServiceUrl,
      requestTimeoutMs: 2_000,
      log,
      onUnhealthy: () => {
        throw new Error('kvp full');
      },
    });
    await expect(c.report(obs('x', false))).resolves.toBeUndefined();
    expect(log.lines.some((l) => l.msg === 'unhealthy-observation sink failed')).toBe(true);
  });
});
