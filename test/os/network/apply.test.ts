/**
 * The order of writeAndApply's writes and commands, with a recording `run` that also looks at the disk when each
 * command runs: networkd reloads before the primary's file is there, ifupdown takes a secondary down while its old
 * stanza is still on disk, the primary is never reconfigured or taken down, and a failing secondary is a warning.
 * What the stacks really do with these commands is proven in booted VMs (test/boot/network.test.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeAndApply } from '../../../src/os/network/apply.js';
import type { ApplyDeps, BoundNic, BoundPlan, RenderedFile } from '../../../src/os/network/types.js';
import type { RunResult } from '../../../src/system/exec.js';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'bootstate-netapply-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const nic = (index: number, extra: Partial<BoundNic> = {}): BoundNic => ({
  index, name: `eth${index}`, mac: `00:0d:3a:00:00:1${index}`, primary: index === 0, metric: 100 * (index + 1), useDns: index === 0,
  static4: [], dhcp6: false, static6: [], driver: 'hv_netvsc', ...extra,
});
const planOf = (...nics: BoundNic[]): BoundPlan => ({ nics, unbound: [], virtualFunctions: [] });
const file = (p: string, name: string, text: string): RenderedFile => ({ path: p, text, mode: 0o644, interfaces: [name] });

/** A `run` that records each command with what `watch` saw on disk then, answering from `answers` (first match). */
function recorder(watch: string[], answers: Array<[RegExp, Partial<RunResult>]>) {
  const calls: string[] = [];
  const deps: ApplyDeps = {
    async run(argv) {
      const line = argv.join(' ');
      const seen = watch.map((p) => `${path.basename(p)}=${existsSync(path.join(root, p)) ? readFileSync(path.join(root, p), 'utf8').trim() : '-'}`);
      calls.push(`${line}  [${seen.join(' ')}]`);
      const answer = answers.find(([re]) => re.test(line))?.[1] ?? {};
      return { argv, exitCode: 0, signal: null, stdout: '', stderr: '', endedBy: 'exit', ...answer };
    },
    log: { info: () => undefined, warn: () => undefined },
  };
  return { calls, deps };
}

