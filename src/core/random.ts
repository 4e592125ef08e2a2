/**
 * Random identifiers without node:crypto: requiring it put its load before the first IMDS request (every module on
 * the way imported it) and added to the peak RSS. Bytes come from the kernel's CSPRNG (/dev/urandom), read a few
 * KiB at a time and handed out once each, so a run's dozens of UUIDs (a request id per fabric request, an id per
 * telemetry event) and temp-file names cost one read, not an open, a read and a close each; node:crypto is loaded
 * only where /dev/urandom cannot be read, and for hashing.
 */
import type * as Crypto from 'node:crypto';
import { closeSync, openSync, readSync } from 'node:fs';

/** Bytes read from /dev/urandom at a time: 256 UUIDs. */
const POOL_BYTES = 4096;

const crypto = (): typeof Crypto => process.getBuiltinModule('node:crypto');

let pool = Buffer.alloc(0);
let used = 0;

/** `size` fresh bytes of /dev/urandom's, never handed out before; null where it cannot be read. */
function urandom(size: number): Buffer | null {
  if (used + size > pool.length) {
    const fresh = Buffer.allocUnsafe(Math.max(size, POOL_BYTES));
    try {
      const fd = openSync('/dev/urandom', 'r');
      try {
        if (readSync(fd, fresh) !== fresh.length) return null;
      } finally {
        closeSync(fd);
      }
    } catch {
      return null; // no /dev/urandom here
    }
    pool = fresh;
    used = 0;
  }
  const bytes = Buffer.from(pool.subarray(used, used + size));
  pool.fill(0, used, used + size);
  used += size;
  return bytes;
}

/** A random UUIDv4 (RFC 9562: 122 random bits, the version and variant set). */
export function randomUUID(): string {
  const bytes = urandom(16);
  if (bytes === null) return crypto().randomUUID();
  bytes[6] = (bytes[6]! & 0x0f) | 0x40;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** `size` random bytes from /dev/urandom, or node:crypto's where it cannot be read. */
export function randomBytes(size: number): Buffer {
  return urandom(size) ?? crypto().randomBytes(size);
}

export const sha256Hex = (text: string): string => crypto().createHash('sha256').update(text).digest('hex');
