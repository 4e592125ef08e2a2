/**
 * What each stack's reader finds in an image (temp roots): the image's own configuration of a planned interface
 * that differs from the plan (a conflict) or coexists with it, bootstate's earlier files, and the stack detected.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { detectStack } from '../../../src/os/network/detect.js';
import { renderers } from '../../../src/os/network/renderers.js';
import { TWO_NICS } from './plans.js';

const roots: string[] = [];
afterAll(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

/** A temp root with these files (a value starting with `->` is a symlink to the rest). */
function root(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'bootstate-net-image-'));
  roots.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    if (text.startsWith('->')) symlinkSync(text.slice(2), join(dir, path));
    else writeFileSync(join(dir, path), text);
  }
  return dir;
}

describe('networkd', () => {
  const { conflicts, ownedFiles } = renderers.networkd;

  it('reports a static or DHCP-less file for a planned interface, by name glob or MAC, in any of the three dirs', async () => {
    const r = root({
      '/etc/systemd/network/50-eth1.network': '[Match]\nName=eth1\n[Network]\nAddress=10.9.9.9/24\n',
      '/usr/lib/systemd/network/20-mac.network': '[Match]\nMACAddress=00:0D:3A:00:00:01\n[Network]\nDHCP=no\n',
    });
    expect(await conflicts(r, TWO_NICS)).toEqual([
      { interface: 'eth0', file: '/usr/lib/systemd/network/20-mac.network', why: 'it leaves DHCPv4 off (DHCP=no)' },
      { interface: 'eth1', file: '/etc/systemd/network/50-eth1.network', why: 'it sets static address 10.9.9.9/24' },
    ]);
  });

  it('lets a compatible DHCP file that sorts after bootstate\'s coexist, and reports one that sorts first', async () => {
    const later = root({ '/usr/lib/systemd/network/99-default.network': '[Match]\nName=e*\n[Network]\nDHCP=yes\n' });
    expect(await conflicts(later, TWO_NICS)).toEqual([]);
    const first = root({ '/run/systemd/network/05-all.network': '[Match]\nName=eth*\n[Network]\nDHCP=ipv4\n' });
    expect((await conflicts(first, TWO_NICS)).map((c) => [c.interface, c.why])).toEqual([
      ['eth0', 'it sorts before 10-bootstate-eth0.network, so networkd would apply it and not bootstate\'s'],
      ['eth1', 'it sorts before 10-bootstate-eth1.network, so networkd would apply it and not bootstate\'s'],
    ]);
  });

  it('follows masking, negation and driver matches, and ignores bootstate\'s own files', async () => {
    const r = root({
      '/etc/systemd/network/50-eth1.network': '',
      '/usr/lib/systemd/network/50-eth1.network': '[Match]\nName=eth1\n[Network]\nAddress=10.9.9.9/24\n',
      '/etc/systemd/network/60-not0.network': '[Match]\nName=!eth0\n[Network]\nDHCP=no\n',
      '/etc/systemd/network/59-not01.network': '[Match]\nName=!eth0 eth1\n[Network]\nDHCP=no\n',
      '/etc/systemd/network/61-vf.network': '[Match]\nDriver=mlx5*\n[Network]\nDHCP=no\n',
      '/etc/systemd/network/10-bootstate-eth0.network': '[Match]\nName=eth0\n[Network]\nAddress=1.2.3.4/8\n',
    });
    expect(await conflicts(r, TWO_NICS)).toEqual([
      { interface: 'eth1', file: '/etc/systemd/network/60-not0.network', why: 'it leaves DHCPv4 off (DHCP=no)' },
    ]);
    expect(await ownedFiles(r)).toEqual(['/etc/systemd/network/10-bootstate-eth0.network']);
  });
});

