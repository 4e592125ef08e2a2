/**
 * The fleet view's arithmetic against straightforward references: percentiles by their definition (nearest rank),
 * counts by counting, and every total of the aggregate against a loop over the runs.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { aggregateFleet, countBy, distributionOf, percentile, type FleetRun } from '../../src/inspect/fleet-stats.js';

const times = fc.array(fc.integer({ min: 0, max: 10_000_000 }), { maxLength: 300 });
const percent = fc.double({ min: 0, max: 100, noNaN: true });

/** The reference: sort a copy with a comparator, take the value at rank ⌈p·n/100⌉ (at least 1). */
function referencePercentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(1, Math.ceil((p * sorted.length) / 100)) - 1]!;
}

const STATES = ['a.requesting', 'a.backoff', 'b.writing', 'c.sending'];
const run = fc.record({
  outcome: fc.constantFrom('provisioned', 'failed', 'incomplete', 'already-provisioned'),
  reason: fc.option(fc.constantFrom('operation timed out', 'http status error', 'invalid IMDS metadata'), { nil: undefined }),
  cause: fc.option(fc.constantFrom('x (status: 503)', 'y (status: 403)', 'z'), { nil: undefined }),
  readyMs: fc.option(fc.nat(100_000), { nil: undefined }),
  acceptedMs: fc.option(fc.nat(100_000), { nil: undefined }),
  totalMs: fc.nat(200_000),
  states: fc.dictionary(fc.constantFrom(...STATES), fc.nat(50_000)),
  truncated: fc.boolean(),
});
const fleet = fc.array(run, { maxLength: 120 }).map((runs) =>
  runs.map(
    (r, i): FleetRun => ({
      ...r,
      source: `run-${i}.jsonl`,
      vmId: `vm-${i}`,
      startedAt: '2026-01-01T00:00:00.000Z',
      ok: r.outcome === 'provisioned' || r.outcome === 'already-provisioned',
    }),
  ),
);

describe('percentiles', () => {
  it('are the nearest rank by definition: a value of the list, with at least p% at or below it and fewer below', () => {
    fc.assert(
      fc.property(times.filter((v) => v.length > 0), percent, (values, p) => {
        const sorted = [...values].sort((a, b) => a - b);
        const got = percentile(sorted, p);
        const rank = Math.max(1, Math.ceil((p * values.length) / 100));
        expect(values).toContain(got);
        expect(values.filter((v) => v <= got).length).toBeGreaterThanOrEqual(rank);
        expect(values.filter((v) => v < got).length).toBeLessThan(rank);
      }),
    );
  });

  it('distributionOf agrees with the reference for p50, p90, p99 and the maximum, whatever the order', () => {
    fc.assert(
      fc.property(times, (values) => {
        const copy = [...values];
        const d = distributionOf(values);
        expect(values).toEqual(copy);
        expect(d.n).toBe(values.length);
        if (values.length === 0) {
          expect([d.p50, d.p90, d.p99, d.max].every(Number.isNaN)).toBe(true);
          return;
        }
        expect([d.p50, d.p90, d.p99]).toEqual([50, 90, 99].map((p) => referencePercentile(values, p)));
        expect(d.max).toBe(Math.max(...values));
        expect(d.p50 <= d.p90 && d.p90 <= d.p99 && d.p99 <= d.max).toBe(true);
      }),
    );
  });

  it('on a known list: 1..100 gives 50, 90, 99, 100; one value is every percentile', () => {
    const hundred = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(distributionOf(hundred)).toEqual({ n: 100, p50: 50, p90: 90, p99: 99, max: 100 });
    expect(distributionOf([7])).toEqual({ n: 1, p50: 7, p90: 7, p99: 7, max: 7 });
  });
});

describe('counts', () => {
  it('countBy counts each key as a loop does, most frequent first, ties by key', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom('a', 'b', 'c', 'd', 'e')), (keys) => {
        const counted = countBy(keys);
        for (const { key, count } of counted) expect(count).toBe(keys.filter((k) => k === key).length);
        expect(new Set(counted.map((c) => c.key))).toEqual(new Set(keys));
        for (let i = 1; i < counted.length; i++) {
          const [a, b] = [counted[i - 1]!, counted[i]!];
          expect(a.count > b.count || (a.count === b.count && a.key < b.key)).toBe(true);
        }
      }),
    );
  });

  it('the aggregate of any fleet agrees with counting its runs one by one', () => {
    fc.assert(
      fc.property(fleet, (runs) => {
        const summary = aggregateFleet(runs);
        expect(summary.runs).toBe(runs.length);
        expect(summary.ok).toBe(runs.filter((r) => r.ok).length);
        for (const { key, count } of summary.outcomes) expect(count).toBe(runs.filter((r) => r.outcome === key).length);
        expect(summary.outcomes.reduce((sum, o) => sum + o.count, 0)).toBe(runs.length);
        const failed = runs.filter((r) => !r.ok);
        expect(summary.reasons.reduce((sum, r) => sum + r.count, 0)).toBe(failed.length);
        for (const reason of summary.reasons) {
          const mine = failed.filter((r) => (r.reason ?? r.outcome) === reason.key);
          expect(reason.count).toBe(mine.length);
          expect(reason.causes.reduce((sum, c) => sum + c.count, 0)).toBe(mine.filter((r) => r.cause !== undefined).length);
        }
        const ready = runs.flatMap((r) => (r.readyMs === undefined ? [] : [r.readyMs]));
        expect(summary.times.ready.n).toBe(ready.length);
        if (ready.length) expect(summary.times.ready.p90).toBe(referencePercentile(ready, 90));
        expect(summary.times.accepted.n).toBe(runs.filter((r) => r.acceptedMs !== undefined).length);
        expect(summary.truncated).toEqual(runs.filter((r) => r.truncated).map((r) => r.source));
        for (const state of summary.states) {
          const spent = runs.flatMap((r) => (state.state in r.states ? [r.states[state.state]!] : []));
          expect(state.n).toBe(spent.length);
          expect(state.totalMs).toBe(spent.reduce((sum, ms) => sum + ms, 0));
          expect(state.max).toBe(Math.max(...spent));
        }
        expect(summary.states.reduce((sum, s) => sum + s.slowestIn, 0)).toBe(runs.filter((r) => Object.keys(r.states).length > 0).length);
        for (let i = 1; i < summary.states.length; i++) expect(summary.states[i - 1]!.totalMs).toBeGreaterThanOrEqual(summary.states[i]!.totalMs);
      }),
    );
  });
});
