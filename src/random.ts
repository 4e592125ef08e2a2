/**
 * Random identifiers without loading node:crypto up front: requiring it costs 5–15 ms, and every module on the way
 * to the first IMDS request that imported it paid that before the request could leave. node:crypto is loaded on
 * first use instead; a UUIDv4 comes from the kernel's CSPRNG (/proc/sys/kernel/random/uuid), which needs no module.
 */
import type * as Crypto from 'node:crypto';
import { readFileSync } from 'node:fs';

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

export const randomBytes = (size: number): Buffer => crypto().randomBytes(size);

export const sha256Hex = (text: string): string => crypto().createHash('sha256').update(text).digest('hex');
