/**
 * The wireserver firewall on real Debian 12 boots with the .deb installed: bootstate-firewall.service puts the rules
 * in place before network-pre.target on the first boot and again after a reboot, bootstate.service still reaches the
 * fake wireserver as root, a user (uid 65534) inside the VM cannot open a connection to it but still gets through to
 * TCP port 53, `bootstate deprovision` takes the rules away, and `[firewall] enable = false` leaves none.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canSandbox } from '../e2e/ns.js';
import { debianRoot, installDeb } from './debian-root.js';
import { agentEnded, createMachine, show, type Boot, type Machine } from './machine.js';
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
  recheck?: { brokenExit: number | null; restoredExit: number | null; journal: string };
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
  if (deprovision) {
    // The monitor's re-check: a deleted rule is back after one cycle of the monitor's unit.
    const listed = (await boot.exec(['nft', '-a', 'list', 'chain', 'inet', 'bootstate', 'output'])).stdout;
    const handle = /meta skuid 0 accept # handle (\d+)/.exec(listed)?.[1] ?? 'none';
    await boot.exec(['nft', 'delete', 'rule', 'inet', 'bootstate', 'output', 'handle', handle]);
    const broken = await boot.exec(['bootstate', 'firewall', 'check']);
    await boot.exec(['systemctl', 'start', 'bootstate-monitor.service'], 120_000);
    const restored = await boot.exec(['bootstate', 'firewall', 'check']);
    seen.recheck = { brokenExit: broken.exitCode, restoredExit: restored.exitCode, journal: (await boot.exec(['journalctl', '--no-pager', '-b', '-u', 'bootstate-monitor.service', '-o', 'cat'])).stdout };
    const result = await boot.exec(['bootstate', 'deprovision', '--force'], 120_000);
    const after = await boot.exec(['nft', 'list', 'tables']);
    seen.deprovision = { exitCode: result.exitCode, stdout: result.stdout, tableAfter: after.stdout };
  }
  await boot.shutdown();
  seen.reportsAfter = await machine.reportKinds();
  return seen;
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

  it("is put back by the monitor's re-check when a rule was deleted, with a warning in the journal", async () => {
    const { recheck } = (await enabled)[1]!;
    expect(recheck!.brokenExit).toBe(1);
    expect(recheck!.restoredExit, recheck!.journal).toBe(0);
    expect(recheck!.journal).toContain("the wireserver firewall's rules changed since they were applied; applying them again");
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
