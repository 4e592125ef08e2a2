import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DOCUMENTATION_URL,
  REPORT_MAX_BYTES,
  decodeReport,
  encodeFailureReport,
  encodeSuccessReport,
  formatTimestamp,
} from '../../src/azure/report.js';
import { type Failure, type SupportingData, failure } from '../../src/core/errors.js';
import { AGENT } from '../../src/core/version.js';

const vmId = 'd0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8';
const timestamp = new Date('2025-08-11T18:45:41.5Z');
const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

const key = fc.stringMatching(/^[a-z][a-z0-9_]{0,15}$/);
const value = fc.string({ unit: fc.oneof(fc.constantFrom('|', '"', '\r', '\n', '=', ' ', 'é', '€', '😀'), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })), maxLength: 400 });
const data = fc.array(fc.tuple(key, value), { maxLength: 8 }) as fc.Arbitrary<SupportingData>;
const uuid = fc.uuid();
const date = fc.date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true });
const code = fc.constantFrom<Failure['code']>('HTTP_STATUS', 'UNHANDLED', 'IMDS_INVALID', 'HOSTNAME_FAILED');

describe('encodeSuccessReport', () => {
  it('lists result, agent, pps_type, vm_id and timestamp in that order', () => {
    expect(encodeSuccessReport({ vmId, timestamp })).toBe(
      `result=success|agent=${AGENT}|pps_type=None|vm_id=${vmId}|timestamp=2025-08-11T18:45:41.500+00:00`,
    );
  });

  it('appends extra data after the timestamp', () => {
    const line = encodeSuccessReport({ vmId, timestamp, extra: [['duration_ms', '1234']] });
    expect(line.endsWith('|timestamp=2025-08-11T18:45:41.500+00:00|duration_ms=1234')).toBe(true);
  });
});

describe('encodeFailureReport', () => {
  it('lists reason, agent, supporting data in order, then the fixed tail', () => {
    const url = 'http://168.63.129.16/provisioning/health';
    const line = encodeFailureReport(failure('HTTP_STATUS', [['endpoint', url], ['status', '404']]), { vmId, timestamp });
    expect(line).toBe(
      `result=error|reason=http status error|agent=${AGENT}|endpoint=${url}|status=404|pps_type=None|vm_id=${vmId}` +
        `|timestamp=2025-08-11T18:45:41.500+00:00|documentation_url=${DOCUMENTATION_URL}`,
    );
  });

  it('quotes a field containing | or " and doubles embedded quotes', () => {
    const line = encodeFailureReport(failure('UNHANDLED', [['error', 'a|b'], ['detail', 'say "hi"'], ['plain', "it's"]]), {
      vmId,
      timestamp,
    });
    expect(line).toContain(`|"error=a|b"|"detail=say ""hi"""|plain=it's|`);
  });

  it('replaces CR and LF with spaces so the report stays on one line', () => {
    const line = encodeFailureReport(failure('UNHANDLED', [['error', 'boom\r\n\nCaused by:\n  x']]), { vmId, timestamp });
    expect(line).not.toMatch(/[\r\n]/);
    expect(line).toContain('|error=boom   Caused by:   x|');
  });

  it('cuts the longest supporting value first, at a character boundary, marked with …', () => {
    const long = '€'.repeat(600);
    const line = encodeFailureReport(failure('UNHANDLED', [['short', 'kept whole'], ['error', long]]), { vmId, timestamp });
    expect(bytes(line)).toBeLessThanOrEqual(REPORT_MAX_BYTES);
    const pairs = new Map(decodeReport(line));
    expect(pairs.get('short')).toBe('kept whole');
    expect(pairs.get('error')).toMatch(/^€+…$/);
    expect(pairs.get('documentation_url')).toBe(DOCUMENTATION_URL);
  });

  it('keeps reason and vm_id bounded so the required fields always fit', () => {
    const hostile: Failure = { ...failure('UNHANDLED', []), reason: 'r'.repeat(5000) };
    const line = encodeFailureReport(hostile, { vmId: 'v'.repeat(5000), timestamp });
    expect(bytes(line)).toBeLessThanOrEqual(REPORT_MAX_BYTES);
    expect(decodeReport(line).map(([k]) => k)).toEqual(['result', 'reason', 'agent', 'pps_type', 'vm_id', 'timestamp', 'documentation_url']);
  });
});

