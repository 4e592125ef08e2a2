/**
 * What the four network stacks' renderers and image readers share: the header every bootstate file begins with,
 * reading an image's files under a root (resolved inside it, regular files only), systemd-style INI and keyfile parsing, and shell-style globs
 * (networkd's `Name=`/`Driver=` and ifupdown's `source` lines).
 */
import { listDir as listImageDir } from '../../system/image-files.js';
import { readRegularInRoot } from '../../system/paths.js';
import type { BoundNic, BoundPlan, NicPlan } from './types.js';

/** The comment every rendered file begins with (`#` is a comment in all four formats). */
export const HEADER = [
  '# Written by bootstate from the Azure IMDS network section (network.interface[]).',
  '# bootstate replaces this file on every boot: changes made here are lost.',
];

/** The plan's interfaces that are not skipped, in IMDS order. */
export function rendered(plan: BoundPlan, skip: ReadonlySet<string>): BoundNic[] {
  return plan.nics.filter((nic) => !skip.has(nic.name));
}

/** `10.0.0.6/24` for each static address of a NIC, IPv4 first. */
export function staticCidrs(nic: NicPlan): string[] {
  return [...nic.static4, ...nic.static6].map((a) => `${a.address}/${a.prefix}`);
}

/** The names in a directory of the image under root, sorted; none when it is absent or unreadable. */
export async function listDir(root: string, dir: string): Promise<string[]> {
  return (await listImageDir(root, dir)).sort();
}

/** A regular file's text in the image under root, or null (absent, unreadable, not a regular file: never a FIFO). */
export const readText = readRegularInRoot;

/** Sections of an INI/keyfile document: section name → key → values (a repeated key keeps every value). */
export type Ini = Map<string, Map<string, string[]>>;

/** Parses systemd unit-style and NetworkManager keyfile INI text: `#`/`;` comments, `[Section]`, `Key=Value`. */
export function parseIni(text: string): Ini {
  const ini: Ini = new Map();
  let section: Map<string, string[]> | null = null;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = ini.get(header[1]!) ?? new Map<string, string[]>();
      ini.set(header[1]!, section);
      continue;
    }
    const eq = line.indexOf('=');
    if (section === null || eq <= 0) continue;
    const key = line.slice(0, eq).trim();
    const values = section.get(key) ?? [];
    values.push(line.slice(eq + 1).trim());
    section.set(key, values);
  }
  return ini;
}

/** The values of `section.key` (empty when absent). */
export function iniValues(ini: Ini, section: string, key: string): string[] {
  return ini.get(section)?.get(key) ?? [];
}

/** Whether `text` matches a shell glob (`*`, `?`, `[…]`, `[!…]`), as fnmatch(3) without flags. */
export function globMatch(pattern: string, text: string): boolean {
  let re = '^';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') re += '.*';
    else if (c === '?') re += '.';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 2);
      if (end < 0) re += '\\[';
      else {
        const body = pattern.slice(i + 1, end).replace(/^!/, '^').replace(/\\/g, '\\\\');
        re += `[${body}]`;
        i = end;
      }
    } else re += c.replace(/[.+^${}()|\\/]/g, '\\$&');
  }
  try {
    return new RegExp(`${re}$`, 's').test(text);
  } catch {
    return false;
  }
}

/** A MAC written in any case, with `:` or `-`, as `aa:bb:…`. */
export function normalMac(mac: string): string {
  return mac.trim().toLowerCase().replace(/-/g, ':');
}
