/**
 * Reads IMDS's `network` section into the network step's plan: one NicPlan per usable entry of
 * `network.interface[]`, in IMDS's order. Total: whatever the document (any JSON value, a mutated or huge one), the
 * answer is a plan, or null and why, with named warnings — never an exception.
 *
 * Decisions, each for a reason:
 * - A NIC's `index` is its position in IMDS's list and only index 0 is primary. When entry 0 is left out, no other NIC
 *   becomes primary (its default route and DNS would be wrong): the primary keeps the image's own configuration.
 * - A NIC needs a valid MAC (12 hex digits, or six colon- or dash-separated pairs; normalised to `aa:bb:…`) and at
 *   least one valid IPv4 address; without them it is left out (NIC_MALFORMED). A second NIC with a MAC already seen,
 *   usable or not, is left out (DUPLICATE_MAC).
 * - An address must be a unicast one (not unspecified, loopback, multicast or IPv4's reserved 240/4): an IMDS fault
 *   must not put 0.0.0.0 or 127.0.0.1 on a NIC.
 * - The first valid address of each family comes by DHCP; the later ones are static, with the prefix of the first
 *   subnet that contains them, else the first subnet's, else 24 / 128. An unusable address or subnet is left out with
 *   a warning (ADDRESS_MALFORMED); an absent or empty prefix or subnet address counts as not given. DHCPv6 when the NIC
 *   has a valid IPv6 address.
 * - No usable NIC at all gives no plan (the image's configuration stays), never an empty one.
 * - Bounded work: at most 64 NICs, 256 addresses and 64 subnets per family per NIC; the rest is left out with a
 *   warning, and warnings past 100 are counted per code in one last warning each.
 * Messages name positions, MACs and addresses (none is secret) and show other values cut to 40 characters.
 */
import { isIPv4, isIPv6 } from 'node:net';
import type { Address, NetworkWarning, NicPlan, PlanResult } from './types.js';

export const NETWORK_LIMITS = { nics: 64, addresses: 256, subnets: 64, warnings: 100 } as const;

type Code = NetworkWarning['code'];

interface Warnings {
  add(code: Code, message: string): void;
  list(): NetworkWarning[];
}

interface Family {
  name: 'ipv4' | 'ipv6';
  label: 'IPv4' | 'IPv6';
  bits: number;
  defaultPrefix: number;
  parse(text: string): { text: string; value: bigint } | null;
  /** False for what no NIC can hold: the unspecified address, loopback, multicast (and IPv4's 240/4). */
  unicast(value: bigint): boolean;
}

interface Subnet {
  prefix: number;
  /** The subnet's address, or null when IMDS gave none (it then only serves as the first subnet's prefix). */
  network: bigint | null;
}

const MAC_FORMS = /^(?:[0-9a-f]{12}|[0-9a-f]{2}(?::[0-9a-f]{2}){5}|[0-9a-f]{2}(?:-[0-9a-f]{2}){5})$/i;

/** The plan for IMDS's whole parsed document (the object with `compute` and `network`). */
export function networkPlanFrom(document: unknown): PlanResult {
  const warnings = collectWarnings();
  try {
    const nics = readInterfaces(document, warnings);
    return nics ? { plan: { nics }, warnings: warnings.list() } : { plan: null, warnings: warnings.list() };
  } catch {
    // Only a value JSON cannot hold gets here (a getter or a proxy that throws): no plan, and say so.
    warnings.add('NETWORK_MALFORMED', 'the network section could not be read: the image\'s own network configuration stays');
    return { plan: null, warnings: warnings.list() };
  }
}

