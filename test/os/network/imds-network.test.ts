/**
 * networkPlanFrom: IMDS's `network` section read into a plan, by example (the realistic document the fake fabric serves, two NICs with secondary
 * and IPv6 addresses, each warning) and by property (any JSON value, any mutation of a valid document: a plan or a
 * named warning, never an exception; a valid document built from a known plan gives that plan back).
 */
import fc from 'fast-check';
import { isIPv4, isIPv6 } from 'node:net';
import { describe, expect, it } from 'vitest';
import { NETWORK_LIMITS, networkPlanFrom } from '../../../src/os/network/imds-network.js';
import type { NetworkWarning, NicPlan, PlanResult } from '../../../src/os/network/types.js';

/** The realistic document's `network` section, as src/fabric/imds-document.ts serves it (the rest changes nothing here). */
const SPEC_EXAMPLE = {
  compute: { osProfile: { adminUsername: 'azureuser', computerName: 'web-01', disablePasswordAuthentication: 'true' }, publicKeys: [], vmId: 'd0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8' },
  network: {
    interface: [
      {
        ipv4: { ipAddress: [{ privateIpAddress: '10.0.0.4', publicIpAddress: '' }], subnet: [{ address: '10.0.0.0', prefix: '24' }] },
        ipv6: { ipAddress: [] },
        macAddress: '000D3A1B2C3D',
      },
    ],
  },
  extended: { compute: { hasCustomData: false, ppsType: 'None' } },
};

const TWO_NICS = {
  network: {
    interface: [
      {
        ipv4: {
          ipAddress: [{ privateIpAddress: '10.0.0.4', publicIpAddress: '20.1.2.3' }, { privateIpAddress: '10.0.0.5', publicIpAddress: '' }],
          subnet: [{ address: '10.0.0.0', prefix: '24' }],
        },
        ipv6: { ipAddress: [{ privateIpAddress: 'ace:cab:deca:deed::4' }], subnet: [{ address: 'ace:cab:deca:deed::', prefix: '64' }] },
        macAddress: '000D3A1B2C3D',
      },
      {
        ipv4: { ipAddress: [{ privateIpAddress: '10.0.1.4', publicIpAddress: '' }], subnet: [{ address: '10.0.1.0', prefix: '26' }] },
        ipv6: { ipAddress: [] },
        macAddress: '000D3A1B2C3E',
      },
    ],
  },
};

const nic = (index: number, mac: string, rest: Partial<NicPlan> = {}): NicPlan => ({
  index, mac, primary: index === 0, metric: 100 * (index + 1), useDns: index === 0, static4: [], dhcp6: false, static6: [], ...rest,
});

const v4 = (address: string) => ({ privateIpAddress: address });
const doc = (...interfaces: unknown[]) => ({ network: { interface: interfaces } });
const codes = (result: PlanResult) => result.warnings.map((w) => w.code);

