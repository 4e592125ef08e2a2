/**
 * A Savable pool VM's NIC waits (src/os/network/nic-events.ts) against a real kernel: a network namespace this test
 * builds holds one end of a veth pair standing in for the pool's NIC (the other end in a second namespace); deleting it ends the detach wait, adding another with a
 * new MAC ends the attach wait, a carrier down and up ends the carrier wait, an address ends the address wait, and an
 * aborted wait kills its `ip monitor` child. The parser is checked on its own,
 * with properties. As root on Linux a missing facility (namespaces, veth, ip) fails the suite, never skips.
 */
import { execFileSync } from 'node:child_process';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ipv4In, listLinks, parseLinkLine, waitForAddress, waitForCarrierSwitch, waitForNicAttach, waitForNicDetach } from '../../../src/os/network/nic-events.js';
import { run } from '../../../src/system/exec.js';
import { canSandbox, createNetns, type Netns } from '../../e2e/ns.js';

const POOL_MAC = '00:0d:3a:00:00:01';
const CUSTOMER_MAC = '00:0d:3a:00:00:02';

describe('parseLinkLine', () => {
  it('reads a new link, a deleted one, a VF under its NIC, and refuses other lines', () => {
    expect(parseLinkLine('3: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP group default \\    link/ether 00:0D:3A:00:00:01 brd ff:ff:ff:ff:ff:ff')).toEqual({
      deleted: false,
      index: 3,
      name: 'eth0',
      mac: POOL_MAC,
      master: null,
      flags: ['BROADCAST', 'MULTICAST', 'UP', 'LOWER_UP'],
    });
    expect(parseLinkLine('Deleted 3: va@NONE: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN group default \\    link/ether 00:0d:3a:00:00:07 brd ff:ff:ff:ff:ff:ff')).toMatchObject({
      deleted: true,
      name: 'va',
      mac: '00:0d:3a:00:00:07',
    });
    expect(parseLinkLine('4: enP1s1: <BROADCAST,MULTICAST,SLAVE,UP,LOWER_UP> mtu 1500 qdisc mq master eth0 state UP \\    link/ether 00:0d:3a:00:00:01')).toMatchObject({
      name: 'enP1s1',
      master: 'eth0',
    });
    expect(parseLinkLine('1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN \\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00')).toMatchObject({ name: 'lo', mac: null });
    expect(parseLinkLine('')).toBeNull();
    expect(parseLinkLine('Timestamp: Mon Dec  7 16:00:00 2026')).toBeNull();
  });

  it('reads back the name, index, MAC and master of any record it is given', () => {
    const name = fc.stringMatching(/^[a-zA-Z][a-zA-Z0-9_.-]{0,14}$/);
    const mac = fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 6, maxLength: 6 }).map((b) => b.map((x) => x.toString(16).padStart(2, '0')).join(':'));
    fc.assert(
      fc.property(fc.boolean(), fc.nat(100_000), name, fc.option(name, { nil: null }), mac, (deleted, index, ifname, master, address) => {
        const line = `${deleted ? 'Deleted ' : ''}${index}: ${ifname}@if9: <BROADCAST,UP> mtu 1500 qdisc noop${master ? ` master ${master}` : ''} state DOWN \\    link/ether ${address} brd ff:ff:ff:ff:ff:ff`;
        expect(parseLinkLine(line)).toEqual({ deleted, index, name: ifname, mac: address, master, flags: ['BROADCAST', 'UP'] });
      }),
    );
  });

  it('never throws on arbitrary text', () => {
    fc.assert(fc.property(fc.string(), (text) => void parseLinkLine(text)));
  });
});

describe('ipv4In', () => {
  it("reads the NIC's IPv4 address from an address record, never a deleted one, another NIC's or a link-local one", () => {
    const line = '3: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global dynamic eth0\\       valid_lft 86399sec preferred_lft 86399sec';
    expect(ipv4In(line, 'eth0')).toBe('10.0.0.5');
    expect(ipv4In(line, 'eth1')).toBeNull();
    expect(ipv4In(`Deleted ${line}`, 'eth0')).toBeNull();
    expect(ipv4In('3: eth0    inet 169.254.3.4/16 scope link eth0', 'eth0')).toBeNull();
    expect(ipv4In('3: eth0    inet6 fe80::1/64 scope link', 'eth0')).toBeNull();
  });
});

