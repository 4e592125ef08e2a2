/**
 * `runMonitor` end to end against the fake fabric on loopback: the documents the health store receives, the
 * unhealthy sink, and stopping by signal.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { InspectionEvent } from 'xstate';
import type { Observation } from '../../src/azure/healthservice.js';
import { DEFAULT_CONFIG, type Config } from '../../src/config/defaults.js';
import { defaultEndpoints, runMonitor, type RunMonitorOptions } from '../../src/monitor/run.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { deferred, recordingLog } from './helpers.js';

let fabric: FakeFabric;
beforeEach(async () => {
  fabric = await startFakeFabric();
});
afterEach(async () => {
  await fabric.close();
});

/** Configuration with periods and windows in seconds (fractions allowed) and a short request timeout. */
function config(monitor: Partial<Config['monitor']> = {}): Config {
  return { ...DEFAULT_CONFIG, monitor: { ...DEFAULT_CONFIG.monitor, request_timeout_secs: 2, ...monitor } };
}

function run(options: Partial<RunMonitorOptions> & { config: Config }) {
  const unhealthy: Observation[] = [];
  const log = recordingLog();
  const done = runMonitor({
    once: false,
    log,
    onUnhealthy: (o) => unhealthy.push(o),
    handleSignals: false,
    endpoints: { healthService: fabric.healthServiceUrl, hostPlugin: fabric.hostPluginUrl, imds: new URL(fabric.imdsUrl).origin },
    ...options,
  });
  return { done, unhealthy, log };
}

const documents = () => fabric.requestsTo('healthService').map((r) => r.body);
const observed = () => documents().flatMap((b) => JSON.parse(b).Observations as Observation[]);

describe('bootstate monitor --once', () => {
  it('posts one exact document per signal and exits 0', async () => {
    // Staggered answers keep the three POSTs apart, so each carries exactly one observation.
    fabric.setHostPluginVersions({ delayMs: 150 });
    fabric.setImds({ delayMs: 300 });
    const { done } = run({ config: config(), once: true });
    expect(await done).toMatchObject({ exitCode: 0 });
    expect(documents()).toEqual([
      '{"Api":"reporttargethealth","Version":"1.0","Source":"bootstate","Observations":[{"ObservationName":"GuestAgentPluginHeartbeat","IsHealthy":true,"Description":"","Value":""}]}',
      '{"Api":"reporttargethealth","Version":"1.0","Source":"bootstate","Observations":[{"ObservationName":"GuestAgentPluginVersions","IsHealthy":true,"Description":"","Value":""}]}',
      '{"Api":"reporttargethealth","Version":"1.0","Source":"bootstate","Observations":[{"ObservationName":"InstanceMetadataHeartbeat","IsHealthy":true,"Description":"","Value":""}]}',
    ]);
  });

  it('reports a broken IMDS document with its reason, healthy until the roll-up window passes', async () => {
    fabric.setImdsDocument({ compute: {} });
    const { done, unhealthy } = run({ config: config(), once: true });
    expect(await done).toMatchObject({ exitCode: 0 });
    expect(observed().find((o) => o.ObservationName === 'InstanceMetadataHeartbeat')).toEqual({
      ObservationName: 'InstanceMetadataHeartbeat',
      IsHealthy: true,
      Description: '',
      Value: 'Missing field: [network]',
    });
    expect(unhealthy).toEqual([]);
  });

  it('lets the inspector see the chart from start to final state', async () => {
    const events: InspectionEvent[] = [];
    const { done } = run({ config: config(), once: true, inspect: (e) => events.push(e) });
    await done;
    const types = events.filter((e) => e.type === '@xstate.event').map((e) => (e as { event: { type: string } }).event.type);
    expect(types).toContain('xstate.done.actor.checkHeartbeat');
    expect(types).toContain('xstate.done.actor.flush');
  });
});

describe('bootstate monitor with short periods', () => {
  it('turns the heartbeat unhealthy after its window, tells the sink, and recovers on the first success', async () => {
    let failing = true;
    fabric.setHostPlugin(() => (failing ? { status: 500 } : 'ok'));
    const abort = new AbortController();
    const { done, unhealthy } = run({
      config: config({ heartbeat_period_secs: 0.05, heartbeat_rollup_secs: 0.2, imds_period_secs: 0.05, versions_period_secs: 0.05 }),
      signal: abort.signal,
    });
    await waitFor(() => unhealthy.some((o) => o.ObservationName === 'GuestAgentPluginHeartbeat'));
    failing = false;
    await waitFor(() => observed().filter((o) => o.ObservationName === 'GuestAgentPluginHeartbeat').at(-1)?.IsHealthy === true);
    abort.abort();
    expect(await done).toMatchObject({ exitCode: 0 });

    const heartbeats = observed().filter((o) => o.ObservationName === 'GuestAgentPluginHeartbeat').map((o) => o.IsHealthy);
    const firstUnhealthy = heartbeats.indexOf(false);
    // The k-th /health answer is the k-th heartbeat observation; the flip waits for the 200 ms window.
    const requests = fabric.requestsTo('hostPluginHealth');
    expect(firstUnhealthy).toBeGreaterThanOrEqual(1);
    expect(requests[firstUnhealthy].receivedAt - requests[0].receivedAt).toBeGreaterThanOrEqual(150);
    expect(heartbeats.slice(0, firstUnhealthy).every(Boolean)).toBe(true);
    expect(heartbeats.at(-1)).toBe(true);
    expect(unhealthy.every((o) => !o.IsHealthy)).toBe(true);
    for (const body of documents()) expect(JSON.parse(body).Observations.length).toBeLessThanOrEqual(10);
  });
});

describe('stopping the monitor', () => {
  it('on SIGTERM aborts measurements, posts what is queued once, and exits 0', async () => {
    const hold = deferred();
    fabric.setHealthService({ gate: hold.promise });
    fabric.setImds('stall');
    const { done } = run({ config: config(), handleSignals: true });
    await fabric.waitForRequests('healthService', 1);
    await fabric.waitForRequests('hostPluginVersions', 1);
    await fabric.waitForRequests('hostPluginHealth', 1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(process.listeners('SIGTERM')).toHaveLength(1);
    process.emit('SIGTERM');
    hold.resolve();
    expect(await done).toMatchObject({ exitCode: 0 });
    expect(process.listeners('SIGTERM')).toHaveLength(0);
    // The heartbeat went out first; versions queued behind it and got its one POST during the flush; the stalled
    // IMDS check was aborted, so it never produced an observation.
    const names = observed().map((o) => o.ObservationName);
    expect(names.sort()).toEqual(['GuestAgentPluginHeartbeat', 'GuestAgentPluginVersions']);
    expect(documents()).toHaveLength(2);
  });
});

describe('default endpoints', () => {
  it('derive from the wireserver address, the host plugin port and the IMDS endpoint', () => {
    expect(defaultEndpoints(DEFAULT_CONFIG)).toEqual({
      healthService: 'http://168.63.129.16:80/HealthService',
      hostPlugin: 'http://168.63.129.16:32526',
      imds: 'http://169.254.169.254',
    });
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