/** The usable NICs, or null (with a NETWORK_* warning) when there is none. */
function readInterfaces(document: unknown, warnings: Warnings): NicPlan[] | null {
  const list = interfaceList(document, warnings);
  if (!list) return null;
  const count = Math.min(list.length, NETWORK_LIMITS.nics);
  if (list.length > count) {
    warnings.add('NIC_MALFORMED', `network.interface lists ${list.length} interfaces: the ${list.length - count} after the first ${count} are left out`);
  }
  const nics: NicPlan[] = [];
  const seen = new Map<string, number>();
  for (let index = 0; index < count; index++) {
    const entry = at(list, index);
    if (!isRecord(entry)) {
      warnings.add('NIC_MALFORMED', leftOut(index, `it is ${show(entry)}, not an object`));
      continue;
    }
    const mac = macOf(own(entry, 'macAddress'));
    if (mac === null) {
      warnings.add('NIC_MALFORMED', leftOut(index, `its macAddress is ${show(own(entry, 'macAddress'))}, not a MAC address`));
      continue;
    }
    const first = seen.get(mac);
    if (first !== undefined) {
      warnings.add('DUPLICATE_MAC', `interface ${index} left out: its MAC ${mac} is interface ${first}'s`);
      continue;
    }
    seen.set(mac, index);
    const nic = nicPlan(entry, index, mac, warnings);
    if (nic) nics.push(nic);
  }
  if (nics.length > 0) return nics;
  warnings.add('NETWORK_MALFORMED', 'no entry of network.interface is usable: the image\'s own network configuration stays');
  return null;
}

/** `network.interface` when it is a non-empty array; else null, said with the section's warning. */
function interfaceList(document: unknown, warnings: Warnings): unknown[] | null {
  const keep = ': the image\'s own network configuration stays';
  if (!isRecord(document)) {
    warnings.add('NETWORK_MALFORMED', `the IMDS document is ${show(document)}, not an object${keep}`);
    return null;
  }
  const network = own(document, 'network');
  if (network === undefined || network === null) {
    warnings.add('NETWORK_MISSING', `the IMDS document has no network section${keep}`);
    return null;
  }
  if (!isRecord(network)) {
    warnings.add('NETWORK_MALFORMED', `network is ${show(network)}, not an object${keep}`);
    return null;
  }
  const list = own(network, 'interface');
  if (list === undefined || list === null) {
    warnings.add('NETWORK_MISSING', `network has no interface list${keep}`);
    return null;
  }
  if (!Array.isArray(list)) {
    warnings.add('NETWORK_MALFORMED', `network.interface is ${show(list)}, not an array${keep}`);
    return null;
  }
  if (list.length === 0) {
    warnings.add('NETWORK_EMPTY', `network.interface is empty${keep}`);
    return null;
  }
  return list as unknown[];
}

/** One NIC's plan, or null (warned) when it has no valid IPv4 address. */
function nicPlan(entry: Record<string, unknown>, index: number, mac: string, warnings: Warnings): NicPlan | null {
  const where = `interface ${index} (${mac})`;
  const v4 = addressesOf(own(entry, 'ipv4'), IPV4, where, warnings);
  if (v4.length === 0) {
    warnings.add('NIC_MALFORMED', leftOut(index, `${mac} has no valid IPv4 address`));
    return null;
  }
  const v6 = addressesOf(own(entry, 'ipv6'), IPV6, where, warnings);
  const primary = index === 0;
  return {
    index,
    mac,
    primary,
    metric: 100 * (index + 1),
    useDns: primary,
    static4: v4.slice(1),
    dhcp6: v6.length > 0,
    static6: v6.slice(1),
  };
}

function leftOut(index: number, why: string): string {
  const primary = index === 0 ? ' (the primary NIC: no other becomes primary; it keeps the image\'s own configuration)' : '';
  return `interface ${index} left out: ${why}${primary}`;
}

