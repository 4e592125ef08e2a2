/**
 * readLinks against a sysfs-shaped temp tree (real files and symlinks, the kernel's layout) with a stand-in `ip -j`,
 * and bindPlan by example and by property: a NIC lands only on its one synthetic interface; an interface sharing its
 * MAC with another driver or a master (an SR-IOV VF) is never bound; every planned NIC is bound or says why not.
 */
import fc from 'fast-check';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { bindPlan, readLinks } from '../../../src/os/network/links.js';
import type { Link, NetworkPlan, NicPlan } from '../../../src/os/network/types.js';
import type { Runner, RunResult } from '../../../src/system/exec.js';

const MAC0 = '00:0d:3a:1b:2c:3d';
const MAC1 = '00:0d:3a:1b:2c:3e';

const nic = (index: number, mac: string): NicPlan => ({
  index, mac, primary: index === 0, metric: 100 * (index + 1), useDns: index === 0, static4: [], dhcp6: false, static6: [],
});
const link = (name: string, mac: string, driver: string | null, master: string | null = null): Link => ({ name, mac, driver, master });

function ipAnswering(stdout: string, exitCode = 0): Runner & { calls: string[][] } {
  const calls: string[][] = [];
  const runner = async (argv: string[]): Promise<RunResult> => {
    calls.push(argv);
    return { argv, exitCode, signal: null, stdout, stderr: '', endedBy: 'exit' };
  };
  return Object.assign(runner, { calls });
}

describe('readLinks on a sysfs-shaped tree', () => {
  let root: string;
  let net: string;

  /** An interface directory like the kernel's: address file, device/driver and master symlinks when given. */
  async function iface(name: string, options: { address?: string; driver?: string; master?: string }): Promise<void> {
    const dir = path.join(root, 'devices', name);
    await mkdir(dir, { recursive: true });
    if (options.address !== undefined) await writeFile(path.join(dir, 'address'), `${options.address}\n`);
    if (options.driver) {
      await mkdir(path.join(dir, 'device'));
      await symlink(`../../../bus/vmbus/drivers/${options.driver}`, path.join(dir, 'device', 'driver'));
    }
    if (options.master) await symlink(`../${options.master}`, path.join(dir, 'master'));
    await symlink(`../../devices/${name}`, path.join(net, name));
  }

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'bootstate-links-'));
    net = path.join(root, 'class', 'net');
    await mkdir(net, { recursive: true });
    await iface('lo', { address: '00:00:00:00:00:00' });
    await iface('eth0', { address: '00:0D:3A:1B:2C:3D', driver: 'hv_netvsc' });
    await iface('enP1s1', { address: MAC0, driver: 'mlx5_core', master: 'eth0' });
    await iface('veth0', { address: MAC1 });
    await iface('ib0', { address: '80:00:02:08:fe:80:00:00:00:00:00:00:00:15:5d:ff:fd:33:ff:0a' });
    await iface('tun0', {});
    await iface('sit0', { address: '00:00:00:00:00:00' });
    await writeFile(path.join(net, 'bonding_masters'), 'bond0\n');
  });
  afterEach(async () => rm(root, { recursive: true, force: true }));

  it('lists the interfaces with a MAC, by name, with sysfs drivers and masters, and link kinds from ip -j', async () => {
    const ip = ipAnswering(JSON.stringify([
      { ifname: 'lo', address: '00:00:00:00:00:00' },
      { ifname: 'eth0', address: MAC0 },
      { ifname: 'enP1s1', address: MAC0, master: 'eth0', linkinfo: { info_slave_kind: 'whatever' } },
      { ifname: 'veth0', address: MAC1, master: 'br0', linkinfo: { info_kind: 'veth' } },
    ]));
    expect(await readLinks({ sysClassNet: net, run: ip })).toEqual([
      link('enP1s1', MAC0, 'mlx5_core', 'eth0'),
      link('eth0', MAC0, 'hv_netvsc'),
      link('veth0', MAC1, 'veth', 'br0'),
    ]);
    expect(ip.calls).toEqual([['ip', '-j', '-d', 'link', 'show']]);
  });

  it('takes sysfs\'s driver over ip\'s link kind, and a master sysfs does not show from ip (enslaved either way)', async () => {
    const ip = ipAnswering(JSON.stringify([{ ifname: 'eth0', master: 'bond9', linkinfo: { info_kind: 'veth' } }]));
    const links = await readLinks({ sysClassNet: net, run: ip });
    expect(links.find((l) => l.name === 'eth0')).toEqual(link('eth0', MAC0, 'hv_netvsc', 'bond9'));
  });

  it.each([
    ['ip fails', ipAnswering('', 1)],
    ['ip prints no JSON', ipAnswering('Object "link" is unknown')],
    ['ip prints JSON of another shape', ipAnswering('{"ifname":"veth0"}')],
    ['ip cannot be run', (async () => { throw new Error('spawn ip ENOENT'); }) as Runner],
  ])('leaves a virtual interface\'s driver null when %s, and still reads sysfs', async (_why, run) => {
    expect(await readLinks({ sysClassNet: net, run })).toEqual([
      link('enP1s1', MAC0, 'mlx5_core', 'eth0'),
      link('eth0', MAC0, 'hv_netvsc'),
      link('veth0', MAC1, null),
    ]);
  });

  it('fails when the directory is not there (nothing can be bound without it)', async () => {
    await expect(readLinks({ sysClassNet: path.join(root, 'nope'), run: ipAnswering('[]') })).rejects.toThrow(/ENOENT/);
  });
});

