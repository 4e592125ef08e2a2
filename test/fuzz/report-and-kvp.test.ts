/**
 * The two encoders every failure passes through on its way to the host: the provisioning report line and the
 * KVP pool record. Hostile supporting data must still give one bounded line; hostile pool bytes must decode
 * or be refused with a reason.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeReport, encodeFailureReport, REPORT_MAX_BYTES } from '../../src/azure/report.js';
import { failure, KINDS, type ErrorCode } from '../../src/core/errors.js';
import { decodeRecords, encodeRecord, RECORD_BYTES, SAFE_KEY_BYTES, SAFE_VALUE_BYTES, sanitizeText, truncateUtf8 } from '../../src/kvp/codec.js';
import { FUZZ_RUNS, hostileString, outcome, params, timeoutFor } from './support.js';

const data = fc.array(fc.tuple(hostileString(), hostileString()), { maxLength: 6 });

describe(`report and KVP encoding on ${FUZZ_RUNS} inputs each`, () => {
  it('encodes any failure as one line of at most 1022 bytes that decodes to result, reason and agent first', { timeout: timeoutFor(5) }, () => {
    fc.assert(
      fc.property(fc.constantFrom(...(Object.keys(KINDS) as ErrorCode[])), data, hostileString(), (code, pairs, vmId) => {
        const line = encodeFailureReport(failure(code, pairs), { vmId, timestamp: new Date(0) });
        expect(Buffer.byteLength(line)).toBeLessThanOrEqual(REPORT_MAX_BYTES);
        expect(line).not.toMatch(/[\r\n]/);
        const decoded = decodeReport(line);
        expect(decoded.slice(0, 2)).toEqual([['result', 'error'], ['reason', KINDS[code].reason]]);
        expect(decoded[2]![0]).toBe('agent');
        expect(decoded.at(-1)).toEqual(['documentation_url', 'https://aka.ms/linuxprovisioningerror']);
      }),
      params,
    );
  });

  it('decodes any pool bytes to records or refuses them with KVP_FAILED', { timeout: timeoutFor(5) }, () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: RECORD_BYTES * 3 + 7 }), (bytes) => {
        const result = outcome(() => decodeRecords(Buffer.from(bytes)));
        if (!result.ok) return void expect(result.error.code).toBe('KVP_FAILED');
        expect(result.value).toHaveLength(Math.floor(bytes.length / RECORD_BYTES));
      }),
      params,
    );
  });

  it('round-trips any sanitised, truncated key and value through one 2560-byte record', { timeout: timeoutFor(5) }, () => {
    fc.assert(
      fc.property(hostileString(), hostileString(), (k, v) => {
        const key = truncateUtf8(sanitizeText(k), SAFE_KEY_BYTES).replace(/\0+$/, '') || 'k';
        const value = truncateUtf8(sanitizeText(v), SAFE_VALUE_BYTES);
        const record = encodeRecord({ key, value });
        expect(record.length).toBe(RECORD_BYTES);
        expect(decodeRecords(record)).toEqual([{ key, value }]);
      }),
      params,
    );
  });
});