/** The valid, distinct addresses of one family's section, in IMDS's order, each with its prefix. */
function addressesOf(section: unknown, family: Family, where: string, warnings: Warnings): Address[] {
  if (section === undefined || section === null) return [];
  if (!isRecord(section)) {
    warnings.add('ADDRESS_MALFORMED', `${where}: ${family.name} is ${show(section)}, not an object: its addresses are left out`);
    return [];
  }
  const listed = own(section, 'ipAddress');
  if (listed === undefined || listed === null) return [];
  if (!Array.isArray(listed)) {
    warnings.add('ADDRESS_MALFORMED', `${where}: ${family.name}.ipAddress is ${show(listed)}, not an array: its addresses are left out`);
    return [];
  }
  const subnets = subnetsOf(own(section, 'subnet'), family, where, warnings);
  const count = Math.min(listed.length, NETWORK_LIMITS.addresses);
  if (listed.length > count) {
    warnings.add('ADDRESS_MALFORMED', `${where}: ${family.name}.ipAddress lists ${listed.length} addresses: those after the first ${count} are left out`);
  }
  const addresses: Address[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < count; i++) {
    const raw = own(at(listed, i), 'privateIpAddress');
    const parsed = typeof raw === 'string' ? family.parse(raw) : null;
    if (!parsed) {
      warnings.add('ADDRESS_MALFORMED', `${where}: ${family.name}.ipAddress[${i}].privateIpAddress is ${show(raw)}, not an ${family.label} address: left out`);
    } else if (!family.unicast(parsed.value)) {
      warnings.add('ADDRESS_MALFORMED', `${where}: ${family.name}.ipAddress[${i}] ${parsed.text} is not a unicast address (unspecified, loopback or multicast): left out`);
    } else if (seen.has(parsed.text)) {
      warnings.add('ADDRESS_MALFORMED', `${where}: ${family.name}.ipAddress[${i}] ${parsed.text} is listed twice: left out`);
    } else {
      seen.add(parsed.text);
      addresses.push({ address: parsed.text, prefix: prefixFor(parsed.value, subnets, family) });
    }
  }
  return addresses;
}

/** The usable subnets of one family's section; a subnet with a bad prefix or address is left out, warned. */
function subnetsOf(raw: unknown, family: Family, where: string, warnings: Warnings): Subnet[] {
  if (raw === undefined || raw === null) return [];
  const name = `${family.name}.subnet`;
  if (!Array.isArray(raw)) {
    warnings.add('ADDRESS_MALFORMED', `${where}: ${name} is ${show(raw)}, not an array: prefix ${family.defaultPrefix} applies`);
    return [];
  }
  const count = Math.min(raw.length, NETWORK_LIMITS.subnets);
  if (raw.length > count) {
    warnings.add('ADDRESS_MALFORMED', `${where}: ${name} lists ${raw.length} subnets: those after the first ${count} are left out`);
  }
  const subnets: Subnet[] = [];
  for (let i = 0; i < count; i++) {
    const entry = at(raw, i);
    if (!isRecord(entry)) {
      warnings.add('ADDRESS_MALFORMED', `${where}: ${name}[${i}] is ${show(entry)}, not an object: left out`);
      continue;
    }
    const prefixGiven = given(own(entry, 'prefix'));
    const prefix = prefixGiven === undefined ? family.defaultPrefix : prefixOf(prefixGiven, family.bits);
    if (prefix === null) {
      warnings.add('ADDRESS_MALFORMED', `${where}: ${name}[${i}].prefix is ${show(prefixGiven)}, not a prefix length 0–${family.bits}: subnet left out`);
      continue;
    }
    const addressGiven = given(own(entry, 'address'));
    const parsed = typeof addressGiven === 'string' ? family.parse(addressGiven) : null;
    if (addressGiven !== undefined && !parsed) {
      warnings.add('ADDRESS_MALFORMED', `${where}: ${name}[${i}].address is ${show(addressGiven)}, not an address: subnet left out`);
      continue;
    }
    subnets.push({ prefix, network: parsed ? parsed.value : null });
  }
  return subnets;
}

