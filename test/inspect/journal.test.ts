import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { InspectionEvent } from 'xstate';
import { createJournal, edgeKey, latestJournal, readJournal, type JournalLine } from '../../src/inspect/journal.js';
import { createActor, fromPromise, toPromise } from 'xstate';
import { provisioningMachine } from '../../machines/provisioning-machine.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { BootstateError } from '../../src/core/errors.js';
import { SECRET, fixtureMachine, runMachine } from './fixtures.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bootstate-journal-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** What the inspection stream itself says, macrostep by macrostep, for the root actor. */
function observedMacrosteps(events: InspectionEvent[]): Array<{ event: string; value: unknown; transitions: string[] }> {
  const steps: Array<{ event: string; value: unknown; transitions: string[] }> = [];
  let taken: string[] = [];
  for (const event of events) {
    if (event.actorRef.sessionId !== event.rootId) continue;
    if (event.type === '@xstate.microstep') taken.push(...event._transitions.map((t) => edgeKey(t.source, t)));
    if (event.type === '@xstate.snapshot') {
      steps.push({ event: event.event.type, value: (event.snapshot as unknown as { value: unknown }).value, transitions: taken });
      taken = [];
    }
  }
  return steps;
}

describe('run journal', () => {
  it('records the run’s own timer values on the first line and whenever they change', async () => {
    const journal = createJournal({ dir, vmId: 'vm-1' });
    await runMachine(fixtureMachine({ failures: 1 }), [journal.inspect]);
    journal.close();
    const lines = readJournal(journal.path);
    expect(lines[0]!.timers).toEqual({ retryInterval: 5, totalDeadline: 2000 });
    expect(lines.slice(1).every((line) => line.timers === undefined)).toBe(true);
  });

  it('records the cause of a failed provisioning in words, and the timers its config set', async () => {
    const config = structuredClone(DEFAULT_CONFIG);
    config.imds.retry_interval_secs = 0.01;
    config.imds.total_retry_timeout_secs = 0.05;
    const ok = <T>(value: T) => fromPromise(async () => value);
    const actors = {
      reportHealth: ok(undefined),
      readMedia: ok(null),
      regenerateHostKeys: ok(undefined),
      fetchMetadata: fromPromise(async () => {
        throw new BootstateError('HTTP_STATUS', `IMDS answered 503, password=${SECRET}`, { data: [['error', 'http status error'], ['status', '503']], retryable: true });
      }),
    };
    const journal = createJournal({ dir, vmId: 'vm-1' });
    const actor = createActor(provisioningMachine.provide({ actors: actors as never }), { input: { config }, inspect: journal.inspect });
    actor.start();
    await toPromise(actor);
    journal.close();
    const lines = readJournal(journal.path);
    // The config is the chart's input: its timers are the first line's.
    expect(lines[0]!.timers).toMatchObject({ imdsRetryInterval: 10, imdsTotalTimeout: 50 });
    expect(lines.at(-1)!.output).toEqual({
      result: 'failed',
      reason: 'operation timed out',
      code: 'TIMEOUT',
      exitCode: 1,
      cause: 'IMDS did not answer usefully within 0.05 s; last error: http status error',
    });
    expect(fs.readFileSync(journal.path).includes(SECRET)).toBe(false);
  });

  it('writes one line per macrostep with exactly the transitions the machine took', async () => {
    const journal = createJournal({ dir, vmId: 'vm-1' });
    const run = await runMachine(fixtureMachine({ failures: 2 }), [journal.inspect], [{ type: 'NUDGE', token: SECRET }]);
    journal.close();
    const lines = readJournal(journal.path);
    const observed = observedMacrosteps(run.events);
    expect(lines.map((line) => ({ event: line.event, value: line.value, transitions: line.transitions }))).toEqual(observed);
    expect(lines.map((line) => line.seq)).toEqual(lines.map((_, index) => index));
    expect(lines.flatMap((line) => line.transitions)).toContain(
      'firstboot.work.metadata.requesting -> firstboot.work.metadata.backoff on xstate.error.actor.imds [canRetry]',
    );
    expect(lines.flatMap((line) => line.transitions)).toContain('firstboot.work.metadata.validating -> firstboot.work.metadata.done on (always)');
  });

  it('records tags, status and, for the final state, only the allow-listed output', async () => {
    const journal = createJournal({ dir, vmId: 'vm-1' });
    await runMachine(fixtureMachine({ failures: 9 }), [journal.inspect]);
    journal.close();
    const lines = readJournal(journal.path);
    const last = lines[lines.length - 1]!;
    expect(last.value).toBe('failed');
    expect(last.tags).toEqual(['NotReady/ProvisioningFailed']);
    expect(last.status).toBe('done');
    expect(last.output).toEqual({ result: 'failed', reason: 'failed to retrieve instance metadata', exitCode: 1 });
    expect(lines.slice(0, -1).every((line) => line.output === undefined && line.status === 'active')).toBe(true);
    expect(Object.keys(last).sort()).toEqual(['event', 'machine', 'output', 'seq', 'status', 't', 'tags', 'transitions', 'value']);
  });

  it('creates runs/ with mode 0700 and a 0600 journal named by start time and VM id', () => {
    const journal = createJournal({ dir, vmId: 'd0c5a4e2-1b7f-4c1e-9a51-3f0e2a9b8c7d', now: () => new Date('2024-05-01T12:30:00.123Z') });
    journal.close();
    expect(journal.path).toBe(path.join(dir, 'runs', '2024-05-01T12-30-00.123Z-d0c5a4e2-1b7f-4c1e-9a51-3f0e2a9b8c7d.jsonl'));
    expect(fs.statSync(path.join(dir, 'runs')).mode & 0o777).toBe(0o700);
    expect(fs.statSync(journal.path).mode & 0o777).toBe(0o600);
  });

  it('keeps only the newest N journals', () => {
    const paths: string[] = [];
    for (let i = 0; i < 7; i++) {
      const journal = createJournal({ dir, vmId: 'vm', keep: 3, now: () => new Date(Date.UTC(2024, 0, 1, 0, 0, i)) });
      journal.close();
      paths.push(journal.path);
    }
    expect(fs.readdirSync(path.join(dir, 'runs')).sort()).toEqual(paths.slice(-3).map((p) => path.basename(p)));
    expect(latestJournal(dir)).toBe(paths[6]);
  });

  it('leaves files that are not journals alone when rotating', () => {
    fs.mkdirSync(path.join(dir, 'runs'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'runs', 'notes.txt'), 'keep me');
    for (let i = 0; i < 3; i++) createJournal({ dir, vmId: 'vm', keep: 1, now: () => new Date(Date.UTC(2024, 0, 1, 0, 0, i)) }).close();
    expect(fs.readdirSync(path.join(dir, 'runs')).sort()).toEqual(['2024-01-01T00-00-02.000Z-vm.jsonl', 'notes.txt']);
  });

  it('has no latest journal in an empty data directory', () => {
    expect(latestJournal(dir)).toBeUndefined();
  });

  it('has its lines on disk before the run ends, so a crash keeps them', async () => {
    const journal = createJournal({ dir, vmId: 'vm' });
    const sizes: number[] = [];
    await runMachine(fixtureMachine({ failures: 0 }), [journal.inspect, () => sizes.push(fs.statSync(journal.path).size)]);
    expect(Math.max(...sizes)).toBeGreaterThan(0);
    expect(readJournal(journal.path).length).toBeGreaterThan(3);
  });

  it('drops a torn last line instead of failing to read', async () => {
    const journal = createJournal({ dir, vmId: 'vm' });
    await runMachine(fixtureMachine({ failures: 0 }), [journal.inspect]);
    journal.close();
    const whole = readJournal(journal.path);
    fs.appendFileSync(journal.path, '{"t":"2024-');
    expect(readJournal(journal.path)).toEqual(whole);
  });

  it('stamps events buffered before the journal existed with when they happened', async () => {
    const buffered: Array<[InspectionEvent, Date]> = [];
    let clock = Date.UTC(2024, 0, 1);
    await runMachine(fixtureMachine({ failures: 0 }), [(event) => buffered.push([event, new Date((clock += 1000))])]);
    const journal = createJournal({ dir, vmId: 'vm', now: () => new Date(Date.UTC(2030, 0, 1)) });
    for (const [event, at] of buffered) journal.inspect(event, at);
    journal.close();
    const times = readJournal(journal.path).map((line: JournalLine) => line.t);
    expect(times.every((t) => t.startsWith('2024-01-01'))).toBe(true);
    expect([...times].sort()).toEqual(times);
  });

  it('writes nothing after close', async () => {
    const journal = createJournal({ dir, vmId: 'vm' });
    journal.close();
    await runMachine(fixtureMachine({ failures: 0 }), [journal.inspect]);
    expect(fs.readFileSync(journal.path, 'utf8')).toBe('');
  });
});