describe('networkPlanFrom by example', () => {
  it('reads the realistic example document as one primary NIC on DHCP, MAC normalised, with no warning', () => {
    expect(networkPlanFrom(SPEC_EXAMPLE)).toEqual({ plan: { nics: [nic(0, '00:0d:3a:1b:2c:3d')] }, warnings: [] });
  });

  it('gives the primary NIC its second IPv4 address static and DHCPv6, the secondary NIC metric 200 and no DNS', () => {
    expect(networkPlanFrom(TWO_NICS)).toEqual({
      plan: {
        nics: [
          nic(0, '00:0d:3a:1b:2c:3d', { static4: [{ address: '10.0.0.5', prefix: 24 }], dhcp6: true }),
          nic(1, '00:0d:3a:1b:2c:3e', { primary: false, metric: 200, useDns: false }),
        ],
      },
      warnings: [],
    });
  });

  it('makes every IPv4 address after the first static, and every IPv6 address after the first, in IMDS order', () => {
    const result = networkPlanFrom(doc({
      macAddress: '000D3A000001',
      ipv4: { ipAddress: ['10.0.0.4', '10.0.0.9', '10.0.0.7'].map(v4) },
      ipv6: { ipAddress: ['fd00::4', 'fd00::9'].map(v4) },
    }));
    expect(result.plan!.nics[0]).toMatchObject({
      static4: [{ address: '10.0.0.9', prefix: 24 }, { address: '10.0.0.7', prefix: 24 }],
      dhcp6: true,
      static6: [{ address: 'fd00::9', prefix: 128 }],
    });
    expect(result.warnings).toEqual([]);
  });

  it('takes the prefix of the subnet holding the address, else the first subnet\'s, as a string or a number', () => {
    const result = networkPlanFrom(doc({
      macAddress: '000D3A000001',
      ipv4: {
        ipAddress: ['10.0.0.4', '10.1.2.3', '192.168.9.9', '10.0.0.5'].map(v4),
        subnet: [{ address: '10.0.0.0', prefix: 24 }, { address: '10.1.0.0', prefix: '16' }],
      },
      ipv6: { ipAddress: ['fd00:1::1', 'fd00:2::2'].map(v4), subnet: [{ address: 'fd00:1::', prefix: '64' }, { address: 'fd00:2::', prefix: '48' }] },
    }));
    expect(result.plan!.nics[0]!.static4).toEqual([{ address: '10.1.2.3', prefix: 16 }, { address: '192.168.9.9', prefix: 24 }, { address: '10.0.0.5', prefix: 24 }]);
    expect(result.plan!.nics[0]!.static6).toEqual([{ address: 'fd00:2::2', prefix: 48 }]);
    expect(result.warnings).toEqual([]);
  });

  it('holds an address in a subnet by its prefix\'s bits exactly, at the subnet\'s edges', () => {
    const result = networkPlanFrom(doc({
      macAddress: '000D3A000001',
      ipv4: {
        ipAddress: ['10.0.0.4', '10.0.0.127', '10.0.0.128', '10.0.0.191', '10.0.0.192', '10.0.1.5'].map(v4),
        subnet: [{ address: '10.0.0.0', prefix: '25' }, { address: '10.0.0.128', prefix: '26' }, { address: '10.0.0.0', prefix: '23' }],
      },
    }));
    expect(result.plan!.nics[0]!.static4.map((a) => `${a.address}/${a.prefix}`)).toEqual(['10.0.0.127/25', '10.0.0.128/26', '10.0.0.191/26', '10.0.0.192/23', '10.0.1.5/23']);
  });

  it('accepts colon- and dash-separated MACs in any case, and writes IPv6 addresses in their canonical form', () => {
    const result = networkPlanFrom(doc(
      { macAddress: '00:0D:3A:1B:2C:3D', ipv4: { ipAddress: [v4('10.0.0.4')] }, ipv6: { ipAddress: ['FD00:0:0:0:0:0:0:4', 'FD00:0000::0005'].map(v4) } },
      { macAddress: '00-0d-3a-1b-2c-3e', ipv4: { ipAddress: [v4('10.0.1.4')] } },
    ));
    expect(result.plan!.nics.map((n) => n.mac)).toEqual(['00:0d:3a:1b:2c:3d', '00:0d:3a:1b:2c:3e']);
    expect(result.plan!.nics[0]!.static6).toEqual([{ address: 'fd00::5', prefix: 128 }]);
  });

  it.each([
    ['no network section', { compute: {} }, 'NETWORK_MISSING'],
    ['a null network', { network: null }, 'NETWORK_MISSING'],
    ['no interface list', { network: {} }, 'NETWORK_MISSING'],
    ['a string network', { network: 'eth0' }, 'NETWORK_MALFORMED'],
    ['an interface object', { network: { interface: { macAddress: '000D3A1B2C3D' } } }, 'NETWORK_MALFORMED'],
    ['an empty interface list', { network: { interface: [] } }, 'NETWORK_EMPTY'],
    ['a document that is an array', [SPEC_EXAMPLE], 'NETWORK_MALFORMED'],
    ['no document', null, 'NETWORK_MALFORMED'],
    ['a network inherited through __proto__', JSON.parse('{"__proto__": {"network": {"interface": []}}}'), 'NETWORK_MISSING'],
  ])('keeps the image\'s configuration for %s, saying so', (_name, input, code) => {
    const result = networkPlanFrom(input);
    expect(result).toEqual({ plan: null, warnings: [{ code, message: expect.stringContaining('image\'s own network configuration stays') }] });
  });

  it('leaves out a NIC with a bad MAC, a missing MAC or no valid IPv4 address, and keeps the others at their IMDS index', () => {
    const result = networkPlanFrom(doc(
      { macAddress: '000D3A1B2C3D', ipv4: { ipAddress: [v4('10.0.0.4')] } },
      { macAddress: '000D3A1B2C3', ipv4: { ipAddress: [v4('10.0.1.4')] } },
      { macAddress: 0xd3a1b2c3e, ipv4: { ipAddress: [v4('10.0.1.4')] } },
      { macAddress: '000D3A1B2C3F', ipv4: { ipAddress: [v4('10.0.1.256'), { publicIpAddress: '1.2.3.4' }] } },
      { macAddress: '000D3A1B2C40', ipv6: { ipAddress: [v4('fd00::1')] } },
      { macAddress: '000D3A1B2C41', ipv4: { ipAddress: [v4('10.0.5.4')] } },
    ));
    expect(result.plan!.nics.map((n) => [n.index, n.metric, n.primary])).toEqual([[0, 100, true], [5, 600, false]]);
    expect(codes(result)).toEqual(['NIC_MALFORMED', 'NIC_MALFORMED', 'ADDRESS_MALFORMED', 'ADDRESS_MALFORMED', 'NIC_MALFORMED', 'NIC_MALFORMED']);
    expect(result.warnings[0]!.message).toBe('interface 1 left out: its macAddress is "000D3A1B2C3", not a MAC address');
    expect(result.warnings[1]!.message).toBe('interface 2 left out: its macAddress is 56809434174, not a MAC address');
    expect(result.warnings[2]!.message).toMatch(/^interface 3 \(00:0d:3a:1b:2c:3f\): ipv4\.ipAddress\[0\]\.privateIpAddress is "10\.0\.1\.256", not an IPv4 address/);
    expect(result.warnings[4]!.message).toBe('interface 3 left out: 00:0d:3a:1b:2c:3f has no valid IPv4 address');
  });

  it('makes no other NIC primary when interface 0 is left out, and says so', () => {
    const result = networkPlanFrom(doc(
      { macAddress: '000D3A1B2C3D', ipv4: { ipAddress: [] } },
      { macAddress: '000D3A1B2C3E', ipv4: { ipAddress: [v4('10.0.1.4')] } },
    ));
    expect(result.plan!.nics).toEqual([nic(1, '00:0d:3a:1b:2c:3e', { primary: false, useDns: false })]);
    expect(result.warnings).toEqual([{ code: 'NIC_MALFORMED', message: expect.stringMatching(/^interface 0 left out: .*the primary NIC: no other becomes primary/) }]);
  });

  it('gives no plan when no NIC is usable', () => {
    const result = networkPlanFrom(doc({ macAddress: 'nope' }, 7));
    expect(result.plan).toBeNull();
    expect(codes(result)).toEqual(['NIC_MALFORMED', 'NIC_MALFORMED', 'NETWORK_MALFORMED']);
  });

  it('leaves out a second NIC with a MAC already listed, whatever its separators, even when the first was unusable', () => {
    const result = networkPlanFrom(doc(
      { macAddress: '000D3A1B2C3D' },
      { macAddress: '00:0d:3a:1b:2c:3d', ipv4: { ipAddress: [v4('10.0.1.4')] } },
      { macAddress: '000D3A1B2C3E', ipv4: { ipAddress: [v4('10.0.2.4')] } },
    ));
    expect(result.plan!.nics.map((n) => n.index)).toEqual([2]);
    expect(result.warnings).toEqual([
      { code: 'NIC_MALFORMED', message: expect.stringContaining('interface 0 left out') },
      { code: 'DUPLICATE_MAC', message: 'interface 1 left out: its MAC 00:0d:3a:1b:2c:3d is interface 0\'s' },
    ]);
  });

  it('leaves out bad, duplicate and zoned addresses and bad subnets, with prefix defaults 24 and 128', () => {
    const result = networkPlanFrom(doc({
      macAddress: '000D3A1B2C3D',
      ipv4: {
        ipAddress: [v4('10.0.0.4'), v4('010.0.0.5'), v4('10.0.0.4'), v4(' 10.0.0.6'), v4(''), 'x', v4('10.0.0.7')],
        subnet: [{ address: '10.0.0.0', prefix: '33' }, { address: '10.0.0.0', prefix: '-1' }, { address: '10.0.0.x', prefix: '8' }, { prefix: 2.5 }],
      },
      ipv6: { ipAddress: [v4('fe80::1%eth0'), v4('fd00::1'), v4('FD00::1'), v4('::ffff:10.0.0.1')], subnet: 'fd00::/64' },
    }));
    expect(result.plan!.nics[0]).toMatchObject({ static4: [{ address: '10.0.0.7', prefix: 24 }], dhcp6: true, static6: [{ address: '::ffff:a00:1', prefix: 128 }] });
    expect(codes(result).every((c) => c === 'ADDRESS_MALFORMED')).toBe(true);
    const messages = result.warnings.map((w) => w.message);
    for (const part of ['"010.0.0.5"', '10.0.0.4 is listed twice', '" 10.0.0.6"', 'is absent', 'prefix is "33"', 'prefix is "-1"', 'address is "10.0.0.x"', 'prefix is 2.5', '"fe80::1%eth0"', 'fd00::1 is listed twice', 'ipv6.subnet is "fd00::/64", not an array']) {
      expect(messages.some((m) => m.includes(part)), part).toBe(true);
    }
  });

  it.each([
    ['0.0.0.0', 'ipv4'], ['0.1.2.3', 'ipv4'], ['127.0.0.1', 'ipv4'], ['224.0.0.1', 'ipv4'], ['255.255.255.255', 'ipv4'],
    ['::', 'ipv6'], ['::1', 'ipv6'], ['ff02::1', 'ipv6'],
  ])('leaves out %s, which no NIC can hold', (address, family) => {
    const result = networkPlanFrom(doc({ macAddress: '000D3A1B2C3D', ipv4: { ipAddress: [v4('10.0.0.4'), ...(family === 'ipv4' ? [v4(address)] : [])] }, ipv6: { ipAddress: family === 'ipv6' ? [v4(address)] : [] } }));
    expect(result.plan!.nics[0]).toMatchObject({ static4: [], dhcp6: false, static6: [] });
    expect(result.warnings).toEqual([{ code: 'ADDRESS_MALFORMED', message: `interface 0 (00:0d:3a:1b:2c:3d): ${family}.ipAddress[${family === 'ipv4' ? 1 : 0}] ${address} is not a unicast address (unspecified, loopback or multicast): left out` }]);
  });

  it('treats an empty subnet address or prefix as not given (IMDS\'s "")', () => {
    const result = networkPlanFrom(doc({ macAddress: '000D3A1B2C3D', ipv4: { ipAddress: ['10.0.0.4', '10.9.0.4'].map(v4), subnet: [{ address: '', prefix: '' }] } }));
    expect(result).toEqual({ plan: { nics: [nic(0, '00:0d:3a:1b:2c:3d', { static4: [{ address: '10.9.0.4', prefix: 24 }] })] }, warnings: [] });
  });

  it('stops at 64 NICs and 256 addresses per family, and counts the warnings past 100 per code', () => {
    const many = Array.from({ length: 70 }, (_, i) => ({ macAddress: `000D3A00${i.toString(16).padStart(4, '0')}`, ipv4: { ipAddress: Array.from({ length: 300 }, (_, j) => v4(`10.${i}.${j >> 8}.${j & 255}`)) } }));
    const result = networkPlanFrom(doc(...many));
    expect(result.plan!.nics).toHaveLength(NETWORK_LIMITS.nics);
    expect(result.plan!.nics[0]!.static4).toHaveLength(NETWORK_LIMITS.addresses - 1);
    expect(result.warnings.slice(0, 2).map((w) => w.message)).toEqual([
      'network.interface lists 70 interfaces: the 6 after the first 64 are left out',
      'interface 0 (00:0d:3a:00:00:00): ipv4.ipAddress lists 300 addresses: those after the first 256 are left out',
    ]);
    expect(result.warnings).toHaveLength(1 + NETWORK_LIMITS.nics);
  });

  it('keeps the first 100 warnings and counts the others per code', () => {
    const result = networkPlanFrom(doc({ macAddress: '000D3A1B2C3D', ipv4: { ipAddress: Array.from({ length: 200 }, () => v4('bad')) } }));
    expect(result.plan).toBeNull();
    expect(result.warnings).toHaveLength(NETWORK_LIMITS.warnings + 3);
    expect(result.warnings.slice(NETWORK_LIMITS.warnings)).toEqual([
      { code: 'ADDRESS_MALFORMED', message: '100 more ADDRESS_MALFORMED warnings not listed' },
      { code: 'NIC_MALFORMED', message: '1 more NIC_MALFORMED warning not listed' },
      { code: 'NETWORK_MALFORMED', message: '1 more NETWORK_MALFORMED warning not listed' },
    ]);
  });

  it('reads a million-entry interface list in bounded time', () => {
    const started = performance.now();
    const result = networkPlanFrom({ network: { interface: new Array(1_000_000).fill({ macAddress: 'x' }) } });
    expect(result.plan).toBeNull();
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('answers with a warning, not an exception, for a document whose getters throw', () => {
    const hostile = { network: { get interface(): never { throw new Error('secret-token-123'); } } };
    const result = networkPlanFrom(hostile);
    expect(result).toEqual({ plan: null, warnings: [{ code: 'NETWORK_MALFORMED', message: expect.stringContaining('could not be read') }] });
    expect(JSON.stringify(result)).not.toContain('secret-token-123');
  });

  it('cuts long values in messages to 40 characters', () => {
    const result = networkPlanFrom(doc({ macAddress: 'A'.repeat(10_000) }));
    expect(result.warnings[0]!.message.length).toBeLessThan(200);
  });
});

// ---- properties ----

const CODES = new Set<NetworkWarning['code']>(['NETWORK_MISSING', 'NETWORK_MALFORMED', 'NETWORK_EMPTY', 'NIC_MALFORMED', 'ADDRESS_MALFORMED', 'DUPLICATE_MAC']);
const SECTION_CODES = new Set(['NETWORK_MISSING', 'NETWORK_MALFORMED', 'NETWORK_EMPTY']);

/** What every answer must be, whatever the input. */
function assertWellFormed(result: PlanResult, input: unknown): void {
  for (const warning of result.warnings) {
    expect(CODES.has(warning.code)).toBe(true);
    expect(typeof warning.message).toBe('string');
    expect(warning.message.length).toBeLessThan(400);
    // The last-resort guard is for values JSON cannot hold: a JSON input never reaches it.
    expect(warning.message).not.toContain('could not be read');
  }
  expect(result.warnings.length).toBeLessThanOrEqual(NETWORK_LIMITS.warnings + CODES.size);
  if (result.plan === null) {
    expect(result.warnings.some((w) => SECTION_CODES.has(w.code))).toBe(true);
    return;
  }
  const { nics } = result.plan;
  expect(nics.length).toBeGreaterThan(0);
  expect(nics.length).toBeLessThanOrEqual(NETWORK_LIMITS.nics);
  expect(new Set(nics.map((n) => n.mac)).size).toBe(nics.length);
  nics.forEach((n, i) => {
    if (i > 0) expect(n.index).toBeGreaterThan(nics[i - 1]!.index);
    expect(n.mac).toMatch(/^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/);
    expect(n.primary).toBe(n.index === 0);
    expect(n.useDns).toBe(n.primary);
    expect(n.metric).toBe(100 * (n.index + 1));
    for (const a of n.static4) expect(isIPv4(a.address) && Number.isInteger(a.prefix) && a.prefix >= 0 && a.prefix <= 32, JSON.stringify(a)).toBe(true);
    for (const a of n.static6) expect(isIPv6(a.address) && !a.address.includes('%') && Number.isInteger(a.prefix) && a.prefix >= 0 && a.prefix <= 128, JSON.stringify(a)).toBe(true);
    if (n.static6.length > 0) expect(n.dhcp6).toBe(true);
    expect(n.static4.length).toBeLessThan(NETWORK_LIMITS.addresses);
  });
  // Every interface of the input the plan leaves out is named in a warning (within the warnings kept).
  const list = (input as any)?.network?.interface;
  if (Array.isArray(list) && result.warnings.length < NETWORK_LIMITS.warnings) {
    const planned = new Set(nics.map((n) => n.index));
    for (let i = 0; i < Math.min(list.length, NETWORK_LIMITS.nics); i++) {
      if (!planned.has(i)) expect(result.warnings.some((w) => w.message.startsWith(`interface ${i} left out`)), `interface ${i}`).toBe(true);
    }
  }
}

const byte = fc.integer({ min: 0, max: 255 });
const macBytes = fc.array(byte, { minLength: 6, maxLength: 6 });
const hex2 = (b: number) => b.toString(16).padStart(2, '0');
const imdsMac = (bytes: number[]) => bytes.map(hex2).join('').toUpperCase();

/** An IPv4 subnet (network address, prefix) and distinct addresses inside it. */
/** Unicast /8s only (1–126, 128–223): a prefix of 8 or more keeps every address of the subnet inside one. */
const firstOctet = fc.oneof(fc.integer({ min: 1, max: 126 }), fc.integer({ min: 128, max: 223 }));
const v4Subnet = fc.record({ first: firstOctet, rest: fc.nat({ max: 2 ** 24 - 1 }), prefix: fc.integer({ min: 8, max: 30 }) }).chain(({ first, rest, prefix }) => {
  const net = first * 2 ** 24 + rest;
  const size = 2 ** (32 - prefix);
  const base = Math.floor(net / size) * size;
  return fc.uniqueArray(fc.nat({ max: size - 1 }), { minLength: 1, maxLength: 5 }).map((hosts) => ({ base, prefix, addresses: hosts.map((h) => base + h) }));
});
const dotted = (n: number) => [24, 16, 8, 0].map((s) => (n >>> s) & 255).join('.');

/** IPv6 addresses in a /64 of 2000::/3 to fdff::/16 (global and unique local), written in full (8 groups, upper case): the plan must write them canonically. */
const v6Subnet = fc.record({ net: fc.bigInt({ min: 0x2000n << 48n, max: (0xfe00n << 48n) - 1n }), hosts: fc.uniqueArray(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), { minLength: 1, maxLength: 3 }) });
const fullV6 = (n: bigint) => Array.from({ length: 8 }, (_, i) => ((n >> BigInt(112 - 16 * i)) & 0xffffn).toString(16).toUpperCase()).join(':');
/** Independent of the code under test: an IPv6 address's value from any valid text (no dotted tail). */
function v6Value(text: string): bigint {
  const [head, tail] = text.split('::');
  const l = head ? head.split(':') : [];
  const r = tail ? tail.split(':') : [];
  const groups = tail === undefined ? l : [...l, ...new Array(8 - l.length - r.length).fill('0'), ...r];
  return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

const validNic = fc.record({ mac: macBytes, v4: v4Subnet, v6: fc.option(v6Subnet, { nil: undefined }), numericPrefix: fc.boolean() });
const validNics = fc.uniqueArray(validNic, { minLength: 1, maxLength: 8, selector: (n) => imdsMac(n.mac) });

type ValidNic = typeof validNic extends fc.Arbitrary<infer T> ? T : never;

function documentOf(nics: ValidNic[]): unknown {
  return {
    compute: { vmId: '00000000-0000-0000-0000-000000000000' },
    network: {
      interface: nics.map((n) => ({
        macAddress: imdsMac(n.mac),
        ipv4: {
          ipAddress: n.v4.addresses.map((a) => ({ privateIpAddress: dotted(a), publicIpAddress: '' })),
          subnet: [{ address: dotted(n.v4.base), prefix: n.numericPrefix ? n.v4.prefix : String(n.v4.prefix) }],
        },
        ipv6: n.v6 ? v6Section(n.v6.net, n.v6.hosts) : { ipAddress: [] },
      })),
    },
  };
}

function v6Section(net: bigint, hosts: bigint[]) {
  return { ipAddress: hosts.map((h) => ({ privateIpAddress: fullV6((net << 64n) | h) })), subnet: [{ address: fullV6(net << 64n), prefix: '64' }] };
}

/** Every path (list of keys) to a value inside `value`. */
function pathsOf(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out = [prefix];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...pathsOf(v, [...prefix, i])));
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) out.push(...pathsOf(v, [...prefix, k]));
  return out;
}

