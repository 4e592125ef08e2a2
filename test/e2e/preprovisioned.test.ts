/**
 * Pre-provisioned VMs booted for real: the agent with the default configuration in a network namespace where the
 * fake fabric serves a pool VM (placeholder identity, ppsType Running) that a customer claims through
 * `reprovisiondata`; real useradd, hostname and files. Also a reboot while waiting, and a Savable pool VM's NIC waits
 * ending at their deadline (no NIC is attached in a namespace; test/boot/ attaches one).
 */
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeReport } from '../../src/azure/report.js';
import { CUSTOMER_CUSTOM_DATA, CUSTOMER_USER_DATA } from '../../src/fabric/scenarios.js';
import { decodeRecords } from '../../src/kvp/codec.js';
import { vmFile, withVm as withVmIn, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox } from './ns.js';

const PREFIX = `bs-pps-${process.pid}`;
const DATA_DIR = '/var/lib/bootstate';
const vms: Vm[] = [];

interface Claimed { vm: Vm; boot: BootResult }
interface Rebooted { vm: Vm; first: BootResult; second: BootResult; afterFirst: { kinds: string[]; markers: string[]; passwd: string } }
let claimed: Promise<Claimed>;
let rebooted: Promise<Rebooted>;
let savable: Promise<Claimed>;

const withVm = <T>(name: string, scenario: string, use: (vm: Vm) => Promise<T>) =>
  withVmIn(vms, `${PREFIX}-${name}`, { generation: 2, scenario }, use);
const file = vmFile;
const markers = async (vm: Vm) => (await readdir(vm.sandbox.hostPath(DATA_DIR)).catch(() => [])).filter((n) => /\.(provisioned|report-pending|waiting-for-reuse)$/.test(n)).sort();
const users = async (vm: Vm) => (await file(vm, '/etc/passwd')).split('\n').map((l) => l.split(':')[0]);
const reprovisionPolls = async (vm: Vm) => (await vm.requests()).filter((r) => r.route === 'reprovision');

/** Every PROVISIONING_REPORT written to the VM's KVP pool, decoded. */
async function kvpReports(vm: Vm): Promise<Array<Map<string, string>>> {
  const pool = await readFile(vm.sandbox.hostPath('/var/lib/hyperv/.kvp_pool_1'));
  return decodeRecords(pool)
    .filter((r) => r.key === 'PROVISIONING_REPORT')
    .map((r) => new Map(decodeReport(r.value)));
}

/** Files under the VM's directories holding `needle`, except the ones meant to hold it. */
async function filesContaining(vm: Vm, needle: Buffer, allowed: string[]): Promise<string[]> {
  const found: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) await walk(full);
      else if (entry.isFile() && (await readFile(full)).includes(needle)) found.push(full);
    }
  };
  for (const dir of ['/var/log', '/var/lib', '/run', '/etc', '/home']) await walk(vm.sandbox.hostPath(dir));
  return found.filter((f) => !allowed.map((a) => vm.sandbox.hostPath(a)).includes(f));
}