describe('bindPlan by example', () => {
  const plan: NetworkPlan = { nics: [nic(0, MAC0), nic(1, MAC1)] };

  it('binds each NIC to its synthetic interface and lists the same-MAC VF, enslaved or not, as left alone', () => {
    const links = [link('eth0', MAC0, 'hv_netvsc'), link('enP1s1', MAC0, 'mlx5_core', 'eth0'), link('eth1', MAC1, 'hv_netvsc'), link('enP2s2', MAC1, 'mana'), link('docker0', '02:42:00:00:00:01', 'bridge')];
    expect(bindPlan(plan, links, ['hv_netvsc'])).toEqual({
      nics: [{ ...nic(0, MAC0), name: 'eth0', driver: 'hv_netvsc' }, { ...nic(1, MAC1), name: 'eth1', driver: 'hv_netvsc' }],
      unbound: [],
      virtualFunctions: [links[1], links[3]],
    });
  });

  it('says which interfaces it saw when no interface has the MAC', () => {
    const bound = bindPlan(plan, [link('eth0', MAC0, 'hv_netvsc'), link('enP1s1', MAC0, 'mlx5_core', 'eth0')], ['hv_netvsc']);
    expect(bound.unbound).toEqual([{ nic: nic(1, MAC1), why: `no interface has MAC ${MAC1}; interfaces seen: eth0 (${MAC0}, hv_netvsc), enP1s1 (${MAC0}, mlx5_core, enslaved to eth0)` }]);
  });

  it('never binds the VF when the synthetic interface is missing, and says why', () => {
    const vf = link('enP1s1', MAC0, 'mlx5_core');
    const bound = bindPlan({ nics: [nic(0, MAC0)] }, [vf], ['hv_netvsc']);
    expect(bound).toEqual({
      nics: [],
      unbound: [{ nic: nic(0, MAC0), why: `no interface with MAC ${MAC0} has a driver of hv_netvsc and no master: enP1s1 (mlx5_core)` }],
      virtualFunctions: [vf],
    });
  });

  it('leaves a NIC unbound when two interfaces could take it', () => {
    const bound = bindPlan({ nics: [nic(0, MAC0)] }, [link('eth0', MAC0, 'hv_netvsc'), link('eth9', MAC0, 'hv_netvsc')], ['hv_netvsc']);
    expect(bound.nics).toEqual([]);
    expect(bound.unbound[0]!.why).toBe(`ambiguous: 2 interfaces with MAC ${MAC0} have a driver of hv_netvsc and no master: eth0 (hv_netvsc), eth9 (hv_netvsc)`);
    expect(bound.virtualFunctions).toEqual([]);
  });

  it('takes the configured drivers: veth in a namespace, hv_netvsc left alone when not listed', () => {
    const links = [link('eth0', MAC0, 'veth'), link('eth1', MAC1, 'hv_netvsc')];
    const bound = bindPlan(plan, links, ['veth']);
    expect(bound.nics.map((n) => n.name)).toEqual(['eth0']);
    expect(bound.virtualFunctions).toEqual([links[1]]);
    expect(bound.unbound[0]!.why).toMatch(/has a driver of veth and no master: eth1 \(hv_netvsc\)/);
  });

  it('binds an interface to one NIC only when a plan lists a MAC twice', () => {
    const bound = bindPlan({ nics: [nic(0, MAC0), nic(3, MAC0)] }, [link('eth0', MAC0, 'hv_netvsc')], ['hv_netvsc']);
    expect(bound.nics.map((n) => n.index)).toEqual([0]);
    expect(bound.unbound).toEqual([{ nic: nic(3, MAC0), why: `its interface eth0 is already NIC 0's (the plan lists MAC ${MAC0} twice)` }]);
  });

  it('lists at most 16 interfaces in a reason', () => {
    const many = Array.from({ length: 40 }, (_, i) => link(`veth${i}`, `02:00:00:00:00:${i.toString(16).padStart(2, '0')}`, 'veth'));
    const why = bindPlan({ nics: [nic(0, MAC0)] }, many, ['hv_netvsc']).unbound[0]!.why;
    expect(why).toMatch(/veth15 \([^)]*\) and 24 more$/);
  });
});