describe('writeAndApply on systemd-networkd', () => {
  const eth0File = '/etc/systemd/network/80-eth0.network.d/50-bootstate.conf';
  const eth1File = '/etc/systemd/network/50-bootstate-eth1.network';
  const plan = planOf(nic(0, { static4: [{ address: '10.0.0.5', prefix: 24 }] }), nic(1));
  const rendered = [file(eth0File, 'eth0', 'Address=10.0.0.5/24'), file(eth1File, 'eth1', 'eth1')];

  it('reloads before the primary file is on disk, writes it after, and adds its address with ip', async () => {
    const { calls, deps } = recorder([eth0File, eth1File], [
      [/^networkctl list/, { stdout: '  2 eth0 ether routable configured\n  3 eth1 ether routable configured\n' }],
      [/^networkctl status .*eth1/, { stdout: `Network File: ${eth1File}\n` }],
      [/^ip -o addr show dev eth0/, { stdout: '2: eth0    inet 10.0.0.4/24 metric 100 brd 10.0.0.255 scope global dynamic eth0\\\n' }],
      [/^ip -4 route show default dev eth0/, { stdout: 'default via 10.0.0.1 proto dhcp src 10.0.0.4 metric 100\n' }],
    ]);
    const { change, outcome } = await writeAndApply(root, 'networkd', plan, rendered, [], deps);
    const before = '[50-bootstate.conf=- 50-bootstate-eth1.network=eth1]';
    const after = '[50-bootstate.conf=Address=10.0.0.5/24 50-bootstate-eth1.network=eth1]';
    expect(calls.map((c) => `${c.split(' ').slice(0, 2).join(' ')} ${c.slice(c.indexOf('  [') + 2)}`)).toEqual([
      `networkctl reload ${before}`,
      `networkctl status ${before}`,
      `networkctl list ${before}`,
      `ip -o ${after}`,
      `ip addr ${after}`,
      `ip route ${after}`,
      `ip -4 ${after}`,
    ]);
    expect(calls.find((c) => c.startsWith('ip addr add'))).toMatch(/^ip addr add 10\.0\.0\.5\/24 brd \+ dev eth0 /);
    expect(calls.join('\n')).not.toMatch(/reconfigure eth0|ifdown|reapply/);
    expect(change.written.map((f) => f.path)).toEqual([eth1File, eth0File]);
    expect(outcome).toEqual({ applied: ['eth1', 'eth0'], warnings: [] });
  });

  it('reconfigures a secondary the reload left on another file, and a secondary that fails is a warning', async () => {
    const { calls, deps } = recorder([], [
      [/^networkctl list/, { stdout: '  2 eth0 ether routable configured\n  3 eth1 ether off failed\n' }],
      [/^networkctl status .*eth1/, { stdout: 'Network File: n/a\n' }],
      [/^ip -o addr show dev eth0/, { stdout: '2: eth0    inet 10.0.0.4/24 scope global dynamic eth0\n' }],
    ]);
    const { outcome } = await writeAndApply(root, 'networkd', planOf(nic(0), nic(1)), [file(eth1File, 'eth1', 'x')], [], deps);
    expect(calls.some((c) => c.startsWith('networkctl reconfigure eth1'))).toBe(true);
    expect(outcome.applied).toEqual(['eth0']);
    expect(outcome.warnings).toEqual([{ interface: 'eth1', message: 'systemd-networkd left eth1 failed' }]);
  });

  it('takes away an address only bootstate listed before, and never a lease', async () => {
    const old = file(eth0File, 'eth0', 'Address=10.0.0.5/24\nAddress=10.0.0.6/24\nAddress=10.0.0.4/24');
    await writeAndApply(root, 'networkd', planOf(nic(0)), [old], [], recorder([], [[/^networkctl list/, { stdout: '' }]]).deps);
    const { calls, deps } = recorder([], [
      [/^ip -o addr show dev eth0/, { stdout: 'inet 10.0.0.4/24 scope global dynamic eth0\ninet 10.0.0.5/24 scope global secondary eth0\ninet 10.0.0.6/24 scope global secondary eth0\n' }],
    ]);
    await writeAndApply(root, 'networkd', planOf(nic(0, { static4: [{ address: '10.0.0.5', prefix: 24 }] })), [file(eth0File, 'eth0', 'Address=10.0.0.5/24')], [eth0File], deps);
    expect(calls.filter((c) => c.startsWith('ip addr'))).toEqual(['ip addr del 10.0.0.6/24 dev eth0  []']);
  });
});

