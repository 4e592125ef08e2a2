/**
 * The local fault matrix (docs/local-faults.md): every path bootstate reads or writes, spoiled in every listed way,
 * against the built agent in its own mount namespace. Each row must end in its expected report and exit code within the
 * deadline, with no victim file changed (same bytes, same inode) and no crash. Results go to
 * test-output/local-reliability.json for docs/reliability.md.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { assertNamespaces, canSandbox } from '../e2e/ns.js';
import { DEADLINE_MS, LOCAL_CASES, type Expected, type LocalCase } from './local-fault-cases.js';
import { runLocalCase, type LocalObserved } from './local-fault-run.js';

interface Row {
  path: string;
  fault: string;
  expected: Expected;
  observed: LocalObserved;
  pass: boolean;
}

const rows: Row[] = [];

afterAll(() => {
  mkdirSync('test-output', { recursive: true });
  writeFileSync('test-output/local-reliability.json', `${JSON.stringify({ date: new Date().toISOString(), rows }, null, 2)}\n`);
});

function title(c: LocalCase): string {
  const e = c.expected;
  const outcome = e.result === 'provisioned' ? 'provisions, reports Ready' : `fails with '${e.reason}'${e.reports.length ? ', reports ProvisioningFailed' : ', reports nothing'}`;
  return `${c.target.name} × ${c.fault}: ${outcome}, exits ${e.exitCode}, no victim changed`;
}

function check(c: LocalCase, o: LocalObserved): void {
  const e = c.expected;
  expect(o.signal).toBeNull();
  expect(o.crashLines).toEqual([]);
  expect({ result: o.result, reason: o.reason, exitCode: o.exitCode, reports: o.reports }).toEqual({
    result: e.result,
    reason: e.reason,
    exitCode: e.exitCode,
    reports: e.reports,
  });
  if (e.kvpReport === 'written') expect(o.kvpReport).toBe('written');
  if (e.kvpReport === 'failed') expect(o.kvpReport).toMatch(/^failed: /);
  if (e.sinkOff) expect(o.sinksOff).toContain(e.sinkOff);
  // Each sink turned off is told once, on the sinks still working (stderr here).
  expect(o.sinkNotes).toBe(o.sinksOff.filter((sink) => sink !== 'stderr').length);
  expect(o.victimsChanged).toEqual([]);
  expect(o.ms).toBeLessThanOrEqual(DEADLINE_MS);
}

describe.skipIf(!canSandbox).concurrent('the local fault matrix', () => {
  it('has at least 70 cases', () => {
    assertNamespaces();
    expect(LOCAL_CASES.length).toBeGreaterThanOrEqual(70);
  });
  for (const c of LOCAL_CASES) {
    it(title(c), async () => {
      const observed = await runLocalCase(c);
      const row: Row = { path: c.target.name, fault: c.fault, expected: c.expected, observed, pass: false };
      rows.push(row);
      check(c, observed);
      row.pass = true;
    }, 180_000);
  }
});
