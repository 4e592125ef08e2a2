import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import {
  RECORD_BYTES,
  SAFE_KEY_BYTES,
  SAFE_VALUE_BYTES,
  decodeRecord,
  decodeRecords,
  encodeRecord,
  encodeRecords,
  sanitizeText,
  splitValue,
  truncateUtf8,
} from '../../src/kvp/codec.js';

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');
/** Any well-formed text without NUL (full Unicode, so 1- to 4-byte characters). */
const text = fc.string({ unit: 'grapheme' }).map((s) => s.replace(/\0/g, ''));
const keyWithin = text.filter((s) => s.length > 0 && bytes(s) <= SAFE_KEY_BYTES);
const valueWithin = text.filter((s) => bytes(s) <= SAFE_VALUE_BYTES);

function kvpError(fn: () => unknown): BootstateError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(BootstateError);
    expect((error as BootstateError).code).toBe('KVP_FAILED');
    return error as BootstateError;
  }
  throw new Error('expected a KVP_FAILED error');
}

describe('kvp record codec', () => {
  it('encodes every record to exactly 2,560 bytes with a 512-byte key field', () => {
    const slot = encodeRecord({ key: 'k', value: 'v' });
    expect(slot.length).toBe(RECORD_BYTES);
    expect(slot[0]).toBe(0x6b);
    expect(slot[512]).toBe(0x76);
    expect(slot.subarray(1, 512).every((b) => b === 0)).toBe(true);
  });

  it('round-trips any key and value within the safe limits', () => {
    fc.assert(
      fc.property(keyWithin, valueWithin, (key, value) => {
        expect(decodeRecord(encodeRecord({ key, value }))).toEqual({ key, value });
      }),
      { numRuns: 300 },
    );
  });

  it('round-trips batches of records in order', () => {
    fc.assert(
      fc.property(fc.array(fc.record({ key: keyWithin, value: valueWithin }), { maxLength: 8 }), (records) => {
        const encoded = encodeRecords(records);
        expect(encoded.length).toBe(records.length * RECORD_BYTES);
        expect(decodeRecords(encoded)).toEqual(records);
      }),
    );
  });

  it('accepts a key of exactly 254 bytes and a value of exactly 1,022 bytes, and refuses one byte more', () => {
    expect(() => encodeRecord({ key: 'k'.repeat(254), value: 'v'.repeat(1022) })).not.toThrow();
    expect(kvpError(() => encodeRecord({ key: 'k'.repeat(255), value: '' })).message).toMatch(/key is 255 bytes, the limit is 254/);
    expect(kvpError(() => encodeRecord({ key: 'k', value: 'v'.repeat(1023) })).message).toMatch(/value is 1023 bytes, the limit is 1022/);
  });

  it('refuses any oversize key or value measured in UTF-8 bytes, not characters', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: SAFE_KEY_BYTES + 1, maxLength: 400 }).map((s) => s.replace(/\0/g, 'x')), (key) => {
        kvpError(() => encodeRecord({ key, value: 'v' }));
      }),
      { numRuns: 50 },
    );
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: SAFE_VALUE_BYTES + 1, maxLength: 1500 }).map((s) => s.replace(/\0/g, 'x')), (value) => {
        kvpError(() => encodeRecord({ key: 'k', value }));
      }),
      { numRuns: 50 },
    );
    kvpError(() => encodeRecord({ key: 'k', value: '€'.repeat(341) }));
  });

  it('allows the full field widths in unsafe mode but still leaves room for a terminating NUL', () => {
    const record = { key: 'k'.repeat(511), value: 'v'.repeat(2047) };
    expect(decodeRecord(encodeRecord(record, { unsafe: true }))).toEqual(record);
    kvpError(() => encodeRecord({ key: 'k'.repeat(512), value: '' }, { unsafe: true }));
  });

  it('refuses NUL bytes anywhere in the key or value', () => {
    fc.assert(
      fc.property(text, text, fc.boolean(), (before, after, inKey) => {
        const withNul = `${before}\0${after}`;
        kvpError(() => encodeRecord(inKey ? { key: withNul, value: '' } : { key: 'k', value: withNul }));
      }),
      { numRuns: 100 },
    );
  });

  it('refuses an empty key and text with lone surrogates (not encodable as UTF-8)', () => {
    expect(kvpError(() => encodeRecord({ key: '', value: 'v' })).message).toMatch(/empty/);
    expect(kvpError(() => encodeRecord({ key: 'a\uD800b', value: '' })).message).toMatch(/UTF-8/);
    expect(kvpError(() => encodeRecord({ key: 'k', value: '\uDC00' })).message).toMatch(/UTF-8/);
    expect(() => encodeRecord({ key: 'k', value: '😀' })).not.toThrow();
  });

  it('decodes strictly: invalid UTF-8 in a slot fails with a KVP error unless lossy', () => {
    const slot = encodeRecord({ key: 'k', value: 'ok' });
    slot[512] = 0xc3;
    slot[513] = 0x28;
    expect(kvpError(() => decodeRecord(slot)).message).toMatch(/value of record at byte 0 is not valid UTF-8/);
    expect(decodeRecord(slot, 0, { lossy: true }).value).toBe('\uFFFD(');
  });

  it('ignores a torn tail shorter than one record when decoding a buffer', () => {
    const buffer = Buffer.concat([encodeRecord({ key: 'a', value: 'b' }), Buffer.alloc(100, 1)]);
    expect(decodeRecords(buffer)).toEqual([{ key: 'a', value: 'b' }]);
  });
});

describe('splitValue', () => {
  it('keeps every chunk within the byte limit, never cuts a character, and preserves the content', () => {
    const values = fc.string({ unit: 'grapheme', maxLength: 3000, size: 'large' });
    const maxima = fc.oneof(fc.integer({ min: 4, max: 16 }), fc.integer({ min: 4, max: 1022 }), fc.constant(1022));
    fc.assert(
      fc.property(values, maxima, (value, max) => {
        const chunks = splitValue(value, max);
        expect(chunks.join('')).toBe(value);
        expect(Buffer.concat(chunks.map((c) => Buffer.from(c, 'utf8'))).equals(Buffer.from(value, 'utf8'))).toBe(true);
        for (const chunk of chunks) {
          expect(bytes(chunk)).toBeLessThanOrEqual(max);
          expect(chunk).not.toMatch(/^[\uDC00-\uDFFF]|[\uD800-\uDBFF]$/);
        }
        if (value !== '') expect(chunks.every((c) => c.length > 0)).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('splits 1,022-byte chunks by default and keeps a 4-byte character whole at the boundary', () => {
    const value = `${'a'.repeat(1020)}😀tail`;
    expect(splitValue(value)).toEqual(['a'.repeat(1020), '😀tail']);
    expect(splitValue('x'.repeat(2044)).map(bytes)).toEqual([1022, 1022]);
    expect(splitValue('')).toEqual(['']);
  });

  it('truncates to a byte budget at a character boundary', () => {
    expect(truncateUtf8('ab€', 4)).toBe('ab');
    expect(truncateUtf8('ab€', 5)).toBe('ab€');
  });

  it('sanitizes NUL bytes and lone surrogates from untrusted text into storable text', () => {
    expect(sanitizeText('a\0b\uD800c')).toBe('a\\0b\uFFFDc');
  });
});
