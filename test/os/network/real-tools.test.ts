/**
 * The rendered files as the real tools read them (unpacked, never installed: see tools.ts): netplan 0.106's `netplan
 * generate --root-dir` turns 90-bootstate.yaml into networkd files that carry the metric, driver and addresses;
 * NetworkManager 1.42's `nmcli --offline connection modify` reads each keyfile on stdin and writes it back
 * normalised (an invalid keyfile fails); ifupdown 0.8's `ifquery` parses the interfaces files and `ifup --no-act`
 * prints the commands it would run; dash sources the dhclient hook, and Debian's own dhclient-script, given a lease
 * in a network namespace, sets the plan's metric and leaves resolv.conf alone on a secondary NIC; and every
 * `Section.Key` of the networkd files is one systemd-networkd's own parser table (in its binary) knows, and they say
 * what netplan's own networkd rendering of the same plan says.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseIni } from '../../../src/os/network/common.js';
import { renderers } from '../../../src/os/network/renderers.js';
import type { RenderedFile } from '../../../src/os/network/types.js';
import { PLANS, THREE_NICS, TWO_NICS } from './plans.js';
import { dhclientScript, ifupdownTool, netplanTool, nmcliTool, runTool, type Tool } from './tools.js';

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'bootstate-net-tools-'));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function writeRoot(files: RenderedFile[], extra: Record<string, string> = {}): string {
  const root = mkdtempSync(join(scratch, 'root-'));
  for (const f of files) {
    mkdirSync(dirname(join(root, f.path)), { recursive: true });
    writeFileSync(join(root, f.path), f.text);
    chmodSync(join(root, f.path), f.mode);
  }
  for (const [path, text] of Object.entries(extra)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text, { mode: 0o600 });
  }
  return root;
}

describe('netplan generate', { timeout: 180_000 }, () => {
  let netplan: Tool;
  beforeAll(() => {
    netplan = netplanTool();
  }, 180_000);

  function generate(root: string): { status: number | null; stderr: string; files: Map<string, string> } {
    const r = runTool(netplan, ['generate', '--root-dir', root]);
    const dir = join(root, 'run/systemd/network');
    const names = (() => { try { return readdirSync(dir).sort(); } catch { return []; } })();
    return { status: r.status, stderr: r.stderr, files: new Map(names.map((n) => [n, readFileSync(join(dir, n), 'utf8')])) };
  }

  it.each(Object.entries(PLANS))('accepts the %s file without a warning and renders metric, driver, MAC, addresses', (_, plan) => {
    const out = generate(writeRoot(renderers.netplan.render(plan, new Set())));
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    expect([...out.files.keys()]).toEqual(plan.nics.map((n) => `10-netplan-0-bootstate-${n.name}.network`));
    for (const nic of plan.nics) {
      const ini = parseIni(out.files.get(`10-netplan-0-bootstate-${nic.name}.network`)!);
      expect(ini.get('Match')?.get('Driver')).toEqual([nic.driver]);
      expect(ini.get('Match')?.get('PermanentMACAddress')).toEqual([nic.mac]);
      expect(ini.get('Network')?.get('DHCP')).toEqual([nic.dhcp6 ? 'yes' : 'ipv4']);
      expect(ini.get('Network')?.get('Address') ?? []).toEqual([...nic.static4, ...nic.static6].map((a) => `${a.address}/${a.prefix}`));
      expect(ini.get('DHCP')?.get('RouteMetric')).toEqual([String(nic.metric)]);
      expect(ini.get('DHCP')?.get('UseDNS')).toEqual(nic.useDns ? undefined : ['false']);
    }
  });

  it.each(Object.entries(PLANS))('agrees with bootstate\'s own networkd files for %s (DHCP, addresses, metric, DNS, match)', (_, plan) => {
    const out = generate(writeRoot(renderers.netplan.render(plan, new Set())));
    const ours = new Map(renderers.networkd.render(plan, new Set()).map((f) => [f.interfaces[0]!, parseIni(f.text)]));
    const yes = (v: string | undefined): boolean | undefined => (v === undefined ? undefined : ['yes', 'true'].includes(v));
    const essence = (ini: ReturnType<typeof parseIni>, dhcp4: string): unknown => ({
      driver: ini.get('Match')?.get('Driver'),
      mac: ini.get('Match')?.get('MACAddress') ?? ini.get('Match')?.get('PermanentMACAddress'),
      dhcp: ini.get('Network')?.get('DHCP'),
      addresses: ini.get('Network')?.get('Address'),
      metric: ini.get(dhcp4)?.get('RouteMetric'),
      useDns: yes(ini.get(dhcp4)?.get('UseDNS')?.[0]),
    });
    for (const nic of plan.nics) {
      const theirs = parseIni(out.files.get(`10-netplan-0-bootstate-${nic.name}.network`)!);
      expect(essence(ours.get(nic.name)!, 'DHCPv4'), nic.name).toEqual(essence(theirs, 'DHCP'));
    }
  });

  it('sorts bootstate definitions before an image definition of the same interface (Debian cloud, cloud-init)', () => {
    const image = 'network:\n  version: 2\n  ethernets:\n    all-eth:\n      match: {name: "eth*"}\n      dhcp4: true\n    eth0:\n      dhcp4: true\n';
    const out = generate(writeRoot(renderers.netplan.render(TWO_NICS, new Set()), { '/etc/netplan/50-cloud-init.yaml': image }));
    expect(out.status).toBe(0);
    expect([...out.files.keys()][0]).toBe('10-netplan-0-bootstate-eth0.network');
    expect([...out.files.keys()]).toContain('10-netplan-all-eth.network');
  });

  it('fails on an invalid file (the check is real)', () => {
    const [file] = renderers.netplan.render(TWO_NICS, new Set());
    const out = generate(writeRoot([{ ...file!, text: file!.text.replace('dhcp4: true', 'dhcp4: maybe') }]));
    expect(out.status).not.toBe(0);
    expect(out.stderr).toMatch(/dhcp4|boolean/);
  });

  it('refuses a driver match when rendering for NetworkManager (why such an image gets keyfiles instead)', () => {
    const files = renderers.netplan.render(TWO_NICS, new Set());
    const out = generate(writeRoot(files, { '/etc/netplan/01-nm.yaml': 'network:\n  version: 2\n  renderer: NetworkManager\n' }));
    expect(out.status).not.toBe(0);
    expect(out.stderr).toContain('NetworkManager definitions do not support matching by driver');
  });

  it('refuses different DHCPv4 and DHCPv6 route metrics (why bootstate writes the same in both)', () => {
    const [file] = renderers.netplan.render(TWO_NICS, new Set());
    const text = file!.text.replace(/(dhcp6-overrides:\n {8}route-metric: )100/, '$1150');
    expect(text).toContain('route-metric: 150');
    const out = generate(writeRoot([{ ...file!, text }]));
    expect(out.status).not.toBe(0);
    expect(out.stderr).toContain('same value in both dhcp4_overrides and dhcp6_overrides');
  });

  it('warns about a world-readable file, which is why bootstate writes 0600', () => {
    const [file] = renderers.netplan.render(TWO_NICS, new Set());
    const out = generate(writeRoot([{ ...file!, mode: 0o644 }]));
    expect(out.stderr).toMatch(/too open/);
  });
});

describe('nmcli --offline', { timeout: 180_000 }, () => {
  let nmcli: Tool;
  beforeAll(() => {
    nmcli = nmcliTool();
  }, 180_000);

  it.each(Object.entries(PLANS))('reads every %s keyfile and writes back the same settings', (_, plan) => {
    for (const file of renderers.networkmanager.render(plan, new Set())) {
      const r = runTool(nmcli, ['--offline', 'connection', 'modify'], file.text);
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      const mine = parseIni(file.text);
      const theirs = parseIni(r.stdout);
      for (const [section, keys] of mine) {
        for (const [key, values] of keys) {
          const expected = key === 'driver' ? values.map((v) => `${v};`) : values;
          expect(theirs.get(section)?.get(key), `${section}.${key}`).toEqual(expected);
        }
      }
    }
  });

  it('fails on an invalid keyfile (the check is real)', () => {
    const [file] = renderers.networkmanager.render(TWO_NICS, new Set());
    const r = runTool(nmcli, ['--offline', 'connection', 'modify'], file!.text.replace('method=auto', 'method=sometimes'));
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/ipv4\.method/);
  });
});

describe('ifupdown', { timeout: 180_000 }, () => {
  let ifquery: Tool;
  let ifup: Tool;
  beforeAll(() => {
    ifquery = ifupdownTool('ifquery');
    ifup = ifupdownTool('ifup');
  }, 180_000);

  function interfaces(root: string): string {
    const path = join(root, 'etc/network/interfaces');
    writeFileSync(path, `auto lo\niface lo inet loopback\n\nsource ${root}/etc/network/interfaces.d/*\n`);
    return path;
  }

  it('ifquery parses the files and sees each NIC with its metric and address commands', () => {
    const root = writeRoot(renderers.ifupdown.render(THREE_NICS, new Set()));
    const file = interfaces(root);
    const list = runTool(ifquery, ['--state-dir', join(root, 'state'), '-i', file, '--list', '--allow', 'hotplug']);
    expect(list.stderr).toBe('');
    expect(list.stdout.split('\n').filter(Boolean)).toEqual(['eth0', 'eth1', 'eth2']);
    const eth1 = runTool(ifquery, ['--state-dir', join(root, 'state'), '-i', file, 'eth1']);
    expect(eth1.status).toBe(0);
    expect(eth1.stdout).toContain('metric: 200\n');
    expect(eth1.stdout).toContain('up: ip addr add 10.0.2.7/26 brd + dev eth1 || true\n');
    expect(eth1.stdout).toContain('down: ip addr del fd00:0:0:1::6/64 dev eth1 || true\n');
  });

  it('ifup --no-act would run dhclient with the metric, then add the addresses', () => {
    const root = writeRoot(renderers.ifupdown.render(TWO_NICS, new Set()));
    // --no-act only prints the commands (on stderr); it runs in a network namespace of its own all the same.
    const inNamespace: Tool = { argv: ['unshare', '--net', ...ifup.argv], env: ifup.env };
    const r = runTool(inNamespace, ['--no-act', '--no-scripts', '--state-dir', join(root, 'state'), '-i', interfaces(root), 'eth0']);
    expect(r.status).toBe(0);
    const commands = r.stderr.split('\n').filter((l) => l.trim() !== '');
    const dhclient = commands.findIndex((l) => /dhclient -4 .* eth0\s+-e IF_METRIC=100$/.test(l));
    expect(dhclient).toBeGreaterThanOrEqual(0);
    expect(commands.indexOf('ip addr add 10.0.0.5/24 brd + dev eth0 || true')).toBeGreaterThan(dhclient);
    expect(commands.some((l) => /dhclient -6 .* eth0/.test(l))).toBe(true);
  });

  it('ifquery fails on a broken file (the check is real)', () => {
    const root = writeRoot(renderers.ifupdown.render(TWO_NICS, new Set()).map((f) => ({ ...f, text: f.text.replace('inet dhcp', 'inet sometimes') })));
    expect(runTool(ifquery, ['--state-dir', join(root, 'state'), '-i', interfaces(root), 'eth0']).status).not.toBe(0);
  });

  it.each([
    ['eth0', 'RESOLV 100'],
    ['eth1', '200'],
    ['eth9', 'RESOLV unset'],
  ])('the dhclient hook, sourced for %s, gives %s', (iface, expected) => {
    const hook = renderers.ifupdown.render(TWO_NICS, new Set()).find((f) => f.path.endsWith('zz-bootstate'))!;
    const path = join(scratch, 'hook');
    writeFileSync(path, hook.text);
    const script = `make_resolv_conf() { printf 'RESOLV '; }; interface=${iface}; . ${path}; make_resolv_conf; echo "\${IF_METRIC:-unset}"`;
    const r = spawnSync('/bin/sh', ['-c', script], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe(expected);
  });
});

describe("Debian's dhclient-script with the hook", { timeout: 180_000 }, () => {
  let script: string;
  beforeAll(() => {
    script = dhclientScript();
  }, 180_000);

  /**
   * Runs dhclient-script for a BOUND lease on `iface` in a network and UTS namespace of its own (the script adds
   * the address and route there, and could set the hostname), with its /etc paths moved under a temp dir. The
   * image's `resolvconf` hook is there too: it redefines make_resolv_conf, and bootstate's must come after it.
   */
  function bound(iface: string): { routes: string; resolv: string } {
    const etc = join(mkdtempSync(join(scratch, 'dhclient-')), 'etc');
    const hooks = join(etc, 'dhcp/dhclient-enter-hooks.d');
    mkdirSync(hooks, { recursive: true });
    writeFileSync(join(etc, 'fstab'), '');
    writeFileSync(join(etc, 'resolv.conf'), 'nameserver 192.0.2.53\n');
    writeFileSync(join(hooks, 'resolvconf'), `make_resolv_conf() { echo "nameserver $new_domain_name_servers" > ${etc}/resolv.conf; }\n`);
    const hook = renderers.ifupdown.render(TWO_NICS, new Set()).find((f) => f.path.endsWith('/zz-bootstate'))!;
    writeFileSync(join(hooks, 'zz-bootstate'), hook.text);
    const copy = join(etc, 'dhclient-script');
    writeFileSync(copy, readFileSync(script, 'utf8').replaceAll('/etc/', `${etc}/`), { mode: 0o755 });
    const lease = `reason=BOUND interface=${iface} new_ip_address=10.0.1.4 new_subnet_mask=255.255.255.0 new_routers=10.0.1.1 new_domain_name_servers=168.63.129.16`;
    const r = spawnSync('unshare', ['--net', '--uts', 'sh', '-ec', `ip link add ${iface} type veth peer name peer0; ip link set peer0 up; ip link set ${iface} up; env ${lease} ${copy}; ip -4 route show default`], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    return { routes: r.stdout, resolv: readFileSync(join(etc, 'resolv.conf'), 'utf8') };
  }

  it('gives a secondary NIC its metric and keeps its DNS servers out of resolv.conf', () => {
    expect(bound('eth1')).toEqual({ routes: 'default via 10.0.1.1 dev eth1 metric 200 \n', resolv: 'nameserver 192.0.2.53\n' });
  });

  it('gives the primary NIC its metric and its DNS servers', () => {
    expect(bound('eth0')).toEqual({ routes: 'default via 10.0.1.1 dev eth0 metric 100 \n', resolv: 'nameserver 168.63.129.16\n' });
  });

  it('on an interface the image declares, adds its other IPv4 address after the lease, which stays the first (the source)', () => {
    const etc = join(mkdtempSync(join(scratch, 'dhclient-')), 'etc');
    const files = renderers.ifupdown.render(TWO_NICS, new Set(), new Set(['eth0']));
    for (const f of files.filter((f) => f.path.startsWith('/etc/dhcp/'))) {
      mkdirSync(dirname(join(etc, f.path.slice('/etc/'.length))), { recursive: true });
      writeFileSync(join(etc, f.path.slice('/etc/'.length)), f.text);
    }
    writeFileSync(join(etc, 'fstab'), '');
    writeFileSync(join(etc, 'resolv.conf'), '');
    const copy = join(etc, 'dhclient-script');
    writeFileSync(copy, readFileSync(script, 'utf8').replaceAll('/etc/', `${etc}/`), { mode: 0o755 });
    const lease = 'reason=BOUND interface=eth0 new_ip_address=10.0.0.4 new_subnet_mask=255.255.255.0 new_routers=10.0.0.1';
    const r = spawnSync('unshare', ['--net', '--uts', 'sh', '-ec', `ip link add eth0 type veth peer name peer0; ip link set peer0 up; ip link set eth0 up; env ${lease} ${copy}; ip -4 -o addr show dev eth0`], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const addresses = [...r.stdout.matchAll(/inet (\S+) .*?(secondary )?eth0/g)].map((m) => `${m[1]}${m[2] ? ' secondary' : ''}`);
    expect(addresses, r.stdout).toEqual(['10.0.0.4/24', '10.0.0.5/24 secondary']);
    expect(r.stdout).toMatch(/inet 10\.0\.0\.5\/24 brd 10\.0\.0\.255 /);
  });
});

describe('systemd-networkd', () => {
  /** `Section.Key` names from networkd's gperf tables, as its binary carries them. */
  function networkdKeys(): Set<string> {
    const bin = ['/lib/systemd/systemd-networkd', '/usr/lib/systemd/systemd-networkd'].find((p) => {
      try { readFileSync(p, { flag: 'r' }); return true; } catch { return false; }
    });
    if (!bin) throw new Error('systemd-networkd is not installed: the systemd package ships it');
    const text = readFileSync(bin).toString('latin1');
    return new Set(text.match(/(?<=\0)[A-Z][A-Za-z0-9]*\.[A-Z][A-Za-z0-9]*(?=\0)/g) ?? []);
  }

  it.each(Object.entries(PLANS))('every key of the %s files is one networkd parses', (_, plan) => {
    const known = networkdKeys();
    expect(known.has('DHCPv4.UseDNS')).toBe(true);
    for (const file of renderers.networkd.render(plan, new Set())) {
      for (const [section, keys] of parseIni(file.text)) {
        for (const key of keys.keys()) expect(known.has(`${section}.${key}`), `${section}.${key}`).toBe(true);
      }
    }
  });
});