type Mutation = { pick: number; kind: 'replace' | 'delete' | 'proto' | 'grow'; value: unknown };
const mutation: fc.Arbitrary<Mutation> = fc.record({
  pick: fc.nat(),
  kind: fc.constantFrom('replace', 'delete', 'proto', 'grow'),
  value: fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.constantFrom('', 'ZZZZZZZZZZZZ', '000D3A1B2C3D', '999.1.1.1', 'fe80::1%eth0', '::', '0.0.0.0', '-1', '129', 1e308, -0, NaN, null, [], {}),
    fc.string(),
  ),
});

function mutate(document: unknown, mutations: Mutation[]): unknown {
  const copy = structuredClone(document);
  for (const m of mutations) {
    const paths = pathsOf(copy).filter((p) => p.length > 0);
    if (paths.length === 0) break;
    const target = paths[m.pick % paths.length]!;
    const parent = target.slice(0, -1).reduce((v: any, k) => v[k], copy as any);
    const key = target.at(-1)!;
    if (m.kind === 'replace') parent[key] = m.value;
    else if (m.kind === 'delete' && Array.isArray(parent)) parent.splice(key as number, 1);
    else if (m.kind === 'delete') delete parent[key];
    else if (m.kind === 'proto') parent[key] = JSON.parse(`{"__proto__": ${JSON.stringify(parent[key] ?? null)}, "constructor": {"prototype": {"polluted": 1}}}`);
    else if (Array.isArray(parent[key])) parent[key] = [...parent[key], ...parent[key], m.value];
    else parent[key] = [parent[key], m.value];
  }
  return copy;
}

