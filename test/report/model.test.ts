/**
 * The `bootstate report` chart (machines/report.ts) against its oracle (oracle.ts): every path the oracle can take
 * — accepted, refused, retried, timed out while waiting or while a POST is in flight — played on the interpreter
 * with a gated POST and a SimulatedClock, comparing the POSTs made, the POST in flight and the output at each step.
 */
import { describe, expect, it } from 'vitest';
import { reportMachine } from '../../machines/report.js';
import { firstDisagreement, reportPaths } from './check.js';

describe('the report chart against its oracle', () => {
  it('reaches every state of the oracle, from accepted at once to a deadline during a POST', () => {
    const paths = reportPaths();
    expect(paths.length).toBeGreaterThanOrEqual(8);
    const ends = new Set(paths.map((p) => p.at(-1)!.type));
    expect([...ends].sort()).toEqual(['accepted', 'failed', 'time']);
  });

  it('does on every path what the oracle says', async () => {
    expect(await firstDisagreement(reportMachine)).toBeNull();
  });
});
