/**
 * The wireserver firewall on real Debian 12 boots with the .deb installed: bootstate-firewall.service puts the rules
 * in place before network-pre.target on the first boot and again after a reboot (nft loading the packaged ruleset,
 * verified by bootstate at the first re-check; bootstate itself where a drop-in changes the configuration), bootstate.service still reaches the
 * fake wireserver as root, a user (uid 65534) inside the VM cannot open a connection to it but still gets through to
 * TCP port 53, `nft flush ruleset` is undone by bootstate-firewall-recheck.timer within its 30 s period with the
 * monitor's timer off (the default install), `bootstate deprovision` takes the rules away, and
 * `[firewall] enable = false` leaves none.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canSandbox } from '../e2e/ns.js';
import { debianRoot, installDeb } from './debian-root.js';
import { agentEnded, createMachine, show, until, type Boot, type Machine } from './machine.js';
import { bakeLayer, configLayer, createRig, imdsDocument, type Rig } from './scenario.js';

const TAG = `bsf${process.pid}${randomBytes(2).toString('hex')}`;
const WIRESERVER = '168.63.129.16';

/** What one boot showed about the firewall. */
interface Seen {
  firewallUnit: Record<string, string>;
  /** `journalctl -b -u bootstate-firewall.service`, and the unit's status, for failure messages. */
  firewallLog: string;
  bootstateResult: string;
  /** Monotonic µs at which bootstate-firewall.service became active and network-pre.target was reached. */
  firewallActiveAt: number;
  networkPreAt: number;
  table: string;
  check: { exitCode: number | null; stdout: string };
  /** What a connection attempt said: `open`, or bash's error, or `timeout` (exit 124 of timeout(1)). */
  root80: string;
  nobody80: string;
  nobody53: string;
  reportsAfter: string[];
  deprovision?: { exitCode: number | null; stdout: string; tableAfter: string };
  recheck?: Recheck;
  /** After a load by nft: the first re-check's verification (the marker gone), and what the re-check unit logged. */
  verified?: { markerGone: boolean; recheckLog: string };
}

/** What a `nft flush ruleset` in the booted VM came to. */
interface Recheck {
  monitorTimer: Record<string, string>;
  recheckTimer: Record<string, string>;
  /** `nft list tables` right after the flush (in the same command). */
  tablesAfterFlush: string;
  restoredExit: number | null;
  nobody80: string;
  /** Seconds on the VM's monotonic clock from the flush to the re-check's warning in the journal. */
  delaySecs: number;
  journal: string;
  /** When bootstate-monitor.service last started (monotonic µs): 0, never this boot. */
  monitorRuns: string;
}

let rig: Rig;
const machines: Machine[] = [];
let enabled: Promise<Seen[]>;
let disabled: Promise<Seen[]>;
let legacy: Promise<Seen[]>;

/** Opens a TCP connection from inside the VM as `uid`, with bash's /dev/tcp, giving up after `seconds`. */
async function connect(boot: Boot, uid: number, port: number, seconds: number): Promise<string> {
  const as = uid === 0 ? [] : ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups'];
  const result = await boot.exec([...as, 'timeout', String(seconds), 'bash', '-c', `exec 3<>/dev/tcp/${WIRESERVER}/${port} && echo open`], (seconds + 60) * 1000);
  if (result.exitCode === 124) return 'timeout';
  return result.stdout.trim() || result.stderr.trim().split('\n').at(-1)!.replace(/^.*: /, '');
}

