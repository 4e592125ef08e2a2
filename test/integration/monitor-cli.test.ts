/**
 * `bootstate monitor --once` as shipped (the built CLI), against a fake fabric whose wireserver listens on port 80
 * of a loopback address — the HealthService port is fixed at 80, as on Azure — so this needs root.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { AGENT } from './agent.js';

const isRoot = process.getuid?.() === 0;
const WIRESERVER = '127.77.0.1';

describe.skipIf(!isRoot)('bootstate monitor --once', () => {
  let fabric: FakeFabric;
  let root: string;
  beforeAll(async () => {
    fabric = await startFakeFabric({ wireserver: { host: WIRESERVER, port: 80 }, hostPlugin: { host: WIRESERVER } });
    root = mkdtempSync(join(tmpdir(), 'bootstate-monitor-'));
  });
  afterAll(async () => {
    await fabric.close();
  });

  /** Runs the agent asynchronously: the fake fabric lives in this process and must keep answering. */
  async function runOnce(): Promise<{ status: number | null; stderr: string }> {
    const config = join(root, 'bootstate.toml');
    writeFileSync(
      config,
      [
        `[imds]\nendpoint = "${fabric.imdsUrl}"`,
        `[wireserver]\naddress = "${WIRESERVER}"`,
        `[monitor]\nhost_plugin_port = ${new URL(fabric.hostPluginUrl).port}\nrequest_timeout_secs = 2`,
        `[telemetry]\nkvp_dir = "${join(root, 'kvp')}"`,
        `[data_dir]\npath = "${join(root, 'data')}"`,
        `[log_path]\npath = "${join(root, 'bootstate.log')}"`,
      ].join('\n'),
    );
    try {
      const run = await promisify(execFile)(process.execPath, [AGENT, 'monitor', '--once', '--config', config], { timeout: 30_000 });
      return { status: 0, stderr: run.stderr };
    } catch (error) {
      const e = error as { code?: number; stderr?: string };
      return { status: typeof e.code === 'number' ? e.code : null, stderr: e.stderr ?? '' };
    }
  }

  const documents = () => fabric.requestsTo('healthService').map((r) => JSON.parse(r.body));

  it('posts one healthy observation per signal, in the exact document shape, and exits 0', async () => {
    const run = await runOnce();
    expect(run.status).toBe(0);
    const docs = documents();
    for (const doc of docs) expect(Object.keys(doc)).toEqual(['Api', 'Version', 'Source', 'Observations']);
    expect(docs.every((d) => d.Api === 'reporttargethealth' && d.Version === '1.0' && d.Source === 'bootstate')).toBe(true);
    const observations = docs.flatMap((d) => d.Observations);
    expect(observations.map((o: { ObservationName: string }) => o.ObservationName).sort()).toEqual([
      'GuestAgentPluginHeartbeat',
      'GuestAgentPluginVersions',
      'InstanceMetadataHeartbeat',
    ]);
    expect(observations.every((o: { IsHealthy: boolean }) => o.IsHealthy)).toBe(true);
  });

  it('carries the IMDS validation failure in Value, and a first failing heartbeat stays healthy (roll-up)', async () => {
    fabric.requests.length = 0;
    fabric.setImdsDocument({ compute: {} });
    fabric.setHostPlugin({ status: 500 });
    const run = await runOnce();
    expect(run.status).toBe(0);
    const observations = documents().flatMap((d) => d.Observations) as Array<{ ObservationName: string; IsHealthy: boolean; Value: string }>;
    const imds = observations.find((o) => o.ObservationName === 'InstanceMetadataHeartbeat')!;
    expect(imds.Value).toContain('network');
    const heartbeat = observations.find((o) => o.ObservationName === 'GuestAgentPluginHeartbeat')!;
    expect(heartbeat.IsHealthy).toBe(true);
  });
});