describe('bindPlan by property', () => {
  const macs = ['00:0d:3a:00:00:01', '00:0d:3a:00:00:02', '00:0d:3a:00:00:03', '02:00:00:00:00:04'];
  const drivers = ['hv_netvsc', 'veth'];
  const anyDriver = fc.constantFrom('hv_netvsc', 'veth', 'mlx4_en', 'mlx5_core', 'mana', 'bridge', null);
  const links = fc.uniqueArray(
    fc.record({ name: fc.stringMatching(/^[a-z]{1,4}[0-9]$/), mac: fc.constantFrom(...macs), driver: anyDriver, master: fc.option(fc.constantFrom('eth0', 'bond0'), { nil: null }) }),
    { maxLength: 8, selector: (l) => l.name },
  );
  const plans = fc.uniqueArray(fc.constantFrom(...macs), { maxLength: 4 }).map((list): NetworkPlan => ({ nics: list.map((mac, index) => nic(index, mac)) }));
  const isVfOf = (l: Link, mac: string) => l.mac === mac && (l.driver === null || !drivers.includes(l.driver) || l.master !== null);

  it('never binds a NIC to an interface with another driver or a master, nor one interface twice', () => {
    fc.assert(fc.property(plans, links, (plan, seen) => {
      const bound = bindPlan(plan, seen, drivers);
      for (const b of bound.nics) {
        const target = seen.find((l) => l.name === b.name)!;
        expect(target.mac).toBe(b.mac);
        expect(drivers).toContain(target.driver);
        expect(b.driver).toBe(target.driver);
        expect(target.master).toBeNull();
        expect(plan.nics.some((n) => isVfOf(target, n.mac))).toBe(false);
      }
      expect(new Set(bound.nics.map((b) => b.name)).size).toBe(bound.nics.length);
    }), { numRuns: 1000 });
  });

  it('accounts for every planned NIC once: bound, or unbound with a reason naming its MAC', () => {
    fc.assert(fc.property(plans, links, (plan, seen) => {
      const bound = bindPlan(plan, seen, drivers);
      const indices = [...bound.nics.map((b) => b.index), ...bound.unbound.map((u) => u.nic.index)].sort();
      expect(indices).toEqual(plan.nics.map((n) => n.index).sort());
      for (const { nic: n, why } of bound.unbound) expect(why).toContain(n.mac);
      // Bound exactly when one interface qualifies.
      for (const n of plan.nics) {
        const qualifying = seen.filter((l) => l.mac === n.mac && !isVfOf(l, n.mac));
        expect(bound.nics.some((b) => b.index === n.index)).toBe(qualifying.length === 1);
      }
    }), { numRuns: 1000 });
  });

  it('lists as virtual functions exactly the interfaces with a planned MAC that do not qualify', () => {
    fc.assert(fc.property(plans, links, (plan, seen) => {
      const bound = bindPlan(plan, seen, drivers);
      expect(bound.virtualFunctions).toEqual(seen.filter((l) => plan.nics.some((n) => isVfOf(l, n.mac))));
      const names = new Set(bound.nics.map((b) => b.name));
      for (const vf of bound.virtualFunctions) expect(names.has(vf.name)).toBe(false);
    }), { numRuns: 1000 });
  });
});
