/**
 * `bootstate monitor --once` as shipped (the built CLI), against a fake fabric on loopback; the HealthService port
 * is configured (`monitor.health_service_port`) like every other endpoint. It prints what it measured and posted,
 * and exits non-zero when a check or a post failed.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { AGENT } from './agent.js';

const WIRESERVER = '127.0.0.1';

describe('bootstate monitor --once', () => {
  let fabric: FakeFabric;
  let root: string;
  let runs = 0;
  beforeAll(async () => {
    fabric = await startFakeFabric({ wireserver: { host: WIRESERVER }, hostPlugin: { host: WIRESERVER } });
    root = mkdtempSync(join(tmpdir(), 'bootstate-monitor-'));
  });
  afterAll(async () => {
    await fabric.close();
  });

  /** Runs the agent asynchronously: the fake fabric lives in this process and must keep answering. */
  async function runOnce(): Promise<{ status: number | null; stdout: string; stderr: string }> {
    const config = join(root, 'bootstate.toml');
    writeFileSync(
      config,
      [
        `[imds]\nendpoint = "${fabric.imdsUrl}"`,
        `[wireserver]\naddress = "${WIRESERVER}"`,
        `[monitor]\nhealth_service_port = ${new URL(fabric.healthServiceUrl).port}\nhost_plugin_port = ${new URL(fabric.hostPluginUrl).port}\nrequest_timeout_secs = 2`,
        // Each run a first cycle, and none of this machine's /run or DHCP client.
        `state_file = "${join(root, 'run', String(++runs), 'monitor-state.json')}"`,
        `[hostname_publishing]\nmonitor = false`,
        `[telemetry]\nkvp_dir = "${join(root, 'kvp')}"`,
        `[data_dir]\npath = "${join(root, 'data')}"`,
        `[log_path]\npath = "${join(root, 'bootstate.log')}"`,
      ].join('\n'),
    );
    try {
      const run = await promisify(execFile)(process.execPath, [AGENT, 'monitor', '--once', '--config', config], { timeout: 30_000 });
      return { status: 0, stdout: run.stdout, stderr: run.stderr };
    } catch (error) {
      const e = error as { code?: number; stdout?: string; stderr?: string };
      return { status: typeof e.code === 'number' ? e.code : null, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
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
    expect(run.stdout).toContain(`observations posted to ${fabric.healthServiceUrl}`);
    expect(run.stdout).toMatch(/^ {2}GuestAgentPluginHeartbeat +ok +.*posted healthy \(HTTP 200\)$/m);
    expect(run.stdout).toMatch(/^ {2}InstanceMetadataHeartbeat +ok +.*posted healthy \(HTTP 200\)$/m);
    expect(run.stdout).toMatch(/^0 check\(s\) failed, 0 post\(s\) failed$/m);
  });

  it('carries the IMDS validation failure in Value, and a first failing heartbeat stays healthy (roll-up)', async () => {
    fabric.requests.length = 0;
    fabric.setImdsDocument({ compute: {} });
    fabric.setHostPlugin({ status: 500 });
    const run = await runOnce();
    fabric.setHostPlugin();
    expect(run.status).toBe(1);
    const observations = documents().flatMap((d) => d.Observations) as Array<{ ObservationName: string; IsHealthy: boolean; Value: string }>;
    const imds = observations.find((o) => o.ObservationName === 'InstanceMetadataHeartbeat')!;
    expect(imds.Value).toContain('network');
    const heartbeat = observations.find((o) => o.ObservationName === 'GuestAgentPluginHeartbeat')!;
    expect(heartbeat.IsHealthy).toBe(true);
    expect(run.stdout).toMatch(/^ {2}GuestAgentPluginHeartbeat +FAILED +.*posted healthy \(HTTP 200\)$/m);
    expect(run.stdout).toMatch(/^ {2}InstanceMetadataHeartbeat +FAILED +.*network/m);
    expect(run.stdout).toMatch(/^2 check\(s\) failed, 0 post\(s\) failed$/m);
  });

  it('exits 1 and says so when the HealthService refuses the observations', async () => {
    fabric.setHealthService({ status: 500 });
    const run = await runOnce();
    fabric.setHealthService();
    expect(run.status).toBe(1);
    expect(run.stdout).toMatch(/^ {2}GuestAgentPluginVersions +ok +.*post failed: HTTP 500$/m);
    expect(run.stdout).toMatch(/^\d check\(s\) failed, [1-3] post\(s\) failed$/m);
  });
});
