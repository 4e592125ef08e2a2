/**
 * A pool VM's new waits interrupted, with the real agent in namespaces: SIGKILL (a crash, a reset) and SIGTERM (a
 * shutdown) in each, then a boot of the same disk, which must converge. The crash matrix (test/hardening/crash.test.ts)
 * cannot judge these states against an ordinary fabric; these are its cases for them.
 *
 * For a Savable VM the fabric is behind the VM's NIC (its own namespace, cabled by veth pairs), so the primary NIC's
 * probe finds it through a NIC as on Azure; the harness plays the host (deletes the pool's NIC, cables the customer's
 * on another subnet) and the OS's DHCP (puts the address on the NIC: the sandbox has no network stack). Cases:
 * - killed in detachingNic (the pool's NIC still there): the next boot waits for an attached NIC, finds the pool's,
 *   polls through it; the host then detaches it and attaches the customer's; the VM goes back to the wait, finds the
 *   new one, is claimed and provisions. No second pool Ready.
 * - killed in attachingNic.listening (no NIC): the next boot waits, the customer's NIC comes, claimed, provisioned.
 * - killed in attachingNic.probing (the new NIC without an address yet): the next boot probes it again once it has
 *   one, claimed, provisioned.
 * - an OS-disk pool VM in awaitingShutdown: SIGTERM is the shutdown it waits for (exit 0, nothing reported); the next
 *   boot, after either signal, reports ProvisioningFailed PPS_NOT_SHUT_DOWN and never a second Ready.
 */
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeReport } from '../../src/azure/report.js';
import { decodeRecords } from '../../src/kvp/codec.js';
import { run } from '../../src/system/exec.js';
import { withVm as withVmIn, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox, createNetns, type Netns } from './ns.js';

const PREFIX = `bs-ppi-${process.pid}`;
const DATA_DIR = '/var/lib/bootstate';
// The stack named: the sandbox has none of its own, and the harness plays its DHCP client.
const CONFIG = '[preprovisioning]\npoll_interval_secs = 1\nnic_detach_timeout_secs = 100\nnic_attach_timeout_secs = 100\n\n[network]\nstack = "networkd"\n';
const vms: Vm[] = [];
const namespaces: Netns[] = [];

type Signal = 'TERM' | 'KILL';
type NicPoint = 'detachingNic' | 'listening' | 'probing';

interface Interrupted {
  first: BootResult;
  second: BootResult;
  afterFirst: { kinds: string[]; markers: string[] };
  kinds: string[];
  /** Health POSTs and reprovisiondata polls, in arrival order. */
  routes: string[];
  users: string[];
  kvpPps: string[];
  /** The run journals' last lines, for a failure's story. */
  journal: string;
}

const markers = async (vm: Vm) =>
  (await readdir(vm.sandbox.hostPath(DATA_DIR)).catch(() => [] as string[])).filter((n) => /\.(provisioned|report-pending|waiting-for-[a-z-]+)$/.test(n)).sort();
const users = async (vm: Vm) => (await readFile(vm.sandbox.hostPath('/etc/passwd'), 'utf8').catch(() => '')).split('\n').map((l) => l.split(':')[0]!);
const runsDir = (vm: Vm) => vm.sandbox.hostPath(`${DATA_DIR}/runs`);
/** A shell condition inside the VM: the run journal has entered `state`. */
const entered = (state: string) => `grep -qs '"${state}"' ${DATA_DIR}/runs/*.jsonl`;

