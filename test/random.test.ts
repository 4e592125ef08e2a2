import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { randomBytes, randomUUID, sha256Hex } from '../src/core/random.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('random identifiers', () => {
  it('gives a fresh UUIDv4 on every call', () => {
    const ids = Array.from({ length: 200 }, () => randomUUID());
    for (const id of ids) expect(id).toMatch(UUID_V4);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('spreads its bits as a UUIDv4 must: each random nibble takes all 16 values over a pool refill', () => {
    // 2,000 UUIDs cross several 4 KiB reads of /dev/urandom: a byte handed out twice, or a stuck bit, shows here.
    const ids = Array.from({ length: 2000 }, () => randomUUID().replace(/-/g, ''));
    expect(new Set(ids).size).toBe(ids.length);
    for (const position of [0, 5, 11, 13, 20, 31]) {
      expect(new Set(ids.map((id) => id[position])).size, `nibble ${position}`).toBe(16);
    }
    expect(new Set(ids.map((id) => id[12]))).toEqual(new Set(['4']));
    expect(new Set(ids.map((id) => id[16]))).toEqual(new Set(['8', '9', 'a', 'b']));
  });

  it('gives random bytes of the asked size and the SHA-256 of a text', () => {
    expect(randomBytes(6)).toHaveLength(6);
    expect(randomBytes(16).equals(randomBytes(16))).toBe(false);
    expect(randomBytes(10_000)).toHaveLength(10_000);
    expect(sha256Hex('azureuser')).toBe(createHash('sha256').update('azureuser').digest('hex'));
  });

});