async function observe(machine: Machine, boot: Boot, deprovision: boolean): Promise<Seen> {
  await boot.settled();
  await agentEnded(boot);
  const firewallUnit = await show(boot, 'bootstate-firewall.service', ['ActiveState', 'Result', 'ExecMainStatus', 'ActiveEnterTimestampMonotonic']);
  const check = await boot.exec(['bootstate', 'firewall', 'check']);
  const seen: Seen = {
    firewallUnit,
    firewallLog: [
      (await boot.exec(['journalctl', '--no-pager', '-b', '-u', 'bootstate-firewall.service', '-o', 'cat'])).stdout,
      (await boot.exec(['systemctl', 'status', '--no-pager', 'bootstate-firewall.service'])).stdout,
    ].join('\n'),
    bootstateResult: (await show(boot, 'bootstate.service', ['Result'])).Result ?? '',
    firewallActiveAt: Number(firewallUnit.ActiveEnterTimestampMonotonic),
    networkPreAt: Number((await show(boot, 'network-pre.target', ['ActiveEnterTimestampMonotonic'])).ActiveEnterTimestampMonotonic),
    table: (await boot.exec(['nft', 'list', 'table', 'inet', 'bootstate'])).stdout,
    check: { exitCode: check.exitCode, stdout: check.stdout },
    root80: await connect(boot, 0, 80, 60),
    nobody80: await connect(boot, 65534, 80, 5),
    nobody53: await connect(boot, 65534, 53, 60),
    reportsAfter: [],
  };
  if (seen.firewallLog.includes('applied the packaged rules')) {
    // The first re-check (30 s after the timer started) has bootstate verify what nft loaded against the configuration.
    const gone = async () => ((await boot.exec(['test', '-e', '/run/bootstate/firewall.unverified'])).exitCode === 0 ? null : true);
    const recheckLog = async () => (await boot.exec(['journalctl', '--no-pager', '-b', '-u', 'bootstate-firewall-recheck.service', '-o', 'cat'])).stdout;
    const markerGone = await until('the loaded rules verified', gone, 300_000, recheckLog, 1000);
    seen.verified = { markerGone, recheckLog: await recheckLog() };
  }
  if (deprovision) {
    seen.recheck = await flushAndWait(boot);
    const result = await boot.exec(['bootstate', 'deprovision', '--force'], 120_000);
    const after = await boot.exec(['nft', 'list', 'tables']);
    seen.deprovision = { exitCode: result.exitCode, stdout: result.stdout, tableAfter: after.stdout };
  }
  await boot.shutdown();
  seen.reportsAfter = await machine.reportKinds();
  return seen;
}

/** Flushes the whole ruleset as `systemctl reload nftables` does on Debian, and waits for the rules to come back. */
async function flushAndWait(boot: Boot): Promise<Recheck> {
  const monitorTimer = await show(boot, 'bootstate-monitor.timer', ['UnitFileState', 'ActiveState']);
  const recheckTimer = await show(boot, 'bootstate-firewall-recheck.timer', ['UnitFileState', 'ActiveState', 'AccuracyUSec']);
  // One TimersMonotonic= line per timer setting.
  recheckTimer.TimersMonotonic = (await boot.exec(['systemctl', 'show', 'bootstate-firewall-recheck.timer', '-p', 'TimersMonotonic'])).stdout;
  const flushed = await boot.exec(['sh', '-c', "nft flush ruleset && cut -d' ' -f1 /proc/uptime && nft list tables"]);
  const [uptime, ...tables] = flushed.stdout.trim().split('\n');
  const journal = async () => (await boot.exec(['journalctl', '--no-pager', '-b', '-u', 'bootstate-firewall-recheck.service', '-o', 'json'])).stdout;
  const warned = (text: string) =>
    text.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, string>).find((entry) => String(entry.MESSAGE).includes('applying them again'));
  // A give-up bound for a loaded host, not the claim: the delay is measured below on the VM's own clock.
  await until('the rules back after nft flush ruleset', async () => ((await boot.exec(['bootstate', 'firewall', 'check'])).exitCode === 0 ? true : null), 300_000, journal, 1000);
  const entry = warned(await journal());
  return {
    monitorTimer,
    recheckTimer,
    tablesAfterFlush: tables.join('\n'),
    restoredExit: (await boot.exec(['bootstate', 'firewall', 'check'])).exitCode,
    nobody80: await connect(boot, 65534, 80, 5),
    delaySecs: entry ? Number(entry.__MONOTONIC_TIMESTAMP) / 1e6 - Number(uptime) : Number.NaN,
    journal: (await boot.exec(['journalctl', '--no-pager', '-b', '-u', 'bootstate-firewall-recheck.service', '-o', 'cat'])).stdout,
    monitorRuns: (await show(boot, 'bootstate-monitor.service', ['ExecMainStartTimestampMonotonic'])).ExecMainStartTimestampMonotonic ?? '',
  };
}

