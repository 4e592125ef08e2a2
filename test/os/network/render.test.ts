/**
 * Golden tests of the four renderers: the files each renders for a two-NIC and a three-NIC plan, compared with
 * test/os/network/golden/<stack>/<plan>/; and what they share: a header, bootstate's names, modes, MAC and driver
 * matching, leaving out skipped interfaces.
 */
import { basename } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderers } from '../../../src/os/network/renderers.js';
import type { StackName } from '../../../src/os/network/types.js';
import { PLANS, THREE_NICS, TWO_NICS } from './plans.js';

const STACKS: StackName[] = ['networkd', 'netplan', 'ifupdown', 'networkmanager'];

describe.each(STACKS)('%s renderer', (stack) => {
  const { render } = renderers[stack];

  it.each(Object.entries(PLANS))('matches the golden files for %s', async (name, plan) => {
    const files = render(plan, new Set());
    for (const file of files) {
      await expect(file.text).toMatchFileSnapshot(`golden/${stack}/${name}/${basename(file.path)}`);
    }
    expect(files.map((f) => [f.path, f.mode.toString(8), f.interfaces])).toMatchSnapshot();
  });

  it('begins every file with the comment saying bootstate wrote it and replaces it', () => {
    for (const file of render(THREE_NICS, new Set())) {
      expect(file.text.split('\n').slice(0, 2)).toEqual([
        '# Written by bootstate from the Azure IMDS network section (network.interface[]).',
        '# bootstate replaces this file on every boot: changes made here are lost.',
      ]);
      expect(basename(file.path)).toMatch(/bootstate/);
    }
  });

  it('leaves out a skipped interface entirely and is pure', () => {
    const files = render(TWO_NICS, new Set(['eth1']));
    expect(files.flatMap((f) => f.interfaces)).not.toContain('eth1');
    expect(files.some((f) => f.text.includes('eth1') || f.text.includes('00:0d:3a:00:00:02'))).toBe(false);
    expect(render(TWO_NICS, new Set(['eth1']))).toEqual(files);
    expect(render(TWO_NICS, new Set(['eth0', 'eth1']))).toEqual([]);
  });

  it('never names a virtual function', () => {
    for (const file of render(TWO_NICS, new Set())) expect(file.text).not.toContain('enP1s1');
  });
});

describe('matching by MAC and driver', () => {
  const text = (stack: StackName): string => renderers[stack].render(TWO_NICS, new Set()).map((f) => f.text).join('\n');

  it('networkd matches MACAddress= and Driver=', () => {
    expect(text('networkd')).toMatch(/\[Match\]\nMACAddress=00:0d:3a:00:00:01\nDriver=hv_netvsc\n/);
  });
  it('netplan matches macaddress and driver, without set-name', () => {
    expect(text('netplan')).toMatch(/match:\n {8}macaddress: "00:0d:3a:00:00:01"\n {8}driver: "hv_netvsc"\n/);
    expect(text('netplan')).not.toContain('set-name');
  });
  it('NetworkManager matches [ethernet] mac-address= and [match] driver=', () => {
    expect(text('networkmanager')).toMatch(/\[ethernet\]\nmac-address=00:0D:3A:00:00:01\n\n\[match\]\ndriver=hv_netvsc\n/);
  });
  it('ifupdown names the bound interface', () => {
    expect(text('ifupdown')).toMatch(/^iface eth0 inet dhcp$/m);
  });
});

describe('modes', () => {
  it('netplan and NetworkManager files are 0600, networkd and ifupdown 0644', () => {
    const modes = Object.fromEntries(STACKS.map((s) => [s, [...new Set(renderers[s].render(TWO_NICS, new Set()).map((f) => f.mode))]]));
    expect(modes).toEqual({ networkd: [0o644], netplan: [0o600], ifupdown: [0o644], networkmanager: [0o600] });
  });
});

describe('ifupdown with the image declaring the interface', () => {
  it('for interfaces the image declares (inet dhcp): DHCPv6 and the IPv6 extras in a stanza, the IPv4 extras after the lease', () => {
    const files = renderers.ifupdown.render(TWO_NICS, new Set(), new Set(['eth0', 'eth1']));
    expect(files.map((f) => f.path)).toEqual([
      '/etc/network/interfaces.d/bootstate-eth0',
      '/etc/dhcp/dhclient-enter-hooks.d/zz-bootstate',
      '/etc/dhcp/dhclient-exit-hooks.d/zz-bootstate',
    ]);
    const [eth0, enter, exit] = files;
    expect(eth0!.text).not.toMatch(/^iface eth0 inet (dhcp|manual)|^allow-hotplug|10\.0\.0\.5/m);
    // The plan asks for DHCPv6 and the image declares no IPv6 for eth0: a DHCPv6 stanza of bootstate's.
    expect(eth0!.text).toMatch(/^iface eth0 inet6 dhcp$/m);
    expect(enter!.interfaces).toEqual(['eth0', 'eth1']);
    expect(exit!.interfaces).toEqual(['eth0']);
    expect(exit!.text).toMatch(/BOUND\|RENEW\|REBIND\|REBOOT\)[\s\S]*eth0\)\n {8}ip addr add 10\.0\.0\.5\/24 brd \+ dev eth0 2>\/dev\/null \|\| true/);
  });

  it('adds no IPv6 stanza and no file for an interface whose IPv6 the image declares and that has no other address', () => {
    const files = renderers.ifupdown.render(TWO_NICS, new Set(), new Set(['eth0', 'eth0 inet6', 'eth1']));
    expect(files.map((f) => f.path)).toEqual(['/etc/dhcp/dhclient-enter-hooks.d/zz-bootstate', '/etc/dhcp/dhclient-exit-hooks.d/zz-bootstate']);
  });

});
