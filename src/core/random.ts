/**
 * Random identifiers without node:crypto: requiring it put its load before the first IMDS request (every module on
 * the way imported it) and added to the peak RSS. UUIDs and bytes come from the kernel's CSPRNG
 * (/proc/sys/kernel/random/uuid, /dev/urandom); node:crypto is loaded only where those cannot be read, and for
 * hashing.
 */
import type * as Crypto from 'node:crypto';
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';

const KERNEL_UUID = '/proc/sys/kernel/random/uuid';
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const crypto = (): typeof Crypto => process.getBuiltinModule('node:crypto');

/** A random UUIDv4: the kernel's, or node:crypto's where /proc cannot give one. */
export function randomUUID(): string {
  try {
    const uuid = readFileSync(KERNEL_UUID, 'latin1').trim();
    if (UUID_V4.test(uuid)) return uuid;
  } catch {
    // no procfs here
  }
  return crypto().randomUUID();
}

/** `size` random bytes from /dev/urandom, or node:crypto's where it cannot be read. */
export function randomBytes(size: number): Buffer {
  const bytes = Buffer.alloc(size);
  try {
    const fd = openSync('/dev/urandom', 'r');
    try {
      if (readSync(fd, bytes) === size) return bytes;
    } finally {
      closeSync(fd);
    }
  } catch {
    // no /dev/urandom here
  }
  return crypto().randomBytes(size);
}

export const sha256Hex = (text: string): string => crypto().createHash('sha256').update(text).digest('hex');
