/**
 * The monitor on a booted Debian 12: the .deb's bootstate-monitor.timer, enabled and with its period shortened to
 * 2 s by a drop-in, starts `bootstate monitor --once` cycles after the first boot; each posts the HealthService
 * observations to the fake fabric on Azure's addresses, carries its state in /run/bootstate, and leaves the journal
 * alone: LogLevelMax=notice keeps the cycle's own lines and systemd's lines about the unit out. The same VM then
 * lifts the filter (LogLevelMax=info), so the count of what it held back is measured, not assumed.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canSandbox } from '../e2e/ns.js';
import { createMachine, journal, type Boot, type Machine } from './machine.js';
import { configLayer, createRig, imdsDocument, monitorHeartbeats, monitorTimerLayer, untilMonitorHeartbeats, type Rig } from './scenario.js';

const TAG = `bsm${process.pid}${randomBytes(2).toString('hex')}`;
const PERIOD = '2s';
const CYCLES = 8;

let rig: Rig;
let machine: Machine;
let boot: Boot;

interface Counted {
  cycles: number;
  lines: number;
  warnings: number;
  /** The lines themselves, to explain a count that is not the one expected. */
  text: string;
}
let quiet: Counted;
let loud: Counted;
let stateFile = '';
let versionsAsked = 0;
let heartbeatsHealthy: boolean[] = [];
let monitorResult = '';

const heartbeats = async () => monitorHeartbeats(await machine.requests());
const untilHeartbeats = (n: number) => untilMonitorHeartbeats(machine, boot, n);

/** Journal entries about the monitor's service (its own and PID 1's), and heartbeats, over `cycles` more cycles. */
async function count(cycles: number): Promise<Counted> {
  const all = () => journal(boot, ['-b', '-u', 'bootstate-monitor.service']);
  const entries = async () => (await all()).length;
  const warnings = async () => (await journal(boot, ['-b', '-u', 'bootstate-monitor.service', '-p', 'warning'])).length;
  // A cycle in flight would be counted on one side only: start between two cycles' posts.
  const start = (await heartbeats()).length;
  const [linesBefore, warningsBefore] = [await entries(), await warnings()];
  await untilHeartbeats(start + cycles);
  const [linesAfter, warningsAfter] = [await entries(), await warnings()];
  const text = (await all()).slice(linesBefore).map((e) => `${e.SYSLOG_IDENTIFIER ?? ''}: ${e.MESSAGE ?? ''}`).join('\n');
  return { cycles: (await heartbeats()).length - start, lines: linesAfter - linesBefore, warnings: warningsAfter - warningsBefore, text };
}

beforeAll(async () => {
  if (!canSandbox) return;
  rig = await createRig();
  const config = await configLayer(rig, 'monitor', '[monitor]\nrequest_timeout_secs = 5\n');
  machine = await createMachine({
    name: TAG,
    workDir: rig.workDir,
    layers: [config, await monitorTimerLayer(rig, 'test', PERIOD), rig.debLayer, rig.debian],
    imdsDocument: imdsDocument(rig.publicKey),
  });
  boot = await machine.boot();
  await boot.settled();
  await untilHeartbeats(2);
  quiet = await count(CYCLES);
  await boot.exec(['mkdir', '-p', '/run/systemd/system/bootstate-monitor.service.d']);
  await boot.exec(['sh', '-c', 'printf "[Service]\\nLogLevelMax=info\\n" > /run/systemd/system/bootstate-monitor.service.d/50-loud.conf']);
  await boot.exec(['systemctl', 'daemon-reload']);
  await untilHeartbeats((await heartbeats()).length + 1);
  loud = await count(CYCLES);
  stateFile = (await boot.exec(['cat', '/run/bootstate/monitor-state.json'])).stdout;
  versionsAsked = (await machine.requests()).filter((r) => r.route === 'hostPluginVersions').length;
  heartbeatsHealthy = (await heartbeats()).map((o) => o.IsHealthy);
  monitorResult = (await boot.exec(['systemctl', 'show', 'bootstate-monitor.service', '-p', 'Result', '--value'])).stdout.trim();
  process.stderr.write(
    `monitor timer on a booted Debian: ${quiet.lines} journal lines over ${quiet.cycles} cycles with LogLevelMax=notice, ` +
      `${loud.lines} over ${loud.cycles} with LogLevelMax=info\n`,
  );
}, 600_000);

afterAll(async () => {
  await boot?.shutdown().catch(() => undefined);
  await machine?.destroy().catch(() => undefined);
  await rig?.cleanup();
}, 120_000);

describe.skipIf(!canSandbox)('bootstate-monitor.timer on a booted Debian 12', () => {
  it('runs one cycle per period, each posting a healthy heartbeat, and the unit ends each one successfully', () => {
    expect(quiet.cycles).toBeGreaterThanOrEqual(CYCLES);
    expect(heartbeatsHealthy.length).toBeGreaterThanOrEqual(2 * CYCLES);
    expect(heartbeatsHealthy.every(Boolean)).toBe(true);
    expect(monitorResult).toBe('success');
  });

  it('carries its state in /run/bootstate, so /versions was asked until usable, once', () => {
    const saved = JSON.parse(stateFile) as { state: { versionsAvailable: boolean } };
    expect(saved.state.versionsAvailable).toBe(true);
    expect(versionsAsked).toBe(1);
  });

  it('with LogLevelMax=notice, writes no journal line per cycle: neither its own nor systemd\'s about the unit', () => {
    expect(quiet.lines, quiet.text).toBe(0);
    expect(quiet.warnings).toBe(0);
  });

  it('without the filter the same cycles would write lines: the filter is what keeps them out', () => {
    expect(loud.lines).toBeGreaterThanOrEqual(loud.cycles);
  });
});