describe('networkPlanFrom by property', () => {
  it('answers any JSON value with a plan or a named warning, never an exception', () => {
    fc.assert(fc.property(fc.jsonValue(), (value) => assertWellFormed(networkPlanFrom(value), value)), { numRuns: 500 });
    fc.assert(fc.property(fc.jsonValue(), (value) => assertWellFormed(networkPlanFrom({ network: value }), { network: value })), { numRuns: 500 });
    fc.assert(fc.property(fc.array(fc.jsonValue({ maxDepth: 4 }), { maxLength: 10 }), (list) => {
      const input = { network: { interface: list } };
      assertWellFormed(networkPlanFrom(input), input);
    }), { numRuns: 500 });
  });

  it('gives back the plan a valid document was built from, with no warning', () => {
    fc.assert(fc.property(validNics, (nics) => {
      const result = networkPlanFrom(documentOf(nics));
      expect(result.warnings).toEqual([]);
      expect(result.plan!.nics).toHaveLength(nics.length);
      result.plan!.nics.forEach((planned, i) => {
        const n = nics[i]!;
        expect(planned).toMatchObject({ index: i, mac: n.mac.map(hex2).join(':'), primary: i === 0, useDns: i === 0, metric: 100 * (i + 1), dhcp6: n.v6 !== undefined });
        expect(planned.static4).toEqual(n.v4.addresses.slice(1).map((a) => ({ address: dotted(a), prefix: n.v4.prefix })));
        const v6 = n.v6;
        const expected6 = v6 ? v6.hosts.slice(1).map((h) => (v6.net << 64n) | h) : [];
        expect(planned.static6.map((a) => v6Value(a.address))).toEqual(expected6);
        for (const a of planned.static6) expect(a.address).toBe(a.address.toLowerCase());
        expect(planned.static6.every((a) => a.prefix === 64)).toBe(true);
      });
    }), { numRuns: 300 });
  });

  it('answers any mutation of a valid document (values replaced, keys deleted, __proto__ keys, lists grown) well-formed', () => {
    fc.assert(fc.property(validNics, fc.array(mutation, { minLength: 1, maxLength: 6 }), (nics, mutations) => {
      const input = mutate(documentOf(nics), mutations);
      assertWellFormed(networkPlanFrom(input), input);
      expect(({} as any).polluted).toBeUndefined();
    }), { numRuns: 1000 });
  });

  it('gives each static address the prefix of the first subnet holding it, else the first subnet\'s', () => {
    const v4n = fc.integer({ min: 1 * 2 ** 24, max: 126 * 2 ** 24 });
    const subnet = fc.record({ net: v4n, prefix: fc.integer({ min: 0, max: 32 }) });
    fc.assert(fc.property(fc.array(subnet, { minLength: 1, maxLength: 4 }), fc.uniqueArray(v4n, { minLength: 2, maxLength: 6 }), (subnets, addresses) => {
      const result = networkPlanFrom(doc({
        macAddress: '000D3A000001',
        ipv4: { ipAddress: addresses.map((a) => v4(dotted(a))), subnet: subnets.map((sn) => ({ address: dotted(sn.net), prefix: String(sn.prefix) })) },
      }));
      // The oracle: plain arithmetic on numbers, no bit operations (a /0 holds everything).
      const holds = (sn: { net: number; prefix: number }, a: number) => Math.floor(sn.net / 2 ** (32 - sn.prefix)) === Math.floor(a / 2 ** (32 - sn.prefix));
      const expected = addresses.slice(1).map((a) => ({ address: dotted(a), prefix: (subnets.find((sn) => holds(sn, a)) ?? subnets[0]!).prefix }));
      expect(result.plan!.nics[0]!.static4).toEqual(expected);
    }), { numRuns: 500 });
  });

  it('never plans a NIC whose MAC is not six bytes, nor an address that is not an address', () => {
    fc.assert(fc.property(fc.string(), fc.string(), (mac, address) => {
      const result = networkPlanFrom(doc({ macAddress: mac, ipv4: { ipAddress: [v4('10.0.0.4'), v4(address)] } }));
      const hex = mac.replace(/[:-]/g, '');
      if (result.plan) {
        expect(hex).toMatch(/^[0-9a-fA-F]{12}$/);
        for (const a of result.plan.nics[0]!.static4) expect(isIPv4(a.address)).toBe(true);
      }
    }), { numRuns: 500 });
  });
});
