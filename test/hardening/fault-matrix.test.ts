/**
 * The fault matrix: the built agent against IMDS and a wireserver that misbehave in every listed way.
 * Each row must end in its expected report and exit code within its deadline, without a crash and without a
 * process left behind. The rows and what was observed go to test-output/reliability.json for the docs table.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { arch, cpus, hostname, platform, release } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { IMDS_CASES, WIRESERVER_CASES, type Expected, type FaultCase } from './fault-cases.js';
import { runFaultCase, type Observed } from './fault-run.js';

interface Row {
  service: string;
  fault: string;
  expected: Expected;
  observed: Observed;
  pass: boolean;
}

const rows: Row[] = [];

afterAll(() => {
  mkdirSync('test-output', { recursive: true });
  const machine = `${hostname()} (${platform()} ${release()} ${arch()}, ${cpus().length}× ${cpus()[0]?.model ?? 'cpu'}, node ${process.version})`;
  writeFileSync('test-output/reliability.json', `${JSON.stringify({ date: new Date().toISOString(), machine, rows }, null, 2)}\n`);
});

function title(c: FaultCase): string {
  const e = c.expected;
  const outcome = e.result === 'provisioned' ? 'provisions and exits 0' : `fails with '${e.reason}' and exits ${e.exitCode}`;
  return `${c.fault}: ${outcome} within ${e.maxMs} ms, leaving no process behind`;
}

function check(c: FaultCase, observed: Observed): void {
  const e = c.expected;
  expect(observed.signal).toBeNull();
  expect([0, 1, 78]).toContain(observed.exitCode);
  expect(observed.crashLines).toEqual([]);
  expect(observed.leftovers).toEqual([]);
  expect(observed.redirectTargetHits).toBe(0);
  expect({ result: observed.result, reason: observed.reason ?? null, exitCode: observed.exitCode }).toEqual({
    result: e.result,
    reason: e.reason,
    exitCode: e.exitCode,
  });
  expect(observed.ms).not.toBeNull();
  expect(observed.ms!).toBeLessThanOrEqual(e.maxMs);
  if (e.attempts === 'one') expect(observed.attempts).toBe(1);
  if (e.attempts === 'several') expect(observed.attempts).toBeGreaterThan(1);
  if (c.service === 'imds') {
    expect(observed.reportedReason).toBe(e.reason);
    if (e.lastError !== undefined) expect(observed.lastError).toBe(e.lastError);
    if (e.status !== undefined) expect(observed.status).toBe(e.status);
    for (const [key, value] of Object.entries(e.data ?? {})) expect(observed.reportFields?.[key], key).toBe(value);
    expect(observed.markers).toEqual([]);
  } else {
    expect(observed.markers).toEqual([e.result === 'provisioned' ? 'provisioned' : 'report-pending']);
  }
}

function matrix(cases: FaultCase[]): void {
  for (const c of cases) {
    it(title(c), async () => {
      const observed = await runFaultCase(c);
      const row: Row = { service: c.service, fault: c.fault, expected: c.expected, observed, pass: false };
      rows.push(row);
      check(c, observed);
      row.pass = true;
    });
  }
}

describe.concurrent('IMDS that misbehaves', () => matrix(IMDS_CASES));

describe.concurrent('a wireserver that misbehaves when Ready is reported', () => matrix(WIRESERVER_CASES));
