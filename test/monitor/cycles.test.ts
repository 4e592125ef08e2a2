/**
 * The shipped program's timer cycles: successive `node dist/bootstate.mjs monitor --once` processes against the fake
 * fabric on loopback, each going on from the roll-up state the previous one left in the state file. A failure streak
 * outlives the process that began it, the plugin's `/versions` is asked until it is usable and not after, a corrupt
 * file or one from another boot is a clean start, and a cycle killed mid-way leaves the previous state as it was.
 * Something else at the state path (a FIFO, a symlink, a directory) is named in a warning and never waited on.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Observation } from '../../src/azure/healthservice.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';

const AGENT = path.resolve(import.meta.dirname, '../../dist/bootstate.mjs');

let fabric: FakeFabric;
let dir: string;
let stateFile: string;
let configFile: string;

beforeEach(async () => {
  fabric = await startFakeFabric();
  dir = mkdtempSync(path.join(tmpdir(), 'bootstate-cycles-'));
  stateFile = path.join(dir, 'run/monitor-state.json');
  configFile = path.join(dir, 'bootstate.toml');
  const q = JSON.stringify;
  writeFileSync(
    configFile,
    [
      '[wireserver]',
      'address = "127.0.0.1"',
      '[monitor]',
      `health_service_port = ${fabric.ports.wireserver}`,
      `host_plugin_port = ${fabric.ports.hostPlugin}`,
      'heartbeat_rollup_secs = 1',
      'request_timeout_secs = 5',
      `state_file = ${q(stateFile)}`,
      '[imds]',
      `endpoint = ${q(fabric.imdsUrl)}`,
      '[data_dir]',
      `path = ${q(path.join(dir, 'data'))}`,
      '[log_path]',
      `path = ${q(path.join(dir, 'bootstate.log'))}`,
      '[telemetry]',
      'kvp = false',
      '[hostname_publishing]',
      'monitor = false',
      '',
    ].join('\n'),
  );
});

afterEach(async () => {
  await fabric.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Cycle {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/** One cycle, as the timer starts it; `killWhen` sends SIGKILL once it returns true (polled). */
function cycle(killWhen?: () => boolean): Promise<Cycle> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [AGENT, 'monitor', '--once', '--config', configFile], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const poll = killWhen
      ? setInterval(() => {
          if (killWhen()) child.kill('SIGKILL');
        }, 10)
      : undefined;
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearInterval(poll);
      resolve({ code, signal, stderr });
    });
  });
}

const observations = () => fabric.requestsTo('healthService').flatMap((r) => JSON.parse(r.body).Observations as Observation[]);
const heartbeats = () => observations().filter((o) => o.ObservationName === 'GuestAgentPluginHeartbeat').map((o) => o.IsHealthy);
const versionsAsked = () => fabric.requestsTo('hostPluginVersions').length;
const saved = () => JSON.parse(readFileSync(stateFile, 'utf8')) as { format: number; bootId: string; state: Record<string, unknown> };

