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

  it('gives random bytes of the asked size and the SHA-256 of a text', () => {
    expect(randomBytes(6)).toHaveLength(6);
    expect(randomBytes(16).equals(randomBytes(16))).toBe(false);
    expect(sha256Hex('azureuser')).toBe(createHash('sha256').update('azureuser').digest('hex'));
  });

});
