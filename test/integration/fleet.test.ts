/**
 * `bootstate fleet` over real runs: the built agent run against the fake fabric on loopback once per scenario of a
 * mix of faults (test/support/fleet-corpus.ts), the ten journals replicated into 200 with their own VM ids and
 * starts, then the built CLI's view of them checked against the mix: outcomes and failure reasons by count, how
 * many runs reached READY=1 and Ready accepted, a corrupt journal among them named. How fast the view is over
 * 1,000 such runs is bench/fleet.ts's to measure.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetSummary } from '../../src/inspect/fleet-stats.js';
import { countBy } from '../../src/inspect/fleet-stats.js';
import { recordFleet, replicate, type FleetScenario } from '../support/fleet-corpus.js';
import { cli } from './agent.js';

const COPIES = 200;
let base: string;
let fleetDir: string;
let mix: FleetScenario[];

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'bootstate-fleet-it-'));
  const recorded = await recordFleet(join(base, 'recorded'), 1);
  fleetDir = join(base, 'fleet');
  mix = replicate(recorded, fleetDir, COPIES);
  writeFileSync(join(fleetDir, 'zz-corrupt.jsonl'), '{"t":"2026-01-01T00:00:00.000Z","machine":"provisioning"}\nnot json\n{}\n');
}, 120_000);
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('bootstate fleet over recorded runs with mixed faults', () => {
  it('counts outcomes and failure reasons as the mix has them, and names the corrupt journal', async () => {
    const result = await cli(['fleet', '--json', fleetDir]);
    expect(result.code, result.stderr).toBe(0);
    const summary = JSON.parse(result.stdout) as FleetSummary;
    expect(summary.runs).toBe(COPIES);
    expect(summary.outcomes).toEqual(countBy(mix.map((s) => s.outcome)));
    const failed = mix.filter((s) => s.reason !== undefined);
    expect(summary.reasons.map(({ key, count }) => ({ key, count }))).toEqual(countBy(failed.map((s) => s.reason!)));
    expect(summary.ok).toBe(mix.filter((s) => s.outcome === 'provisioned').length);
    expect(summary.times.ready.n).toBe(mix.filter((s) => s.ready).length);
    expect(summary.times.accepted.n).toBe(mix.filter((s) => s.accepted).length);
    expect(summary.times.accepted.p50).toBeLessThanOrEqual(summary.times.accepted.max);
    expect(summary.unreadable).toEqual([{ source: join(fleetDir, 'zz-corrupt.jsonl'), why: 'line 2 is not JSON' }]);
    // The IMDS retries of the 503-forever runs are where the time goes.
    expect(summary.states.map((s) => s.state)).toContain('provisioning.work.gathering.imds.fetching.backoff');
  });

  it('prints the text view and writes one self-contained HTML page', async () => {
    const page = join(base, 'fleet.html');
    const result = await cli(['fleet', fleetDir, '-o', page]);
    expect(result.code, result.stderr).toBe(0);
    const provisioned = mix.filter((s) => s.outcome === 'provisioned').length;
    expect(result.stdout).toMatch(new RegExp(`^${COPIES} runs from ${COPIES + 1} sources: ${provisioned} ok .*1 unreadable`));
    expect(result.stdout).toMatch(/\n {2}provisioned +\d+ +\d+\.\d%\n/);
    expect(result.stdout).toMatch(/READY=1 \(logins may start\) +\d+ +\d/);
    expect(result.stdout).toContain('slowest step: ');
    const html = readFileSync(page, 'utf8');
    expect(html).toContain(`${COPIES} runs: ${provisioned} ok`);
    expect(html).toContain('<svg id="ready-histogram"');
    expect(html).not.toMatch(/\s(src|href)=|<script/);
  });

  it('exits 1 when no journal could be read, naming each path', async () => {
    const result = await cli(['fleet', join(base, 'nowhere'), join(fleetDir, 'zz-corrupt.jsonl')]);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(`${join(base, 'nowhere')}: no such file or directory`);
  });
});