async function vm(name: string, layers: string[], boots: number): Promise<Seen[]> {
  // A VM's root holds CAP_NET_ADMIN; nspawn drops it when the network namespace is not its own.
  const machine = await createMachine({ name: `${TAG}${name}`, workDir: rig.workDir, layers, imdsDocument: imdsDocument(rig.publicKey), capabilities: ['CAP_NET_ADMIN'] });
  machines.push(machine);
  const seen: Seen[] = [];
  for (let i = 0; i < boots; i++) seen.push(await observe(machine, await machine.boot(), i === boots - 1 && name === 'on'));
  return seen;
}

describe.skipIf(!canSandbox)('the wireserver firewall on a booted Debian 12 with the .deb installed', () => {
  beforeAll(async () => {
    rig = await createRig();
    enabled = vm('on', [rig.debLayer, rig.debian], 2);
    disabled = configLayer(rig, 'firewall-off', '[firewall]\nenable = false\n').then((layer) => vm('off', [layer, rig.debLayer, rig.debian], 1));
    // Where nft is absent: a root with iptables, its nft removed and its legacy backend chosen.
    legacy = (async () => {
      const root = await debianRoot(['iptables']);
      const debLayer = path.join(rig.workDir, 'deb-layer-iptables');
      await installDeb(root, rig.deb!, debLayer);
      const noNft = await bakeLayer(rig, 'no-nft', [path.join(debLayer, 'upper'), root], 'rm /usr/sbin/nft\nupdate-alternatives --quiet --set iptables /usr/sbin/iptables-legacy\n');
      return vm('legacy', [noNft, path.join(debLayer, 'upper'), root], 1);
    })();
    for (const p of [enabled, disabled, legacy]) p.catch(() => undefined);
  }, 900_000);

  afterAll(async () => {
    await Promise.allSettled([enabled, disabled, legacy]);
    for (const machine of machines) await machine.destroy().catch(() => undefined);
    await rig?.cleanup();
  }, 120_000);

  it('is in place before network-pre.target on the first boot and after a reboot, and check agrees', async () => {
    const boots = await enabled;
    expect(boots).toHaveLength(2);
    for (const boot of boots) {
      expect(boot.firewallUnit, boot.firewallLog).toMatchObject({ ActiveState: 'active', Result: 'success', ExecMainStatus: '0' });
      expect(boot.firewallActiveAt).toBeGreaterThan(0);
      expect(boot.firewallActiveAt).toBeLessThanOrEqual(boot.networkPreAt);
      expect(boot.table).toContain(`ip daddr ${WIRESERVER} meta skuid 0 accept`);
      expect(boot.check, boot.check.stdout).toEqual({ exitCode: 0, stdout: `firewall: in place (nft): only root reaches ${WIRESERVER}, TCP port 53 excepted\n` });
    }
  }, 900_000);

  it('is loaded by nft from the packaged ruleset, without Node, with the packaged configuration; the first re-check verifies it quietly', async () => {
    for (const boot of await enabled) {
      expect(boot.firewallLog).toContain('firewall: applied the packaged rules (nft -f /usr/share/bootstate/firewall.nft)');
      expect(boot.verified, boot.firewallLog).toBeDefined();
      expect(boot.verified!.markerGone).toBe(true);
      expect(boot.verified!.recheckLog).not.toContain('were not the configured ones');
      expect(boot.verified!.recheckLog).not.toContain('could not be verified');
    }
    // A drop-in: bootstate reads the configuration itself (here: off).
    const [off] = await disabled;
    expect(off!.firewallLog).not.toContain('applied the packaged rules');
    expect(off!.firewallLog).toContain('firewall: off ([firewall] enable = false)');
  }, 900_000);

  it('lets root (and bootstate.service) reach the wireserver, keeps uid 65534 out, and lets it through to TCP 53', async () => {
    const [first, second] = await enabled;
    expect(first!.bootstateResult).toBe('success');
    expect(first!.reportsAfter).toEqual(['NotReady/Provisioning', 'Ready']);
    for (const boot of [first!, second!]) {
      expect(boot.root80).toBe('open');
      expect(boot.nobody80).toBe('timeout');
      // Nothing listens on 53 in the fake fabric: a refusal is the fabric's answer, so the SYN got through.
      expect(boot.nobody53).toBe('Connection refused');
    }
  }, 900_000);

  it('is put back within its 30 s re-check period after `nft flush ruleset`, on a default install (the monitor\'s timer off), with a warning in the journal', async () => {
    const { recheck } = (await enabled)[1]!;
    const story = JSON.stringify(recheck, null, 2);
    expect(recheck!.monitorTimer, story).toEqual({ UnitFileState: 'disabled', ActiveState: 'inactive' });
    expect(recheck!.monitorRuns, story).toBe('0');
    expect(recheck!.recheckTimer, story).toMatchObject({ UnitFileState: 'enabled', ActiveState: 'active', AccuracyUSec: '1s' });
    expect(recheck!.recheckTimer.TimersMonotonic, story).toContain('OnUnitActiveUSec=30s');
    expect(recheck!.tablesAfterFlush, story).toBe('');
    expect(recheck!.restoredExit, story).toBe(0);
    expect(recheck!.nobody80, story).toBe('timeout');
    expect(recheck!.journal, story).toContain("the wireserver firewall's rules changed since they were applied; applying them again");
    // The period (30 s) and the timer's accuracy (1 s), on the VM's monotonic clock.
    expect(recheck!.delaySecs, story).toBeGreaterThan(0);
    expect(recheck!.delaySecs, story).toBeLessThanOrEqual(31);
  }, 900_000);

  it('is removed by bootstate deprovision', async () => {
    const { deprovision } = (await enabled)[1]!;
    expect(deprovision!.exitCode, deprovision!.stdout).toBe(0);
    expect(deprovision!.stdout).toContain('removed nft table inet bootstate');
    expect(deprovision!.tableAfter).not.toContain('bootstate');
  }, 900_000);

  it('where nft is absent, makes the same rules with the legacy iptables from inside its sandbox', async () => {
    const [boot] = await legacy;
    expect(boot!.firewallUnit, boot!.firewallLog).toMatchObject({ ActiveState: 'active', Result: 'success' });
    expect(boot!.check, boot!.check.stdout).toEqual({ exitCode: 0, stdout: `firewall: in place (iptables): only root reaches ${WIRESERVER}, TCP port 53 excepted\n` });
    expect(boot!.bootstateResult).toBe('success');
    expect([boot!.root80, boot!.nobody80, boot!.nobody53]).toEqual(['open', 'timeout', 'Connection refused']);
  }, 900_000);

  it('with [firewall] enable = false, leaves no rule and the unit still succeeds', async () => {
    const [boot] = await disabled;
    expect(boot!.firewallUnit, boot!.firewallLog).toMatchObject({ ActiveState: 'active', Result: 'success' });
    expect(boot!.table).toBe('');
    expect(boot!.check.exitCode).toBe(0);
    expect(boot!.nobody80).toBe('open');
    expect(boot!.bootstateResult).toBe('success');
  }, 900_000);
});