/** The prefix of the first subnet holding `value`, else the first subnet's, else the family's default. */
function prefixFor(value: bigint, subnets: Subnet[], family: Family): number {
  const holding = subnets.find((s) => s.network !== null && contains(s.network, s.prefix, value, family.bits));
  return (holding ?? subnets[0])?.prefix ?? family.defaultPrefix;
}

function contains(network: bigint, prefix: number, value: bigint, bits: number): boolean {
  const shift = BigInt(bits - prefix);
  return network >> shift === value >> shift;
}

/** A prefix length, as IMDS's string or a number: an integer in 0–bits; else null. */
function prefixOf(raw: unknown, bits: number): number | null {
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d{1,3}$/.test(raw) ? Number(raw) : NaN;
  return Number.isInteger(n) && n >= 0 && n <= bits ? n : null;
}

/** A MAC in any of IMDS's forms as `aa:bb:cc:dd:ee:ff`; else null. */
function macOf(raw: unknown): string | null {
  if (typeof raw !== 'string' || !MAC_FORMS.test(raw)) return null;
  return raw.replace(/[:-]/g, '').toLowerCase().match(/../g)!.join(':');
}

const IPV4: Family = {
  name: 'ipv4',
  label: 'IPv4',
  bits: 32,
  defaultPrefix: 24,
  // node:net's isIPv4 takes dotted quads only, without leading zeros: the text is already canonical.
  parse: (text) => (isIPv4(text) ? { text, value: text.split('.').reduce((n, octet) => (n << 8n) | BigInt(octet), 0n) } : null),
  unicast: (value) => value >> 24n !== 0n && value >> 24n !== 127n && value >> 24n < 224n,
};

const IPV6: Family = {
  name: 'ipv6',
  label: 'IPv6',
  bits: 128,
  defaultPrefix: 128,
  parse: (text) => {
    // A zone (`fe80::1%eth0`) passes isIPv6 but names an interface of some other machine.
    if (!isIPv6(text) || text.includes('%')) return null;
    // The URL parser writes an IPv6 host in its one canonical form (RFC 5952: lower case, longest zero run as ::).
    const canonical = new URL(`http://[${text}]/`).hostname.slice(1, -1);
    return { text: canonical, value: ipv6Value(canonical) };
  },
  unicast: (value) => value > 1n && value >> 120n !== 0xffn,
};

/** The 128-bit value of a canonical IPv6 address (hex groups only, at most one `::`). */
function ipv6Value(canonical: string): bigint {
  const [head, tail] = canonical.split('::') as [string, string | undefined];
  const groupsOf = (part: string | undefined) => (part ? part.split(':') : []);
  const left = groupsOf(head);
  const right = groupsOf(tail);
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return groups.reduce((n, group) => (n << 16n) | BigInt(Number.parseInt(group, 16)), 0n);
}

function collectWarnings(): Warnings {
  const kept: NetworkWarning[] = [];
  const dropped = new Map<Code, number>();
  return {
    add(code, message) {
      if (kept.length < NETWORK_LIMITS.warnings) kept.push({ code, message });
      else dropped.set(code, (dropped.get(code) ?? 0) + 1);
    },
    list: () => [...kept, ...[...dropped].map(([code, n]) => ({ code, message: `${n} more ${code} warning${n === 1 ? '' : 's'} not listed` }))],
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An own property only: a key like `__proto__` or an inherited one never answers. */
function own(value: unknown, key: string): unknown {
  return isRecord(value) && Object.prototype.hasOwnProperty.call(value, key) ? value[key] : undefined;
}

function at(list: unknown[], index: number): unknown {
  return Object.prototype.hasOwnProperty.call(list, index) ? list[index] : undefined;
}

/** An empty string counts as not given (IMDS writes `""` for what it has not). */
function given(value: unknown): unknown {
  return value === '' ? undefined : value;
}

/** A value as a message shows it: strings quoted and cut to 40 characters, structures by their kind. */
function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  if (value === undefined) return 'absent';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
