/**
 * How much the shipped units expose, as `systemd-analyze security --offline=true` rates them (0 is best, 10 worst),
 * and the sandbox settings each unit's work depends on: the provisioning unit sets the hostname, mounts the media,
 * writes /etc and /home, and restarts a DHCP client that needs packet sockets; the firewall unit needs netlink and
 * CAP_NET_ADMIN.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const units = resolve(fileURLToPath(import.meta.url), '../../../packaging/systemd');

/** The "Overall exposure level" systemd-analyze prints for a unit file. */
function exposure(unit: string): number {
  const result = spawnSync('systemd-analyze', ['security', '--offline=true', '--no-pager', join(units, unit)], { encoding: 'utf8' });
  const output = `${result.stdout}${result.stderr}`;
  const level = /Overall exposure level for \S+: (\d+\.\d+)/.exec(output);
  if (!level) throw new Error(`systemd-analyze security printed no exposure level for ${unit} (exit ${result.status}):\n${output}`);
  return Number(level[1]);
}

/** `Key=value` settings of a unit's [Service] section, each key's lines joined by spaces. */
function service(unit: string): Record<string, string> {
  const text = readFileSync(join(units, unit), 'utf8');
  const section = text.slice(text.indexOf('[Service]'), text.indexOf('[Install]'));
  const settings: Record<string, string> = {};
  for (const line of section.split('\n').filter((l) => /^[A-Za-z]+=/.test(l))) {
    const [key, ...value] = line.split('=');
    settings[key!] = settings[key!] ? `${settings[key!]} ${value.join('=')}` : value.join('=');
  }
  return settings;
}

describe('systemd-analyze security --offline=true on the shipped units', () => {
  it('rates the provisioning unit 6.0 or lower', () => {
    expect(exposure('bootstate.service')).toBeLessThanOrEqual(6.0);
  });

  it('rates the firewall unit and its re-check 2.0 or lower', () => {
    expect(exposure('bootstate-firewall.service')).toBeLessThanOrEqual(2.0);
    expect(exposure('bootstate-firewall-recheck.service')).toBeLessThanOrEqual(2.0);
  });

  it('rates the network unit 4.0 or lower, leaving it what applying a network needs: /etc, /run, /var, netlink and packet sockets, CAP_NET_ADMIN', () => {
    expect(exposure('bootstate-network.service')).toBeLessThanOrEqual(4.0);
    const settings = service('bootstate-network.service');
    expect(settings.ProtectSystem).toBe('strict');
    expect(settings.ReadWritePaths!.split(' ')).toEqual(expect.arrayContaining(['/etc', '/run', '/var']));
    // ifup's dhclient runs in this unit: packet and raw sockets, its leases in /var/lib/dhcp, resolv.conf in /etc.
    expect(settings.RestrictAddressFamilies!.split(' ')).toEqual(expect.arrayContaining(['AF_UNIX', 'AF_INET', 'AF_INET6', 'AF_NETLINK', 'AF_PACKET']));
    expect(settings.CapabilityBoundingSet!.split(' ')).toEqual(expect.arrayContaining(['CAP_NET_ADMIN', 'CAP_NET_RAW']));
  });

  it('leaves the provisioning unit what its work needs: the hostname, /etc, /home, /var, /run, devices, packet sockets', () => {
    const settings = service('bootstate.service');
    expect(settings.ProtectHostname).toBeUndefined();
    expect(settings.PrivateDevices).toBeUndefined();
    expect(settings.ProtectSystem).toBe('strict');
    expect(settings.ReadWritePaths!.split(' ')).toEqual(expect.arrayContaining(['/etc', '/home', '/var', '/run']));
    expect(settings.RestrictAddressFamilies!.split(' ')).toEqual(expect.arrayContaining(['AF_UNIX', 'AF_INET', 'AF_INET6', 'AF_NETLINK', 'AF_PACKET']));
    expect(settings.SystemCallFilter!.split(' ')).toEqual(expect.arrayContaining(['@system-service', '@mount', 'sethostname']));
    expect(settings.CapabilityBoundingSet!.split(' ')).toEqual(expect.arrayContaining(['CAP_SYS_ADMIN', 'CAP_SYS_PTRACE', 'CAP_CHOWN', 'CAP_NET_ADMIN', 'CAP_NET_RAW']));
  });

  it('gives the firewall unit and its re-check netlink and CAP_NET_ADMIN, and write access only to /run (iptables\' lock file, the snapshot)', () => {
    for (const unit of ['bootstate-firewall.service', 'bootstate-firewall-recheck.service']) {
      const settings = service(unit);
      expect(settings.CapabilityBoundingSet!.split(' '), unit).toContain('CAP_NET_ADMIN');
      expect(settings.RestrictAddressFamilies!.split(' '), unit).toContain('AF_NETLINK');
      expect(settings.ProtectSystem, unit).toBe('strict');
      expect(settings.ReadWritePaths, unit).toBe('/run');
    }
  });
});
