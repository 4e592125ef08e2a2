/**
 * The boot diagnostics codec: any bytes packed come back the same, every record fits the host-safe limits, and a
 * pool with parts missing, doubled, reordered or garbled is reported part by part, never with an exception.
 */
import fc from 'fast-check';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { type KvpRecord, SAFE_KEY_BYTES, SAFE_VALUE_BYTES, encodeRecords, decodeRecords } from '../../src/kvp/codec.js';
import { MAX_TEXT_BYTES, PART_CHARS, packText, timelineRecord, unpackDiagnostics } from '../../src/kvp/diagnostics.js';

const VM = '2b9bd8d1-0c7e-4a2d-9bd3-05bd8d2b9f4a';
const ids = { vmId: VM, run: 'a1b2c3d4' };
const names = fc.stringMatching(/^[a-z][a-z0-9-]{0,23}$/);

function withinLimits(records: KvpRecord[]): void {
  for (const r of records) {
    expect(Buffer.byteLength(r.key)).toBeLessThanOrEqual(SAFE_KEY_BYTES);
    expect(Buffer.byteLength(r.value)).toBeLessThanOrEqual(SAFE_VALUE_BYTES);
  }
}

describe('packText and unpackDiagnostics', () => {
  it('give back any bytes, through the pool file format, with every record within the safe limits', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 20_000 }), names, (bytes, name) => {
        const records = packText(ids, name, Buffer.from(bytes))!;
        withinLimits(records);
        const roundTrip = decodeRecords(encodeRecords(records));
        const { texts } = unpackDiagnostics(roundTrip);
        expect(texts).toHaveLength(1);
        expect(texts[0]!.problem).toBeUndefined();
        expect(texts[0]!.name).toBe(name);
        expect(Buffer.compare(texts[0]!.bytes!, Buffer.from(bytes))).toBe(0);
      }),
      { numRuns: 150 },
    );
  });

  it('keep several texts of several runs apart, whatever other records lie between and in what order', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('r1', 'r2'), names, fc.uint8Array({ maxLength: 4000 })), { minLength: 1, maxLength: 5 }),
        fc.array(fc.record({ key: fc.string({ minLength: 1, maxLength: 20 }).filter((k) => !k.startsWith('bootstate-') && !k.includes('\0')), value: fc.string({ maxLength: 50 }).filter((v) => !v.includes('\0')) }), { maxLength: 5 }),
        fc.infiniteStream(fc.nat()),
        (texts, foreign, randoms) => {
          const latest = new Map<string, Uint8Array>();
          for (const [run, name, bytes] of texts) latest.set(`${run}|${name}`, bytes);
          const records: KvpRecord[] = [...foreign];
          for (const [key, bytes] of latest) {
            const [run, name] = key.split('|');
            records.push(...packText({ vmId: VM, run: run! }, name!, Buffer.from(bytes))!);
          }
          const it = randoms[Symbol.iterator]();
          const shuffled = records.map((r) => [it.next().value as number, r] as const).sort((a, b) => a[0] - b[0]).map(([, r]) => r);
          const out = unpackDiagnostics(shuffled);
          expect(out.texts).toHaveLength(latest.size);
          for (const t of out.texts) expect(Buffer.compare(t.bytes!, Buffer.from(latest.get(`${t.run}|${t.name}`)!))).toBe(0);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('report missing, doubled and garbled parts by name, and never throw on any record', () => {
    const body = Buffer.from(Array.from({ length: 3000 }, (_, i) => `line ${i} ${Math.sin(i)}`).join('\n'));
    const records = packText(ids, 'kernel-log', body)!;
    expect(records.length).toBeGreaterThan(3);
    const missing = unpackDiagnostics(records.filter((_, i) => i !== 1)).texts[0]!;
    expect(missing.problem).toBe(`1 of ${records.length} parts missing (2)`);
    expect(missing.bytes).toBeUndefined();
    const doubled = unpackDiagnostics([...records, { key: records[0]!.key, value: records[1]!.value }]).texts[0]!;
    expect(doubled.problem).toMatch(/^part 1 appears 2 times/);
    const garbled = records.map((r, i) => (i === 2 ? { ...r, value: r.value.replace(/[A-Z]/g, 'a') } : r));
    expect(unpackDiagnostics(garbled).texts[0]!.problem).toMatch(/do not decompress/);
    const notBase64 = records.map((r, i) => (i === 0 ? { ...r, value: `!${r.value.slice(1)}` } : r));
    expect(unpackDiagnostics(notBase64).texts[0]!.problem).toBe('the parts are not base64');
    fc.assert(
      fc.property(fc.array(fc.record({ key: fc.oneof(fc.constantFrom(...records.map((r) => r.key)), fc.string().map((s) => `bootstate-diag|${s}`), fc.string().map((s) => `bootstate-boot|${s}`)), value: fc.oneof(fc.string(), fc.constantFrom(...records.map((r) => r.value))) })), (pool) => {
        const out = unpackDiagnostics(pool);
        for (const t of out.texts) expect(t.bytes !== undefined || typeof t.problem === 'string').toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('refuse (null) a text that needs more parts than allowed, and size parts as whole base64 groups', () => {
    expect(PART_CHARS % 4).toBe(0);
    const noise = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 7919) % 251));
    const needed = Math.ceil(gzipSync(noise, { level: 9 }).toString('base64').length / PART_CHARS);
    expect(packText(ids, 'step', noise, needed - 1)).toBeNull();
    expect(packText(ids, 'step', noise, needed)).toHaveLength(needed);
    expect(() => packText(ids, 'Bad|Name', noise)).toThrow(RangeError);
  });
});

describe('unpackDiagnostics on a decompression bomb', () => {
  it('reports a text that inflates past MAX_TEXT_BYTES as a problem instead of inflating it', () => {
    // A gigabyte of zeros fits the pool's 1,024 records; it would take the reader's memory (and `kvp diag`'s
    // string) past what it has. A smaller one shows the bound.
    const bomb = packText(ids, 'kernel-log', Buffer.alloc(MAX_TEXT_BYTES + 1))!;
    expect(bomb.length).toBeLessThan(40);
    const [text] = unpackDiagnostics(bomb).texts;
    expect(text!.bytes).toBeUndefined();
    expect(text!.problem).toMatch(/larger than/);
    const fits = unpackDiagnostics(packText(ids, 'kernel-log', Buffer.alloc(1 << 20, 'a'))!).texts[0]!;
    expect(fits.bytes?.length).toBe(1 << 20);
  });
});

describe('timelineRecord', () => {
  it('is one record within the limits whose fields read back in order, separators in values made harmless', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.stringMatching(/^[a-z_]{1,20}$/), fc.string({ maxLength: 20 })), { maxLength: 12 }), (fields) => {
        const record = timelineRecord(ids, fields);
        withinLimits([record]);
        const [timeline] = unpackDiagnostics([record]).timelines;
        expect(timeline!.vmId).toBe(VM);
        expect(timeline!.fields.map(([k]) => k)).toEqual(fields.map(([k]) => k));
        for (const [, v] of timeline!.fields) expect(v).not.toMatch(/[|=\n]/);
      }),
    );
  });
});