describe('formatTimestamp', () => {
  it('writes RFC 3339 UTC with milliseconds and a +00:00 offset', () => {
    expect(formatTimestamp(new Date(Date.UTC(2025, 0, 2, 3, 4, 5, 6)))).toBe('2025-01-02T03:04:05.006+00:00');
  });
});

describe('decodeReport', () => {
  it('reads a report written by azure-init', () => {
    const line =
      'result=error|reason=http status error|agent=Azure-Init/0.1.1|endpoint=http://168.63.129.16/provisioning/health|status=404|pps_type=None';
    expect(decodeReport(line)).toEqual([
      ['result', 'error'],
      ['reason', 'http status error'],
      ['agent', 'Azure-Init/0.1.1'],
      ['endpoint', 'http://168.63.129.16/provisioning/health'],
      ['status', '404'],
      ['pps_type', 'None'],
    ]);
  });

  it('keeps everything after the first = in the value', () => {
    expect(decodeReport('a=b=c|"d=e|f"')).toEqual([
      ['a', 'b=c'],
      ['d', 'e|f'],
    ]);
  });
});

describe('report properties', () => {
  const oneLine = (s: string) => s.replace(/[\r\n]/g, ' ');

  it('round-trips supporting data that fits, with CR/LF turned into spaces', () => {
    fc.assert(
      fc.property(code, fc.array(fc.tuple(key, fc.string({ maxLength: 40 })), { maxLength: 5 }), uuid, date, (c, d, id, at) => {
        const line = encodeFailureReport(failure(c, d as SupportingData), { vmId: id, timestamp: at });
        const decoded = decodeReport(line);
        expect(decoded.slice(3, 3 + d.length)).toEqual(d.map(([k, v]) => [k, oneLine(v)]));
        expect(decoded[1]).toEqual(['reason', failure(c, []).reason]);
      }),
    );
  });

  it('never exceeds 1022 UTF-8 bytes', () => {
    fc.assert(
      fc.property(code, data, uuid, date, (c, d, id, at) => {
        expect(bytes(encodeFailureReport(failure(c, d), { vmId: id, timestamp: at }))).toBeLessThanOrEqual(REPORT_MAX_BYTES);
        expect(bytes(encodeSuccessReport({ vmId: id, timestamp: at, extra: d }))).toBeLessThanOrEqual(REPORT_MAX_BYTES);
      }),
    );
  });

  it('always carries every required field, unchanged and in order', () => {
    fc.assert(
      fc.property(code, data, uuid, date, (c, d, id, at) => {
        const decoded = decodeReport(encodeFailureReport(failure(c, d), { vmId: id, timestamp: at }));
        expect(decoded.slice(0, 3)).toEqual([
          ['result', 'error'],
          ['reason', failure(c, []).reason],
          ['agent', AGENT],
        ]);
        expect(decoded.slice(-4)).toEqual([
          ['pps_type', 'None'],
          ['vm_id', id],
          ['timestamp', formatTimestamp(at)],
          ['documentation_url', DOCUMENTATION_URL],
        ]);
      }),
    );
  });

  it('keeps each supporting value whole or as a marked prefix of itself', () => {
    fc.assert(
      fc.property(data, uuid, (d, id) => {
        const decoded = decodeReport(encodeFailureReport(failure('UNHANDLED', d), { vmId: id, timestamp })).slice(3, -4);
        for (const [k, v] of decoded) {
          const original = d.find(([ok, ov]) => ok === k && (oneLine(ov) === v || (v.endsWith('…') && oneLine(ov).startsWith(v.slice(0, -1)))));
          expect(original).toBeDefined();
        }
      }),
    );
  });

  it('is deterministic', () => {
    fc.assert(
      fc.property(code, data, uuid, date, (c, d, id, at) => {
        const copy = d.map(([k, v]) => [k, v]) as SupportingData;
        expect(encodeFailureReport(failure(c, d), { vmId: id, timestamp: at })).toBe(
          encodeFailureReport(failure(c, copy), { vmId: id, timestamp: at }),
        );
      }),
    );
  });
});