describe.skipIf(!canSandbox)('the NIC waits in a network namespace', { timeout: 30_000 }, () => {
  let netns: Netns;
  /** Where the pool NIC's peer lives: a second namespace, so the host's own is never touched. */
  let peer: Netns;
  const ip = (...args: string[]) => run(['ip', '-n', netns.name, ...args]);
  const monitors = () => execFileSync('pgrep', ['-f', `ip -n ${netns.name} -o monitor link`], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).length;

  beforeAll(async () => {
    netns = await createNetns(`bs-nic-${process.pid}`);
    peer = await createNetns(`bs-nic-peer-${process.pid}`);
  });
  afterAll(async () => {
    await netns?.delete();
    await peer?.delete();
  });

  it('the detach wait ends when the NIC is deleted, naming it; the attach wait sees a new one with another MAC', async () => {
    await ip('link', 'add', 'eth0', 'address', POOL_MAC, 'type', 'veth', 'peer', 'name', 'host0');
    await ip('link', 'set', 'host0', 'netns', peer.name);
    const controller = new AbortController();
    const detached = waitForNicDetach({ signal: controller.signal, netns: netns.name });
    let over = false;
    void detached.finally(() => (over = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(over).toBe(false);
    await ip('link', 'del', 'eth0');
    await expect(detached).resolves.toBe('eth0');

    // With no NIC left, the attach wait waits for one; a VF-like port of another link is not a NIC.
    const attached = waitForNicAttach({ signal: controller.signal, netns: netns.name, tried: [] });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await ip('link', 'add', 'eth1', 'address', CUSTOMER_MAC, 'type', 'veth', 'peer', 'name', 'peer1');
    const nic = await attached;
    expect([{ name: 'eth1', mac: CUSTOMER_MAC }, { name: 'peer1', mac: expect.any(String) }]).toContainEqual(nic);
  });

  it('the attach wait finds a NIC already there unless it was tried; one tried is skipped until another comes', async () => {
    const signal = new AbortController().signal;
    const present = (await listLinks({ signal, netns: netns.name })).filter((l) => l.mac && l.name !== 'lo').map((l) => l.name).sort();
    expect(present).toEqual(['eth1', 'peer1']);
    await expect(waitForNicAttach({ signal, netns: netns.name, tried: ['eth1'] })).resolves.toMatchObject({ name: 'peer1' });
    const next = waitForNicAttach({ signal, netns: netns.name, tried: ['eth1', 'peer1'] });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await ip('link', 'add', 'eth2', 'address', '00:0d:3a:00:00:03', 'type', 'veth', 'peer', 'name', 'peer2');
    const nic = await next;
    expect(['eth2', 'peer2']).toContain(nic.name);
  });

  it('the detach wait ends at once when no NIC is left (the host was faster than the wait)', async () => {
    for (const name of ['eth1', 'eth2']) await ip('link', 'del', name);
    await expect(waitForNicDetach({ signal: new AbortController().signal, netns: netns.name })).resolves.toBe('');
  });

  it("the carrier wait ends when a NIC's carrier goes down and comes back (the host moving it), naming it", async () => {
    await ip('link', 'add', 'eth3', 'address', POOL_MAC, 'type', 'veth', 'peer', 'name', 'far3');
    await ip('link', 'set', 'far3', 'netns', peer.name);
    await run(['ip', '-n', peer.name, 'link', 'set', 'far3', 'up']);
    await ip('link', 'set', 'eth3', 'up');
    const signal = new AbortController().signal;
    const switched = waitForCarrierSwitch({ signal, netns: netns.name });
    let over = false;
    void switched.finally(() => (over = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    await run(['ip', '-n', peer.name, 'link', 'set', 'far3', 'down']);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(over).toBe(false);
    await run(['ip', '-n', peer.name, 'link', 'set', 'far3', 'up']);
    await expect(switched).resolves.toBe('eth3');
  });

  it('the address wait ends with the first IPv4 address the NIC gets, or at once with one it has', async () => {
    const signal = new AbortController().signal;
    const leased = waitForAddress({ signal, netns: netns.name, nic: 'eth3' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await ip('addr', 'add', '10.99.0.2/24', 'dev', 'eth3');
    await expect(leased).resolves.toBe('10.99.0.2');
    await expect(waitForAddress({ signal, netns: netns.name, nic: 'eth3' })).resolves.toBe('10.99.0.2');
    await ip('link', 'del', 'eth3');
  });

  it('an aborted wait rejects and leaves no ip monitor behind', async () => {
    const controller = new AbortController();
    const waiting = waitForNicAttach({ signal: controller.signal, netns: netns.name, tried: [] });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(monitors()).toBe(1);
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'PPS_NIC_FAILED' });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(() => monitors()).toThrow();
  });

  it('the detach wait does not take a port removed from under a NIC (an SR-IOV VF) for the NIC going', async () => {
    // A bridge stands in for the synthetic NIC, a veth port of it for its VF: the kernel unlinks a port before it
    // deletes it, so the port's last record carries no `master`.
    await ip('link', 'add', 'nic5', 'address', POOL_MAC, 'type', 'bridge');
    await ip('link', 'add', 'vf5', 'address', POOL_MAC, 'type', 'veth', 'peer', 'name', 'far5');
    await ip('link', 'set', 'far5', 'netns', peer.name);
    await ip('link', 'set', 'vf5', 'master', 'nic5');
    const detached = waitForNicDetach({ signal: new AbortController().signal, netns: netns.name });
    let over = false;
    void detached.finally(() => (over = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    await ip('link', 'del', 'vf5');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(over, 'the VF going ended the wait').toBe(false);
    await ip('link', 'del', 'nic5');
    await expect(detached).resolves.toBe('nic5');
  });
});