describe('netplan', () => {
  const { conflicts, ownedFiles } = renderers.netplan;
  const yaml = (ethernets: string): string => `network:\n  version: 2\n  ethernets:\n${ethernets}`;

  it('lets cloud-init\'s DHCP definition coexist and reports static addresses and DHCPv4 off', async () => {
    const r = root({
      '/etc/netplan/50-cloud-init.yaml': yaml(
        '    eth0:\n      match:\n        macaddress: "00:0d:3a:00:00:01"\n        driver: hv_netvsc\n      set-name: eth0\n      dhcp4: true\n',
      ),
      '/etc/netplan/60-static.yaml': yaml('    secondary:\n      match: {name: "eth1"}\n      addresses: [10.9.9.9/24]\n'),
      '/lib/netplan/70-off.yaml': yaml('    eth0:\n      dhcp4: false\n'),
      '/etc/netplan/90-bootstate.yaml': yaml('    eth1:\n      addresses: [1.2.3.4/8]\n'),
    });
    expect(await conflicts(r, TWO_NICS)).toEqual([
      { interface: 'eth0', file: '/lib/netplan/70-off.yaml', why: 'it leaves DHCPv4 off (netplan ID eth0)' },
      { interface: 'eth1', file: '/etc/netplan/60-static.yaml', why: 'it sets static address 10.9.9.9/24 (netplan ID secondary)' },
    ]);
    expect(await ownedFiles(r)).toEqual(['/etc/netplan/90-bootstate.yaml']);
  });

  it('reports a compatible definition whose ID sorts before bootstate\'s, and follows /etc masking /run', async () => {
    const r = root({
      '/etc/netplan/10-a.yaml': yaml('    0-a:\n      match: {macaddress: "00:0d:3a:00:00:02"}\n      dhcp4: yes\n'),
      '/run/netplan/20-b.yaml': yaml('    eth0:\n      dhcp4: no\n'),
      '/etc/netplan/20-b.yaml': yaml('    eth0:\n      dhcp4: true\n'),
    });
    expect((await conflicts(r, TWO_NICS)).map((c) => [c.interface, c.file])).toEqual([['eth1', '/etc/netplan/10-a.yaml']]);
    expect(await ownedFiles(root({}))).toEqual([]);
  });
});

describe('netplan rendering for NetworkManager', () => {
  const nm = 'network:\n  version: 2\n  renderer: NetworkManager\n';

  it('makes every interface a conflict (netplan cannot match NetworkManager definitions by driver)', async () => {
    const r = root({ '/etc/netplan/01-network-manager-all.yaml': nm });
    expect(await renderers.netplan.conflicts(r, TWO_NICS)).toEqual(
      ['eth0', 'eth1'].map((i) => ({
        interface: i,
        file: '/etc/netplan/01-network-manager-all.yaml',
        why: 'netplan renders for NetworkManager here, and netplan refuses to match a NetworkManager definition by driver',
      })),
    );
  });

  it('takes the last file\'s renderer, as netplan merges them', async () => {
    const back = root({ '/etc/netplan/01-nm.yaml': nm, '/etc/netplan/02-nd.yaml': 'network:\n  renderer: networkd\n' });
    expect(await renderers.netplan.conflicts(back, TWO_NICS)).toEqual([]);
  });

  it('is detected as the NetworkManager stack', async () => {
    const r = root({ '/usr/sbin/netplan': '', '/etc/netplan/01-network-manager-all.yaml': nm });
    expect(await detectStack(r, 'auto')).toEqual({
      stack: 'networkmanager',
      why: '/usr/sbin/netplan is installed and /etc/netplan has 01-network-manager-all.yaml, but /etc/netplan/01-network-manager-all.yaml makes netplan render for NetworkManager, where netplan cannot match by driver',
    });
  });
});

describe('ifupdown', () => {
  const { conflicts, ownedFiles, declared } = renderers.ifupdown;
  const base = 'auto lo\niface lo inet loopback\n\nsource interfaces.d/*\nsource-directory /run/network/interfaces.d\n';

  it('reports a static stanza, knows the image\'s DHCP stanzas, and ignores its own files', async () => {
    const r = root({
      '/etc/network/interfaces': base,
      '/etc/network/interfaces.d/50-cloud-init': 'auto eth0\niface eth0 inet dhcp\niface eth0 inet6 auto\n',
      '/run/network/interfaces.d/eth1': 'allow-hotplug eth1\niface eth1 inet static\n  address 10.9.9.9/24\n',
      '/run/network/interfaces.d/skipped.conf': 'iface eth0 inet static\n',
      '/etc/network/interfaces.d/bootstate-eth0': 'iface eth0 inet static\n',
      '/etc/dhcp/dhclient-enter-hooks.d/zz-bootstate': '',
    });
    expect(await conflicts(r, TWO_NICS)).toEqual([
      { interface: 'eth1', file: '/run/network/interfaces.d/eth1', why: 'it declares iface eth1 inet static' },
    ]);
    // DHCPv4 declared, and IPv6 declared (auto): bootstate adds neither a second DHCPv4 nor a second IPv6 client.
    expect(await declared!(r, TWO_NICS)).toEqual(new Set(['eth0', 'eth0 inet6']));
    expect(await ownedFiles(r)).toEqual(['/etc/network/interfaces.d/bootstate-eth0', '/etc/dhcp/dhclient-enter-hooks.d/zz-bootstate']);
  });

  it('finds nothing when there is no interfaces file, and survives a file that sources itself', async () => {
    expect(await conflicts(root({}), TWO_NICS)).toEqual([]);
    const loop = root({ '/etc/network/interfaces': 'source /etc/network/interfaces\niface eth1 inet manual\n' });
    expect((await conflicts(loop, TWO_NICS)).map((c) => c.why)).toContain('it declares iface eth1 inet manual');
  });
});

