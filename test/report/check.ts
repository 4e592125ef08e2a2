/**
 * Plays every path the report oracle (oracle.ts) can take — accepted, refused, retried, timed out while waiting or
 * while a POST is in flight — against a report chart (the real one or a mutant) with a gated `post` and a
 * SimulatedClock, comparing after each event the POSTs made, the POST in flight and the output.
 */
import { createActor, fromPromise, SimulatedClock, type AnyStateMachine } from 'xstate';
import { BootstateError, toFailure } from '../../src/core/errors.js';
import { ReportOracle } from './oracle.js';
import { oracleChecks } from '../support/oracle-paths.js';

const INPUT = { retryIntervalMs: 1_000, totalTimeoutMs: 3_500 };
const RETRYABLE = new BootstateError('HTTP_STATUS', 'wireserver answered 503', { retryable: true });
const REFUSED = new BootstateError('HTTP_STATUS', 'wireserver answered 400');

type Step = { type: 'accepted' } | { type: 'failed'; error: unknown } | { type: 'time'; to: number };

/** Every (oracle state, event) pair reached once by its shortest path; no path is a prefix of another. */
export function reportPaths(): Step[][] {
  const paths: Array<{ steps: Step[]; extended: boolean }> = [];
  const seen = new Set<string>();
  let frontier: Array<{ oracle: ReportOracle; path: (typeof paths)[number] | null }> = [{ oracle: new ReportOracle(INPUT.retryIntervalMs, INPUT.totalTimeoutMs), path: null }];
  while (frontier.length) {
    const next: typeof frontier = [];
    for (const { oracle, path } of frontier) {
      const offers: Step[] = [];
      if (oracle.posting) offers.push({ type: 'accepted' }, { type: 'failed', error: RETRYABLE }, { type: 'failed', error: REFUSED });
      if (oracle.nextDue !== null) offers.push({ type: 'time', to: oracle.nextDue });
      for (const step of offers) {
        const edge = `${oracle.key()} ${JSON.stringify(step)}`;
        if (seen.has(edge)) continue;
        seen.add(edge);
        const after = oracle.clone();
        apply(after, step);
        if (path) path.extended = true;
        const child = { steps: [...(path?.steps ?? []), step], extended: false };
        paths.push(child);
        next.push({ oracle: after, path: child });
      }
    }
    frontier = next;
  }
  return paths.filter((p) => !p.extended).map((p) => p.steps);
}

function apply(oracle: ReportOracle, step: Step) {
  if (step.type === 'accepted') oracle.accepted();
  else if (step.type === 'failed') oracle.failed(step.error);
  else oracle.advanceTo(step.to);
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

async function play(machine: AnyStateMachine, steps: Step[]): Promise<void> {
  const posts: Array<{ signal: AbortSignal; settled: boolean; resolve(): void; reject(e: unknown): void }> = [];
  const post = fromPromise<void, void>(
    ({ signal }) =>
      new Promise<void>((resolve, reject) => {
        const gate = {
          signal,
          settled: false,
          resolve: () => ((gate.settled = true), resolve()),
          reject: (e: unknown) => ((gate.settled = true), reject(e)),
        };
        posts.push(gate);
      }),
  );
  const clock = new SimulatedClock();
  const errors: unknown[] = [];
  const actor = createActor(machine.provide({ actors: { post } as never }), { input: INPUT, clock });
  actor.subscribe({ error: (e) => errors.push(e) });
  actor.start();
  const oracle = new ReportOracle(INPUT.retryIntervalMs, INPUT.totalTimeoutMs);
  const compare = (after: string) => {
    const snapshot = actor.getSnapshot();
    const inFlight = posts.filter((p) => !p.settled && !p.signal.aborted).length;
    const out = snapshot.status === 'done' ? (snapshot.output as { accepted: boolean; failure: unknown }) : null;
    const f = out?.failure ? toFailure(out.failure) : null;
    const seen = {
      posts: posts.length,
      inFlight,
      output: out && { accepted: out.accepted, code: f?.code ?? null, lastError: f?.data.find(([k]) => k === 'last_error')?.[1] ?? null },
      errors: errors.length,
    };
    const expected = { posts: oracle.posts, inFlight: oracle.posting ? 1 : 0, output: oracle.output, errors: 0 };
    if (JSON.stringify(seen) !== JSON.stringify(expected)) throw new Error(`after ${after}: saw ${JSON.stringify(seen)}, expected ${JSON.stringify(expected)}`);
  };
  try {
    compare('start');
    for (const step of steps) {
      if (step.type === 'time') clock.increment(step.to - clock.now());
      else {
        const gate = posts.at(-1);
        if (!gate || gate.settled || gate.signal.aborted) throw new Error('no POST is in flight');
        if (step.type === 'accepted') gate.resolve();
        else gate.reject(step.error);
      }
      await settle();
      apply(oracle, step);
      compare(step.type === 'time' ? `clock at ${step.to} ms` : step.type);
    }
  } finally {
    actor.stop();
  }
}

const describe = (steps: Step[]) =>
  steps.map((s) => (s.type === 'time' ? `clock at ${s.to} ms` : s.type === 'failed' ? `POST failed${toFailure(s.error).retryable ? ' (retryable)' : ''}` : 'POST accepted')).join(' → ');

/** Every path of the oracle, as the mutation check takes them, and the first a chart disagrees on. */
export const { fixedPaths, firstDisagreement } = oracleChecks(reportPaths, describe, play);
