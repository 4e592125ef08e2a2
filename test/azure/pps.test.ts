import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { normalizePpsType, pollErrorKind, poolType, shouldLogPoll } from '../../src/azure/pps.js';
import { failure } from '../../src/core/errors.js';

describe('the pool type', () => {
  it('accepts every spelling of the four documented types and calls anything else Unknown', () => {
    expect(['None', 'running', 'SAVABLE', 'PreprovisionedOSDisk', '', '  Running '].map(normalizePpsType)).toEqual([
      'None', 'Running', 'Savable', 'PreprovisionedOSDisk', 'None', 'Running',
    ]);
    expect(normalizePpsType('Hibernated')).toBe('Unknown');
    expect(normalizePpsType(null)).toBe('None');
  });

  it('takes Running from either source, and a type it cannot serve over Running whichever source says it', () => {
    expect(poolType('Running', 'None')).toEqual({ type: 'Running', raw: 'Running', source: 'imds' });
    expect(poolType('None', 'Running')).toEqual({ type: 'Running', raw: 'Running', source: 'media' });
    expect(poolType('Running', 'Savable')).toEqual({ type: 'Savable', raw: 'Savable', source: 'media' });
    expect(poolType('Frozen', 'Running')).toMatchObject({ type: 'Unknown', raw: 'Frozen', source: 'imds' });
    expect(poolType(undefined, null)).toMatchObject({ type: 'None' });
  });
});

describe('the logging policy of the wait for reuse (docs/protocol.md#reprovisiondata)', () => {
  it('logs attempts 1, 2, 4, 8, … while the error stays the same', () => {
    const logged = Array.from({ length: 70 }, (_, i) => i + 1).filter((n) => shouldLogPoll(n, 'HTTP_STATUS:404', n === 1 ? null : 'HTTP_STATUS:404'));
    expect(logged).toEqual([1, 2, 4, 8, 16, 32, 64]);
  });

  it('logs any attempt whose error kind differs from the previous one', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1_000_000 }), fc.string(), fc.string(), (attempt, kind, previous) => {
        fc.pre(kind !== previous);
        expect(shouldLogPoll(attempt, kind, previous)).toBe(true);
      }),
    );
  });

  it('keeps a wait of a day under a few dozen lines when nothing changes', () => {
    let lines = 0;
    for (let n = 1; n <= 86_400; n++) if (shouldLogPoll(n, 'HTTP_STATUS:404', n === 1 ? null : 'HTTP_STATUS:404')) lines++;
    expect(lines).toBe(17);
  });

  it('tells kinds apart by code and HTTP status', () => {
    expect(pollErrorKind(failure('HTTP_STATUS', [['endpoint', 'x'], ['status', '404']]))).toBe('HTTP_STATUS:404');
    expect(pollErrorKind(failure('HTTP_STATUS', [['status', '410']]))).toBe('HTTP_STATUS:410');
    expect(pollErrorKind(failure('HTTP_TRANSPORT', [['error', 'connect ECONNREFUSED']]))).toBe('HTTP_TRANSPORT');
  });
});