describe('NetworkManager', () => {
  const { conflicts, ownedFiles } = renderers.networkmanager;
  const dir = '/etc/NetworkManager/system-connections';

  it('lets a DHCP profile coexist and reports manual, static, higher-priority profiles', async () => {
    const r = root({
      [`${dir}/cloud-init-eth0.nmconnection`]: '[connection]\nid=c\ntype=ethernet\ninterface-name=eth0\n[ipv4]\nmethod=auto\n',
      [`${dir}/static.nmconnection`]: '[connection]\ntype=ethernet\n[ethernet]\nmac-address=00:0D:3A:00:00:02\n[ipv4]\nmethod=manual\naddress1=10.9.9.9/24\n',
      [`${dir}/wifi.nmconnection`]: '[connection]\ntype=wifi\n[ipv4]\nmethod=manual\n',
      [`${dir}/eth5.nmconnection`]: '[connection]\ntype=ethernet\ninterface-name=eth5\n[ipv4]\nmethod=manual\n',
      '/usr/lib/NetworkManager/system-connections/prio.nmconnection': '[connection]\ntype=ethernet\ninterface-name=eth0\nautoconnect-priority=100\n',
      [`${dir}/bootstate-eth0.nmconnection`]: '[connection]\ninterface-name=eth0\n[ipv4]\nmethod=manual\n',
    });
    expect(await conflicts(r, TWO_NICS)).toEqual([
      { interface: 'eth0', file: '/usr/lib/NetworkManager/system-connections/prio.nmconnection', why: "its autoconnect-priority 100 is not below bootstate's 50" },
      { interface: 'eth1', file: `${dir}/static.nmconnection`, why: 'its ipv4.method is manual' },
    ]);
    expect(await ownedFiles(r)).toEqual([`${dir}/bootstate-eth0.nmconnection`]);
  });
});

describe('detectStack', () => {
  const wants = (unit: string, dir = '/etc/systemd/system'): Record<string, string> => ({
    [`${dir}/multi-user.target.wants/${unit}`]: `->/lib/systemd/system/${unit}`,
  });

  it('takes the configured stack as it is', async () => {
    expect(await detectStack(root({}), 'ifupdown')).toEqual({ stack: 'ifupdown', why: 'configured: [network] stack = "ifupdown"' });
  });

  it('prefers netplan (with YAML) to NetworkManager and networkd', async () => {
    const files = { '/usr/sbin/netplan': '', '/etc/netplan/50-cloud-init.yaml': '', ...wants('NetworkManager.service'), ...wants('systemd-networkd.service') };
    expect((await detectStack(root(files), 'auto')).stack).toBe('netplan');
    const { '/etc/netplan/50-cloud-init.yaml': _, ...noYaml } = files;
    expect(await detectStack(root(noYaml), 'auto')).toEqual({
      stack: 'networkmanager',
      why: 'NetworkManager.service is enabled (/etc/systemd/system/multi-user.target.wants/NetworkManager.service)',
    });
  });

  it('skips a masked NetworkManager, finds networkd enabled statically, then ifupdown', async () => {
    const masked = { ...wants('NetworkManager.service'), '/etc/systemd/system/NetworkManager.service': '->/dev/null' };
    const networkd = { ...masked, ...wants('systemd-networkd.service', '/usr/lib/systemd/system') };
    expect((await detectStack(root(networkd), 'auto')).stack).toBe('networkd');
    const ifupdown = { ...masked, '/sbin/ifup': '', '/etc/network/interfaces': 'auto lo\niface lo inet loopback\nallow-hotplug eth0\n' };
    expect((await detectStack(root(ifupdown), 'auto')).stack).toBe('ifupdown');
  });

  it('finds nothing in an image with ifupdown configuring only lo, and says why', async () => {
    const r = root({ '/sbin/ifup': '', '/etc/network/interfaces': 'auto lo\niface lo inet loopback\n' });
    const found = await detectStack(r, 'auto');
    expect(found.stack).toBeNull();
    expect(found.why).toMatch(/^none found/);
  });
});
