import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  dhclientSendsHostname,
  networkdManages,
  networkManagerManages,
  parseDhclientArgs,
  primaryInterfaceOf,
} from '../../../src/os/hostname/dhcp-clients.js';

const HEADER = 'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT';
const route = (iface: string, destination: string, flags: string, metric: number, mask: string) =>
  `${iface}\t${destination}\t0100000A\t${flags}\t0\t0\t${metric}\t${mask}\t0\t0\t0`;

describe('primaryInterfaceOf (/proc/net/route)', () => {
  it('takes the interface of the default route', () => {
    const table = [HEADER, route('eth0', '000010AC', '0001', 0, '0000FFFF'), route('eth0', '00000000', '0003', 100, '00000000')].join('\n');
    expect(primaryInterfaceOf(table)).toBe('eth0');
  });

  it('is null without a default route, and ignores default routes that are not up', () => {
    expect(primaryInterfaceOf(HEADER)).toBeNull();
    expect(primaryInterfaceOf([HEADER, route('eth0', '00000000', '0002', 0, '00000000')].join('\n'))).toBeNull();
  });

  it('of several default routes, picks the one with the lowest metric, whatever the order', () => {
    const routes = fc.uniqueArray(fc.record({ iface: fc.stringMatching(/^[a-z][a-z0-9]{0,7}$/), metric: fc.nat(5000) }), {
      minLength: 1,
      maxLength: 6,
      selector: (r) => r.metric,
    });
    fc.assert(
      fc.property(routes, fc.array(fc.stringMatching(/^[a-z][a-z0-9]{0,7}$/), { maxLength: 3 }), (defaults, others) => {
        const lines = [
          ...defaults.map((r) => route(r.iface, '00000000', '0003', r.metric, '00000000')),
          ...others.map((iface) => route(iface, '0000A8C0', '0001', 0, '00FFFFFF')),
        ];
        const best = defaults.reduce((a, b) => (b.metric < a.metric ? b : a));
        expect(primaryInterfaceOf([HEADER, ...lines].join('\n'))).toBe(best.iface);
      }),
    );
  });
});

describe('parseDhclientArgs', () => {
  it('reads what ifupdown starts', () => {
    const argv = ['/sbin/dhclient', '-4', '-v', '-i', '-pf', '/run/dhclient.eth0.pid', '-lf', '/var/lib/dhcp/dhclient.eth0.leases', '-I', '-df', '/var/lib/dhcp/dhclient6.eth0.leases', 'eth0'];
    expect(parseDhclientArgs(argv)).toEqual({
      interfaces: ['eth0'],
      leaseFile: '/var/lib/dhcp/dhclient.eth0.leases',
      configFile: '/etc/dhcp/dhclient.conf',
      stopping: false,
      networkManager: false,
      ipv6: false,
    });
  });

  it('knows a dhclient that NetworkManager started (its helper as the script)', () => {
    const argv = ['/sbin/dhclient', '-d', '-q', '-sf', '/usr/lib/NetworkManager/nm-dhcp-helper', '-pf', '/run/NetworkManager/dhclient-eth0.pid', '-lf', '/var/lib/NetworkManager/dhclient-eth0.lease', '-cf', '/var/lib/NetworkManager/dhclient-eth0.conf', 'eth0'];
    expect(parseDhclientArgs(argv)).toMatchObject({ networkManager: true, interfaces: ['eth0'], configFile: '/var/lib/NetworkManager/dhclient-eth0.conf' });
  });

  it('knows a release or stop request and an IPv6 client, and the defaults when no file is named', () => {
    expect(parseDhclientArgs(['dhclient', '-r', 'eth0']).stopping).toBe(true);
    expect(parseDhclientArgs(['dhclient', '-x']).stopping).toBe(true);
    expect(parseDhclientArgs(['dhclient', '-6', 'eth0']).ipv6).toBe(true);
    expect(parseDhclientArgs(['dhclient'])).toMatchObject({ interfaces: [], leaseFile: '/var/lib/dhcp/dhclient.leases' });
  });

  it('never takes an option value for an interface, in any order of options', () => {
    const valued = fc.tuple(fc.constantFrom('-pf', '-lf', '-cf', '-sf', '-df', '-e', '-p', '-s'), fc.stringMatching(/^\/[a-z0-9/._-]{1,20}$/));
    const flag = fc.constantFrom('-4', '-v', '-1', '-d', '-nw', '-q', '-I', '-i');
    const part = fc.oneof(valued.map(([o, v]) => [o, v]), flag.map((f) => [f]));
    fc.assert(
      fc.property(fc.array(part, { maxLength: 8 }), fc.array(fc.stringMatching(/^[a-z][a-z0-9]{0,7}$/), { maxLength: 3 }), (parts, ifaces) => {
        const argv = ['dhclient', ...parts.flat(), ...ifaces];
        const parsed = parseDhclientArgs(argv);
        expect(parsed.interfaces).toEqual(ifaces);
        const lf = parts.filter((p) => p[0] === '-lf').at(-1);
        expect(parsed.leaseFile).toBe(lf ? lf[1] : '/var/lib/dhcp/dhclient.leases');
      }),
    );
  });
});

describe('dhclientSendsHostname', () => {
  it('finds Debian\'s default and a fixed name, not a commented line', () => {
    expect(dhclientSendsHostname('option x code 121 = ip-address;\nsend host-name = gethostname();\n')).toBe(true);
    expect(dhclientSendsHostname('  send host-name "web-01";')).toBe(true);
    expect(dhclientSendsHostname('#send host-name = gethostname();\nrequest subnet-mask;')).toBe(false);
    expect(dhclientSendsHostname('')).toBe(false);
  });
});

describe('who manages the link', () => {
  it('networkd: a link with a .network file, unless unmanaged', () => {
    expect(networkdManages('# This is private data. Do not parse.\nADMIN_STATE=configured\nOPER_STATE=routable\nNETWORK_FILE=/etc/systemd/network/80-eth0.network\n')).toBe(true);
    expect(networkdManages('ADMIN_STATE=unmanaged\nOPER_STATE=off\n')).toBe(false);
    expect(networkdManages('')).toBe(false);
  });

  it('NetworkManager: managed=true in the [device] group of its device state', () => {
    expect(networkManagerManages('[device]\nmanaged=true\nperm-hw-addr-fake=\nconnection-uuid=5fb0\n')).toBe(true);
    expect(networkManagerManages('[device]\nmanaged=false\n')).toBe(false);
    expect(networkManagerManages('[dhcp4]\nmanaged=true\n')).toBe(false);
  });
});
