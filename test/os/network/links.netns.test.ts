/**
 * readLinks and bindPlan against a real kernel: a network namespace this test builds holds two veth "NICs" and, for
 * each, a VF stand-in with its MAC — a macvlan (another driver) for eth0, a veth enslaved to a bridge (a master) for
 * eth1 — read through that namespace's own sysfs (`ip netns exec` mounts it). This kernel has no dummy driver, hence
 * macvlan. As root on Linux a missing facility (namespaces, veth, macvlan, bridge, ip) fails the suite, never skips.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { networkPlanFrom } from '../../../src/os/network/imds-network.js';
import { bindPlan } from '../../../src/os/network/links.js';
import type { Link } from '../../../src/os/network/types.js';
import { run } from '../../../src/system/exec.js';
import { canSandbox, createNetns, REPO, type Netns } from '../../e2e/ns.js';

const SCRIPT = path.join(import.meta.dirname, 'fixtures/print-links.ts');
const MAC0 = '00:0d:3a:1b:2c:3d';
const MAC1 = '00:0d:3a:1b:2c:3e';

const DOCUMENT = {
  network: {
    interface: [
      { macAddress: '000D3A1B2C3D', ipv4: { ipAddress: [{ privateIpAddress: '10.0.0.4' }, { privateIpAddress: '10.0.0.5' }], subnet: [{ address: '10.0.0.0', prefix: '24' }] }, ipv6: { ipAddress: [{ privateIpAddress: 'fd00::4' }] } },
      { macAddress: '000D3A1B2C3E', ipv4: { ipAddress: [{ privateIpAddress: '10.0.1.4' }], subnet: [{ address: '10.0.1.0', prefix: '24' }] } },
      { macAddress: '000D3A1B2C3F', ipv4: { ipAddress: [{ privateIpAddress: '10.0.2.4' }] } },
    ],
  },
};

describe.skipIf(!canSandbox)('readLinks in a network namespace with VF stand-ins sharing the NICs\' MACs', () => {
  let netns: Netns;
  let links: Link[];

  beforeAll(async () => {
    netns = await createNetns(`bs-links-${process.pid}`);
    const ip = (...args: string[]) => run(['ip', '-n', netns.name, ...args]);
    await ip('link', 'add', 'eth0', 'address', MAC0, 'type', 'veth', 'peer', 'name', 'peer0', 'address', '02:00:00:00:00:a0');
    await ip('link', 'add', 'link', 'peer0', 'name', 'vf0', 'address', MAC0, 'type', 'macvlan');
    await ip('link', 'add', 'eth1', 'address', MAC1, 'type', 'veth', 'peer', 'name', 'peer1', 'address', '02:00:00:00:00:a1');
    await ip('link', 'add', 'br0', 'address', '02:00:00:00:00:b0', 'type', 'bridge');
    await ip('link', 'add', 'vf1', 'address', MAC1, 'type', 'veth', 'peer', 'name', 'vf1p', 'address', '02:00:00:00:00:a2');
    await ip('link', 'set', 'vf1', 'master', 'br0');
    const printed = await run(['ip', 'netns', 'exec', netns.name, process.execPath, '--import', 'tsx', SCRIPT], { cwd: REPO, timeoutMs: 60_000, allowFailure: true });
    expect(printed.exitCode, printed.stderr).toBe(0);
    links = JSON.parse(printed.stdout) as Link[];
  }, 90_000);
  afterAll(async () => netns?.delete());

  it('reads every interface of the namespace but lo, with its MAC, link kind and master', () => {
    expect(links).toEqual([
      { name: 'br0', mac: '02:00:00:00:00:b0', driver: 'bridge', master: null },
      { name: 'eth0', mac: MAC0, driver: 'veth', master: null },
      { name: 'eth1', mac: MAC1, driver: 'veth', master: null },
      { name: 'peer0', mac: '02:00:00:00:00:a0', driver: 'veth', master: null },
      { name: 'peer1', mac: '02:00:00:00:00:a1', driver: 'veth', master: null },
      { name: 'vf0', mac: MAC0, driver: 'macvlan', master: null },
      { name: 'vf1', mac: MAC1, driver: 'veth', master: 'br0' },
      { name: 'vf1p', mac: '02:00:00:00:00:a2', driver: 'veth', master: null },
    ]);
  });

  it('binds each NIC to its own interface, never to the VF stand-ins, and says why the third has none', () => {
    const { plan } = networkPlanFrom(DOCUMENT);
    const bound = bindPlan(plan!, links, ['veth']);
    expect(bound.nics.map((n) => [n.index, n.name, n.driver])).toEqual([[0, 'eth0', 'veth'], [1, 'eth1', 'veth']]);
    expect(bound.nics[0]).toMatchObject({ static4: [{ address: '10.0.0.5', prefix: 24 }], dhcp6: true, metric: 100, useDns: true });
    expect(bound.virtualFunctions.map((l) => l.name)).toEqual(['vf0', 'vf1']);
    expect(bound.unbound).toEqual([{ nic: plan!.nics[2], why: expect.stringMatching(/^no interface has MAC 00:0d:3a:1b:2c:3f; interfaces seen: br0 .*vf0 \(00:0d:3a:1b:2c:3d, macvlan\), vf1 \(00:0d:3a:1b:2c:3e, veth, enslaved to br0\)/) }]);
  });

  it('binds nothing when the configured driver is hv_netvsc, as on Azure: every interface with a planned MAC is left alone', () => {
    const { plan } = networkPlanFrom(DOCUMENT);
    const bound = bindPlan(plan!, links, ['hv_netvsc']);
    expect(bound.nics).toEqual([]);
    expect(bound.unbound.map((u) => u.nic.index)).toEqual([0, 1, 2]);
    expect(bound.virtualFunctions.map((l) => l.name)).toEqual(['eth0', 'eth1', 'vf0', 'vf1']);
    expect(bound.unbound[0]!.why).toBe(`no interface with MAC ${MAC0} has a driver of hv_netvsc and no master: eth0 (veth), vf0 (macvlan)`);
  });
});