describe('bootstate monitor --once, one process per cycle', () => {
  it('carries a failure streak from one cycle to the next: unhealthy once the window has passed, across processes', async () => {
    fabric.setHostPlugin({ status: 500 });
    const first = await cycle();
    expect(first.code, first.stderr).toBe(1);
    expect(heartbeats()).toEqual([true]);
    expect(saved().state.heartbeatStreak).toEqual(expect.any(Number));
    expect(saved().bootId).toBe(readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await cycle();
    expect(heartbeats()).toEqual([true, false]);
    fabric.setHostPlugin('ok');
    await cycle();
    expect(heartbeats()).toEqual([true, false, true]);
    expect(saved().state.heartbeatStreak).toBeNull();
  });

  it('asks /versions until the plugin is usable, then no more', async () => {
    fabric.setHostPluginVersions({ status: 500 });
    await cycle();
    expect(versionsAsked()).toBe(1);
    expect(saved().state.versionsAvailable).toBe(false);
    fabric.setHostPluginVersions('ok');
    await cycle();
    expect(versionsAsked()).toBe(2);
    expect(saved().state.versionsAvailable).toBe(true);
    await cycle();
    expect(versionsAsked()).toBe(2);
    expect(observations().filter((o) => o.ObservationName === 'GuestAgentPluginVersions')).toHaveLength(2);
  });

  it('starts afresh, with a warning, from a corrupt state file, and writes a good one', async () => {
    await cycle();
    writeFileSync(stateFile, '{"format":1,"bootId":');
    const next = await cycle();
    expect(next.code, next.stderr).toBe(0);
    expect(next.stderr).toContain('monitor state discarded, starting afresh: not JSON');
    expect(versionsAsked()).toBe(2);
    expect(saved().state).toEqual({ heartbeatStreak: null, imdsStreak: null, versionsAvailable: true });
  });

  it('starts afresh, quietly, from the state of another boot', async () => {
    fabric.setHostPlugin({ status: 500 });
    await cycle();
    writeFileSync(stateFile, JSON.stringify({ ...saved(), bootId: '00000000-0000-4000-8000-000000000000' }));
    const next = await cycle();
    expect(next.stderr).not.toContain('monitor state discarded');
    expect(versionsAsked()).toBe(2);
    expect(saved().bootId).not.toBe('00000000-0000-4000-8000-000000000000');
  });

  it('leaves the previous state as it was when a cycle is killed mid-way, and the next goes on from it', async () => {
    fabric.setHostPlugin({ status: 500 });
    await cycle();
    const before = readFileSync(stateFile, 'utf8');
    fabric.setHostPlugin('stall');
    const killed = await cycle(() => fabric.requestsTo('hostPluginHealth').length === 2);
    expect(killed.signal).toBe('SIGKILL');
    expect(readFileSync(stateFile, 'utf8')).toBe(before);
    expect(readdirSync(path.dirname(stateFile))).toEqual(['monitor-state.json']);
    fabric.setHostPlugin({ status: 500 });
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await cycle();
    expect(heartbeats()).toEqual([true, false]);
  });

  /** A cycle that has not ended on its own after this long is stuck (a healthy one takes a second or two). */
  const stuck = () => {
    const started = Date.now();
    return () => Date.now() - started > 25_000;
  };

  it('never waits on a FIFO at the state path: warns naming it, and replaces it with the state', async () => {
    mkdirSync(path.dirname(stateFile), { recursive: true });
    execFileSync('mkfifo', [stateFile]);
    const first = await cycle(stuck());
    expect(first.signal, first.stderr).toBeNull();
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toContain(`monitor state discarded, starting afresh: unreadable: refusing ${stateFile}: it is not a regular file (fifo)`);
    expect(lstatSync(stateFile).isFile()).toBe(true);
    expect(saved().state.versionsAvailable).toBe(true);
    const next = await cycle(stuck());
    expect(next.stderr).not.toContain('monitor state');
    expect(versionsAsked()).toBe(1);
  }, 60_000);

  it('follows no symlink at the state path: the target is neither read nor written, the link is replaced', async () => {
    await cycle();
    const target = path.join(dir, 'elsewhere.json');
    const elsewhere = readFileSync(stateFile, 'utf8');
    writeFileSync(target, elsewhere);
    rmSync(stateFile);
    symlinkSync(target, stateFile);
    const next = await cycle(stuck());
    expect(next.stderr).toContain(`refusing ${stateFile}: it is a symlink`);
    // Read through the link, the state would have said the plugin is usable: /versions would not be asked again.
    expect(versionsAsked()).toBe(2);
    expect(lstatSync(stateFile).isFile()).toBe(true);
    expect(readFileSync(target, 'utf8')).toBe(elsewhere);
  }, 60_000);

  it('removes an empty directory at the state path, with a warning, so the roll-up is saved', async () => {
    fabric.setHostPlugin({ status: 500 });
    mkdirSync(stateFile, { recursive: true });
    const first = await cycle(stuck());
    expect(first.stderr).toContain(`monitor state: removed the empty directory at ${stateFile}`);
    expect(saved().state.heartbeatStreak).toEqual(expect.any(Number));
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await cycle();
    expect(heartbeats()).toEqual([true, false]);
  }, 60_000);

  it('leaves a directory with entries at the state path as it was, and says each cycle that no state is kept', async () => {
    mkdirSync(stateFile, { recursive: true });
    writeFileSync(path.join(stateFile, 'someone-elses'), 'data\n');
    for (let i = 0; i < 2; i++) {
      const run = await cycle(stuck());
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).toContain(`monitor state not saved: ${stateFile} is a directory with entries; left alone, so no state is kept across cycles`);
    }
    expect(readdirSync(stateFile)).toEqual(['someone-elses']);
    expect(readFileSync(path.join(stateFile, 'someone-elses'), 'utf8')).toBe('data\n');
    expect(readdirSync(path.dirname(stateFile))).toEqual(['monitor-state.json']);
  }, 60_000);

  it('writes no run journal and keeps debug lines out of the log file', async () => {
    await cycle();
    expect(existsSync(path.join(dir, 'data/runs'))).toBe(false);
    const log = readFileSync(path.join(dir, 'bootstate.log'), 'utf8');
    expect(log.split('\n').filter((line) => line.includes('"level":20'))).toEqual([]);
  });
});