describe.skipIf(!canSandbox)('a pre-provisioned VM in namespaces, with the default configuration', { timeout: 180_000 }, () => {
  beforeAll(() => {
    assertNamespaces();
    claimed = withVm('claimed', 'pps-running', async (vm) => ({ vm, boot: await vm.boot() }));
    rebooted = withVm('reboot', 'pps-running-late', async (vm) => {
      // SIGTERM once the chart is in `waiting`, which the run journal records as the macrostep happens: the marker
      // file alone appears before it is durable, while the chart is still in `markingWaiting`.
      const first = await vm.boot([], { terminateWhen: `grep -qs '"waiting":' ${DATA_DIR}/runs/*.jsonl` });
      const afterFirst = { kinds: await vm.reportKinds(), markers: await markers(vm), passwd: await file(vm, '/etc/passwd') };
      const second = await vm.boot();
      return { vm, first, second, afterFirst };
    });
    // Short NIC deadlines: the namespace has no NIC to detach, and none is attached (the harness in test/boot/ does that).
    savable = withVm('savable', 'pps-savable', async (vm) => {
      await mkdir(vm.sandbox.hostPath('/etc/bootstate/bootstate.toml.d'), { recursive: true });
      await writeFile(vm.sandbox.hostPath('/etc/bootstate/bootstate.toml.d/50-nic.toml'), '[preprovisioning]\nnic_detach_timeout_secs = 5\nnic_attach_timeout_secs = 3\n');
      return { vm, boot: await vm.boot() };
    });
  });

  afterAll(async () => {
    await Promise.allSettled([claimed, rebooted, savable]);
    await Promise.allSettled(vms.map((vm) => vm.sandbox.cleanup()));
  });

  it('reports Ready to the pool, waits, and once claimed creates the customer, never the placeholder', async () => {
    const { vm, boot } = await claimed;
    expect(boot.exitCode, boot.stderr).toBe(0);
    expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready', 'Ready']);
    const requests = await vm.requests();
    const polls = requests.filter((r) => r.route === 'reprovision');
    expect(polls).toHaveLength(3);
    expect(polls.every((r) => r.headers.metadata === 'true')).toBe(true);
    // The pool's Ready precedes the first poll; the final Ready follows the claim.
    const readies = requests.filter((r) => r.route === 'health' && r.body.includes('"state":"Ready"'));
    expect(readies[0]!.receivedAt).toBeLessThanOrEqual(polls[0]!.receivedAt);
    expect(readies[1]!.receivedAt).toBeGreaterThanOrEqual(polls[2]!.receivedAt);

    expect(await users(vm)).toContain('customer');
    expect(await users(vm)).not.toContain('pooladmin');
    const useradds = (await vm.commands()).filter((c) => c[0] === 'useradd');
    expect(useradds.map((c) => c.at(-1))).toEqual(['customer']);
    expect(boot.utsHostname).toBe('customer-vm');
    expect(await file(vm, '/home/customer/.ssh/authorized_keys')).toContain('ssh-ed25519 ');
    expect((await markers(vm)).map((m) => m.split('.').at(-1))).toEqual(['provisioned']);

    // The pool's report and the final one share the key; the record left is the final one.
    const reports = await kvpReports(vm);
    expect(reports.length).toBeGreaterThan(0);
    expect(reports.map((r) => [r.get('result'), r.get('pps_type')])).toEqual(reports.map(() => ['success', 'Running']));
  });

  it("saves the customer's custom data and user data byte for byte, 0600 root, and nowhere else", async () => {
    const { vm, boot } = await claimed;
    for (const [name, bytes] of [['CustomData', CUSTOMER_CUSTOM_DATA], ['UserData', CUSTOMER_USER_DATA]] as const) {
      const target = vm.sandbox.hostPath(path.join(DATA_DIR, name));
      expect(await readFile(target)).toEqual(bytes);
      const st = await stat(target);
      expect(st.mode & 0o7777).toBe(0o600);
      expect([st.uid, st.gid]).toEqual([0, 0]);
    }
    expect((await stat(vm.sandbox.hostPath('/var/lib/waagent/CustomData')).catch(() => null))).toBeNull();
    for (const [secret, home] of [[CUSTOMER_CUSTOM_DATA, 'CustomData'], [CUSTOMER_USER_DATA, 'UserData']] as const) {
      const needle = Buffer.from(secret.toString().split('\n')[1]!);
      expect(await filesContaining(vm, needle, [path.join(DATA_DIR, home)])).toEqual([]);
      expect(`${boot.stdout}\n${boot.stderr}`).not.toContain(needle.toString());
      expect((await vm.commands()).flat().join('\n')).not.toContain(needle.toString());
      const reports = (await vm.requests()).filter((r) => r.route === 'health').map((r) => r.body);
      expect(reports.join('\n')).not.toContain(needle.toString());
    }
  });

  it('after SIGTERM while waiting exits 0 without a failure report, and the next boot resumes the wait without a second pool Ready', async () => {
    const { vm, first, second, afterFirst } = await rebooted;
    expect(first.exitCode, first.stderr).toBe(0);
    expect(afterFirst.kinds).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(afterFirst.markers.map((m) => m.split('.').at(-1))).toEqual(['waiting-for-reuse']);
    expect(afterFirst.passwd.split('\n').map((l) => l.split(':')[0])).not.toContain('pooladmin');

    expect(second.exitCode, second.stderr).toBe(0);
    const requests = await vm.requests();
    const claim = (await reprovisionPolls(vm))[5]!;
    const readyBeforeClaim = requests.filter((r) => r.route === 'health' && r.body.includes('"state":"Ready"') && r.receivedAt < claim.receivedAt);
    expect(readyBeforeClaim).toHaveLength(1);
    expect((await vm.reportKinds()).filter((k) => k === 'Ready')).toHaveLength(2);
    expect(await users(vm)).toContain('customer');
    expect(await users(vm)).not.toContain('pooladmin');
    expect((await markers(vm)).map((m) => m.split('.').at(-1))).toEqual(['provisioned']);
  });

  it('Savable: Ready to the pool, then the NIC waits; no NIC attached within the deadline fails naming it, the placeholder never provisioned', async () => {
    const { vm, boot } = await savable;
    expect(boot.exitCode).toBe(1);
    expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready', 'NotReady/ProvisioningFailed']);
    const failed = (await vm.requests()).filter((r) => r.route === 'health').at(-1)!;
    const report = new Map(decodeReport((JSON.parse(failed.body) as { details: { description: string } }).details.description));
    expect(report.get('reason')).toBe('operation timed out');
    expect(report.get('phase')).toBe('preprovisioning');
    expect(report.get('error')).toBe('no attached network interface reached the fabric within 3 s');
    expect(report.get('pps_type')).toBe('Savable');
    // No NIC in the namespace: the detach had happened already, as far as the wait can tell.
    expect(`${boot.stdout}\n${boot.stderr}`).toContain('no NIC left: the host detached it before the wait began');
    expect((await vm.commands()).filter((c) => ['useradd', 'hostname', 'hostnamectl', 'passwd'].includes(c[0]!))).toEqual([]);
    expect(await users(vm)).not.toContain('pooladmin');
    expect(await reprovisionPolls(vm)).toEqual([]);
  });
});
