import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { isUnhealthy, monitorInput, nextStreak, rolledUpObservation, versionsObservation } from '../../machines/monitor.js';

describe('failure streaks', () => {
  it('start at the first failure and keep that time while failures continue', () => {
    expect(nextStreak(null, { ok: false, at: 60_000 })).toBe(60_000);
    expect(nextStreak(60_000, { ok: false, at: 120_000 })).toBe(60_000);
  });

  it('end with any success', () => {
    expect(nextStreak(60_000, { ok: true, at: 180_000 })).toBeNull();
    expect(nextStreak(null, { ok: true, at: 0 })).toBeNull();
  });

  it('always start at the earliest failure of an unbroken run', () => {
    fc.assert(
      fc.property(fc.array(fc.boolean(), { maxLength: 50 }), (oks) => {
        let streak: number | null = null;
        let expected: number | null = null;
        oks.forEach((ok, i) => {
          streak = nextStreak(streak, { ok, at: i * 1000 });
          expected = ok ? null : (expected ?? i * 1000);
        });
        expect(streak).toBe(expected);
      }),
    );
  });
});

describe('roll-up', () => {
  it('keeps a signal healthy while its failure streak is younger than the window', () => {
    expect(isUnhealthy(60_000, 359_999, 300_000)).toBe(false);
    expect(isUnhealthy(null, 10_000_000, 300_000)).toBe(false);
  });

  it('turns a signal unhealthy once the streak is exactly as old as the window', () => {
    expect(isUnhealthy(60_000, 360_000, 300_000)).toBe(true);
  });

  it('reports a rolled-up observation with an empty description', () => {
    expect(rolledUpObservation('InstanceMetadataHeartbeat', 0, { ok: false, value: 'Missing field: [network]', at: 180_000 }, 180_000, 'Missing field: [network]')).toEqual({
      ObservationName: 'InstanceMetadataHeartbeat',
      IsHealthy: false,
      Description: '',
      Value: 'Missing field: [network]',
    });
  });

  it('reports versions as measured, without a roll-up', () => {
    expect(versionsObservation({ ok: false, value: 'HTTP status 500', at: 0, available: false }).IsHealthy).toBe(false);
  });

  it('takes periods and windows from configuration in milliseconds', () => {
    expect(monitorInput(DEFAULT_CONFIG.monitor, true)).toEqual({
      once: true,
      saved: null,
      heartbeatPeriodMs: 60_000,
      versionsPeriodMs: 60_000,
      imdsPeriodMs: 60_000,
      heartbeatRollupMs: 300_000,
      imdsRollupMs: 180_000,
    });
  });
});
