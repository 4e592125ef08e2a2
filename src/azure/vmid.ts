/**
 * The VM id as Azure knows it (docs/protocol.md#vm-id): `product_uuid`, lower-cased, with the first three groups
 * byte-swapped on Generation 1 (BIOS) VMs, where SMBIOS 2.3 stores them little-endian.
 */
import { existsSync, readFileSync } from 'node:fs';
import { ZERO_VM_ID } from '../core/metadata.js';
import { under } from '../system/paths.js';

export interface VmId {
  vmId: string;
  source: 'product_uuid' | 'unreadable';
  generation: 1 | 2;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Reads the VM id under `sysRoot` (default `/`): e.g. Gen1 `550e8400-e29b-…` → `00840e55-9be2-d441-…`. */
export async function readVmId(options: { sysRoot?: string } = {}): Promise<VmId> {
  const root = options.sysRoot ?? '/';
  // Synchronous: sysfs and devfs answer from memory, faster than the thread-pool round trip of an async read.
  const generation = existsSync(under(root, '/sys/firmware/efi')) || existsSync(under(root, '/dev/efi')) ? 2 : 1;
  let raw: string;
  try {
    raw = readFileSync(under(root, '/sys/class/dmi/id/product_uuid'), 'utf8').trim().toLowerCase();
  } catch {
    raw = '';
  }
  if (!raw) return { vmId: ZERO_VM_ID, source: 'unreadable', generation };
  if (generation === 2) return { vmId: raw, source: 'product_uuid', generation };
  return { vmId: UUID.test(raw) ? swapGen1(raw) : raw, source: 'product_uuid', generation };
}

/**
 * Reverses the byte order of the first three groups of a lower-case UUID (4, 2 and 2 bytes), independent of
 * the host's endianness. Applying it twice gives the input back.
 */
export function swapGen1(uuid: string): string {
  const [a, b, c, ...rest] = uuid.split('-');
  return [reverseBytes(a!), reverseBytes(b!), reverseBytes(c!), ...rest].join('-');
}

/** Compares two VM ids ignoring case (old kernels expose upper case). */
export function sameVmId(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

function reverseBytes(hex: string): string {
  return (hex.match(/../g) ?? []).reverse().join('');
}