/** Waits until a run journal not among `old` (this boot's) has entered `state`. */
async function untilEntered(vm: Vm, state: string, old: string[] = []): Promise<void> {
  for (const deadline = Date.now() + 90_000; Date.now() < deadline; ) {
    for (const name of (await readdir(runsDir(vm)).catch(() => [] as string[])).filter((n) => !old.includes(n))) {
      if ((await readFile(path.join(runsDir(vm), name), 'utf8').catch(() => '')).includes(`"${state}"`)) return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${vm.name}: the run never entered ${state}`);
}

async function kvpPps(vm: Vm): Promise<string[]> {
  const pool = await readFile(vm.sandbox.hostPath('/var/lib/hyperv/.kvp_pool_1')).catch(() => Buffer.alloc(0));
  return decodeRecords(pool)
    .filter((r) => r.key === 'PROVISIONING_REPORT')
    .map((r) => new Map(decodeReport(r.value)).get('pps_type') ?? '');
}

/** Cables NIC `name` (`mac`) from the VM to the fabric's namespace on `subnet`; `address`: the OS's DHCP gave it one. */
async function cable(vm: Vm, fabric: Netns, id: string, nic: { name: string; mac: string; subnet: string; address: boolean }): Promise<void> {
  const [far, near] = [`${id}f`, `${id}n`];
  await run(['ip', 'link', 'add', far, 'type', 'veth', 'peer', 'name', near, 'address', nic.mac]);
  await run(['ip', 'link', 'set', far, 'netns', fabric.name]);
  await run(['ip', 'link', 'set', near, 'netns', vm.netns.name]);
  await run(['ip', '-n', vm.netns.name, 'link', 'set', near, 'name', nic.name]);
  await run(['ip', '-n', fabric.name, 'addr', 'add', `${nic.subnet}.1/24`, 'dev', far]);
  await run(['ip', '-n', fabric.name, 'link', 'set', far, 'up']);
  if (nic.address) await lease(vm, nic.name, nic.subnet);
}

/** What the OS's DHCP client would do for `name`: link up, an address on `subnet`, the default route through it. */
async function lease(vm: Vm, name: string, subnet: string): Promise<void> {
  await run(['ip', '-n', vm.netns.name, 'link', 'set', name, 'up']);
  await run(['ip', '-n', vm.netns.name, 'addr', 'add', `${subnet}.10/24`, 'dev', name]);
  await run(['ip', '-n', vm.netns.name, 'route', 'replace', 'default', 'via', `${subnet}.1`, 'dev', name]);
}

const unplug = (vm: Vm, name: string) => run(['ip', '-n', vm.netns.name, 'link', 'del', name]);

/**
 * Until the agent's watch of the VM's links (`ip -o monitor link` in the VM's namespace) runs: the state is in the
 * journal as it is entered, before the actor it invokes has started, and a NIC deleted before the watch starts is a
 * NIC the watch never sees go.
 */
async function untilWatching(vm: Vm): Promise<void> {
  for (const deadline = Date.now() + 90_000; Date.now() < deadline; ) {
    const pids = (await run(['pgrep', '-f', '^ip -o monitor link'], { allowFailure: true })).stdout.split('\n').filter(Boolean);
    for (const pid of pids) {
      if ((await run(['ip', 'netns', 'identify', pid], { allowFailure: true })).stdout.trim() === vm.netns.name) return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${vm.name}: no ip monitor link ever ran in ${vm.netns.name}`);
}

async function seenAfter(vm: Vm, first: BootResult, second: BootResult, afterFirst: Interrupted['afterFirst']): Promise<Interrupted> {
  const requests = await vm.requests();
  const routes = requests
    .filter((r) => r.route === 'reprovision' || r.route === 'health')
    .map((r) => (r.route === 'reprovision' ? 'poll' : (JSON.parse(r.body) as { state: string; details?: { subStatus?: string } }).state));
  const names = (await readdir(runsDir(vm)).catch(() => [] as string[])).sort();
  const journal = (await Promise.all(names.map((n) => readFile(path.join(runsDir(vm), n), 'utf8').catch(() => '')))).join('\n').slice(-6000);
  return { first, second, afterFirst, kinds: await vm.reportKinds(), routes, users: await users(vm), kvpPps: await kvpPps(vm), journal };
}

/** A Savable pool VM interrupted at `point` by `signal`, then booted again and claimed. */
function savable(point: NicPoint, signal: Signal, n: number): Promise<Interrupted> {
  const name = `${PREFIX}-sv${n}`;
  return (async () => {
    const fabric = await createNetns(`${name}-fab`);
    namespaces.push(fabric);
    const claimWhen = path.join('/tmp', `${name}-claim`);
    return withVmIn(vms, name, { generation: 2, scenario: 'pps-savable', fabricNetns: fabric.name, claimWhen }, async (vm) => {
      await mkdir(vm.sandbox.hostPath('/etc/bootstate/bootstate.toml.d'), { recursive: true });
      await writeFile(vm.sandbox.hostPath('/etc/bootstate/bootstate.toml.d/50-pool.toml'), CONFIG);
      const id = `ppi${process.pid % 1000}${n}`;
      await cable(vm, fabric, `${id}a`, { name: 'eth0', mac: '00:0d:3a:49:00:10', subnet: '10.61.0', address: true });
      const customer = { name: 'eth1', mac: '00:0d:3a:49:01:20', subnet: '10.61.1' };
      const firstBoot = vm.boot([], { terminateWhen: entered(point), signal });
      if (point !== 'detachingNic') {
        await untilEntered(vm, 'detachingNic');
        await unplug(vm, 'eth0');
        if (point === 'probing') {
          await untilEntered(vm, 'listening');
          await cable(vm, fabric, `${id}b`, { ...customer, address: false });
        }
      }
      const first = await firstBoot;
      const afterFirst = { kinds: await vm.reportKinds(), markers: await markers(vm) };
      const old = await readdir(runsDir(vm));
      const secondBoot = vm.boot();
      if (point === 'detachingNic') {
        // The resumed run polls through the pool's NIC, until the host detaches it and attaches the customer's.
        await untilEntered(vm, 'waiting', old);
        await untilWatching(vm);
        await unplug(vm, 'eth0');
        await cable(vm, fabric, `${id}b`, { ...customer, address: true });
      } else if (point === 'listening') {
        await cable(vm, fabric, `${id}b`, { ...customer, address: true });
      } else {
        await lease(vm, customer.name, customer.subnet);
      }
      await writeFile(claimWhen, '');
      const second = await secondBoot;
      return seenAfter(vm, first, second, afterFirst);
    });
  })();
}

/** An OS-disk pool VM stopped by `signal` in its wait for the shutdown, then booted again. */
function osDisk(signal: Signal): Promise<Interrupted> {
  return withVmIn(vms, `${PREFIX}-od${signal === 'TERM' ? 't' : 'k'}`, { generation: 2, scenario: 'pps-os-disk' }, async (vm) => {
    const first = await vm.boot([], { terminateWhen: entered('awaitingShutdown'), signal });
    const afterFirst = { kinds: await vm.reportKinds(), markers: await markers(vm) };
    const second = await vm.boot();
    return seenAfter(vm, first, second, afterFirst);
  });
}

const CASES: Array<[NicPoint, Signal]> = (['detachingNic', 'listening', 'probing'] as const).flatMap((p) => (['KILL', 'TERM'] as const).map((s) => [p, s] as [NicPoint, Signal]));
let savables: Map<string, Promise<Interrupted>>;
let osDisks: Map<Signal, Promise<Interrupted>>;

describe.skipIf(!canSandbox)('pool VMs interrupted in their waits, then booted again on the same disk', { timeout: 300_000 }, () => {
  beforeAll(() => {
    assertNamespaces();
    savables = new Map(CASES.map(([point, signal], i) => [`${point} ${signal}`, savable(point, signal, i)]));
    osDisks = new Map((['TERM', 'KILL'] as const).map((s) => [s, osDisk(s)]));
    for (const p of [...savables.values(), ...osDisks.values()]) p.catch(() => undefined);
  });

  afterAll(async () => {
    await Promise.allSettled([...(savables?.values() ?? []), ...(osDisks?.values() ?? [])]);
    await Promise.allSettled(vms.map((vm) => vm.sandbox.cleanup()));
    await Promise.allSettled(namespaces.map((ns) => ns.delete()));
    await Promise.allSettled(CASES.map((_, i) => rm(path.join('/tmp', `${PREFIX}-sv${i}-claim`), { force: true })));
  }, 120_000);

  for (const [point, signal] of CASES) {
    it(`Savable, SIG${signal} in ${point === 'detachingNic' ? point : `attachingNic.${point}`}: the next boot waits again with no second pool Ready, finds the customer's NIC, is claimed and provisions`, async () => {
      const r = await savables.get(`${point} ${signal}`)!;
      const story = `first:\n${r.first.stderr.slice(-4000)}\nsecond:\n${r.second.stderr.slice(-6000)}\nrun journals:\n${r.journal}`;
      expect(r.first.exitCode, story).toBe(signal === 'TERM' ? 0 : 137);
      expect(r.afterFirst.kinds, story).toEqual(['NotReady/Provisioning', 'Ready']);
      expect(r.afterFirst.markers.map((m) => m.split('.').at(-1))).toEqual(['waiting-for-reuse-savable']);
      expect(r.second.exitCode, story).toBe(0);
      // One pool Ready, then polls, then the customer's Ready; never a failure.
      expect(r.routes.filter((x) => x === 'Ready'), story).toHaveLength(2);
      expect(r.routes.indexOf('poll')).toBeGreaterThan(r.routes.indexOf('Ready'));
      expect(r.routes.at(-1)).toBe('Ready');
      expect(r.kinds.filter((k) => k.includes('Failed'))).toEqual([]);
      expect(r.users).toContain('customer');
      expect(r.users).not.toContain('pooladmin');
      expect(r.kvpPps.at(-1)).toBe('Savable');
      expect(r.second.stderr + r.second.stdout).toMatch(/eth1 \(10\.61\.1\.10\) is the primary network interface/);
      // The watch saw eth0 go: deleted while it listened, or already gone when it listed the links.
      if (point === 'detachingNic') expect(r.second.stderr + r.second.stdout).toMatch(/the host detached eth0|no NIC left: the host detached it before the wait began/);
    });
  }

  for (const signal of ['TERM', 'KILL'] as const) {
    it(`OS disk, SIG${signal} in awaitingShutdown: ${signal === 'TERM' ? 'exits 0 with nothing reported' : 'killed'}; the next boot reports PPS_NOT_SHUT_DOWN, never a second Ready`, async () => {
      const r = await osDisks.get(signal)!;
      const story = `first:\n${r.first.stderr.slice(-4000)}\nsecond:\n${r.second.stderr.slice(-4000)}`;
      expect(r.first.exitCode, story).toBe(signal === 'TERM' ? 0 : 137);
      expect(r.afterFirst.kinds, story).toEqual(['NotReady/Provisioning', 'Ready']);
      expect(r.afterFirst.markers.map((m) => m.split('.').at(-1))).toEqual(['waiting-for-shutdown']);
      expect(r.second.exitCode, story).toBe(1);
      expect(r.kinds.filter((k) => k === 'Ready'), story).toHaveLength(1);
      expect(r.kinds.at(-1), story).toBe('NotReady/ProvisioningFailed');
      expect(r.second.stderr + r.second.stdout).toMatch(/started again instead of being shut down/);
    });
  }
});