describe('writeAndApply on ifupdown', () => {
  const eth1File = '/etc/network/interfaces.d/50-bootstate-eth1';
  const eth2File = '/etc/network/interfaces.d/50-bootstate-eth2';

  it('takes a changed or removed secondary down while its old stanza is on disk, brings it up after the new one', async () => {
    const first = recorder([], [[/^ifquery eth/, { exitCode: 1 }]]);
    await writeAndApply(root, 'ifupdown', planOf(nic(0), nic(1), nic(2)), [file(eth1File, 'eth1', 'iface eth1 inet dhcp'), file(eth2File, 'eth2', 'iface eth2 inet dhcp')], [], first.deps);
    const ifupdown = (calls: string[]) => calls.filter((c) => /^ifdown |^systemd-run .* ifup /.test(c)).map((c) => c.replace(/^systemd-run .* (ifup \S+)/, '$1'));
    expect(ifupdown(first.calls).map((c) => c.split('  ')[0])).toEqual(['ifup eth1', 'ifup eth2']);

    const { calls, deps } = recorder([eth1File, eth2File], [[/^ifquery --state/, { stdout: 'eth0=eth0\neth1=eth1\neth2=eth2\nlo=lo\n' }]]);
    const next = file(eth1File, 'eth1', 'iface eth1 inet dhcp\n    metric 200');
    const { change, outcome } = await writeAndApply(root, 'ifupdown', planOf(nic(0), nic(1)), [next], [eth1File, eth2File], deps);
    expect(ifupdown(calls)).toEqual([
      'ifdown eth1  [50-bootstate-eth1=iface eth1 inet dhcp 50-bootstate-eth2=iface eth2 inet dhcp]',
      'ifdown eth2  [50-bootstate-eth1=iface eth1 inet dhcp\n    metric 200 50-bootstate-eth2=iface eth2 inet dhcp]',
      'ifup eth1  [50-bootstate-eth1=iface eth1 inet dhcp\n    metric 200 50-bootstate-eth2=-]',
    ]);
    expect(change.removed).toEqual([eth2File]);
    expect(outcome.warnings).toEqual([]);
  });

  it('never takes the primary down, even when its own file changes', async () => {
    const eth0File = '/etc/network/interfaces.d/50-bootstate-eth0';
    await writeAndApply(root, 'ifupdown', planOf(nic(0)), [file(eth0File, 'eth0', 'iface eth0 inet static\n address 10.0.0.5/24')], [], recorder([], []).deps);
    const { calls, deps } = recorder([], [[/^ifquery --state/, { stdout: 'eth0=eth0\n' }]]);
    await writeAndApply(root, 'ifupdown', planOf(nic(0)), [file(eth0File, 'eth0', 'iface eth0 inet static\n address 10.0.0.6/24')], [eth0File], deps);
    expect(calls.join('\n')).not.toMatch(/if(up|down) eth0/);
  });

  it('a secondary whose ifup fails is a warning, not an exception', async () => {
    const { deps } = recorder([], [[/ ifup eth1$/, { exitCode: 1, stderr: 'Job for bootstate-ifup-eth1.service failed.\n' }], [/^ifquery eth/, { exitCode: 1 }]]);
    const { outcome } = await writeAndApply(root, 'ifupdown', planOf(nic(0), nic(1)), [file(eth1File, 'eth1', 'iface eth1 inet dhcp')], [], deps);
    expect(outcome.warnings).toEqual([{ interface: 'eth1', message: expect.stringMatching(/^systemd-run .* ifup eth1 exited with 1: Job for bootstate-ifup-eth1.service failed\.$/) }]);
  });
});

describe("netplan: the secondaries' generated networkd files copied live", () => {
  it('copies a changed or new secondary file, removes one netplan no longer makes, and never touches the primary\'s', async () => {
    const { copySecondaries } = await import('../../../src/os/network/apply-netplan.js');
    const { mkdir, writeFile, readFile, readdir } = await import('node:fs/promises');
    const generated = path.join(root, 'generated');
    const live = path.join(root, 'live');
    await mkdir(generated);
    await mkdir(live);
    // netplan 0.106 writes `match: macaddress` as PermanentMACAddress=.
    const primary = '[Match]\nDriver=veth\nPermanentMACAddress=00:0d:3a:00:00:10\n\n[Network]\nDHCP=yes\nAddress=10.0.0.5/24\n';
    await writeFile(path.join(generated, '10-netplan-0-bootstate-eth0.network'), primary);
    await writeFile(path.join(live, '10-netplan-0-bootstate-eth0.network'), '[Match]\nPermanentMACAddress=00:0d:3a:00:00:10\n\n[Network]\nDHCP=yes\n');
    await writeFile(path.join(generated, '10-netplan-0-bootstate-eth1.network'), '[Match]\nMACAddress=00:0d:3a:00:00:11\n');
    await writeFile(path.join(live, '10-netplan-0-bootstate-eth2.network'), '[Match]\nMACAddress=00:0d:3a:00:00:12\n');
    await writeFile(path.join(live, '50-image.network'), 'image\n');
    await copySecondaries(generated, live, planOf(nic(0), nic(1)));
    expect((await readdir(live)).sort()).toEqual(['10-netplan-0-bootstate-eth0.network', '10-netplan-0-bootstate-eth1.network', '50-image.network']);
    expect(await readFile(path.join(live, '10-netplan-0-bootstate-eth0.network'), 'utf8')).not.toContain('Address=10.0.0.5');
    expect(await readFile(path.join(live, '10-netplan-0-bootstate-eth1.network'), 'utf8')).toContain('00:0d:3a:00:00:11');
  });
});
