/**
 * Plays every path the network oracle (oracle.ts) can take — IMDS answering, retried, refused or outlived; a plan or
 * none; a stack or none; rendering and applying done or failed; the configure deadline falling in each step — against
 * a network chart (the real one or a mutant) with gated actors and a SimulatedClock, comparing after each step the
 * actors started, in flight and cut short, the document each plan was given, and the output. No vitest here, so a
 * mutation run can use it too.
 */
import { createActor, fromPromise, SimulatedClock, type AnyStateMachine, type AnyTransitionDefinition, type InspectionEvent } from 'xstate';
import type { NetworkRunInput, NetworkRunOutput } from '../../machines/network.js';
import { BootstateError, toFailure } from '../../src/core/errors.js';
import { ACTORS, NetworkOracle, type ActorName, type SeenNetworkOutput } from './oracle.js';
import { oracleChecks } from '../support/oracle-paths.js';

// No two timers fall due at the same moment on any path, and the retries and one slow answer put configuring's start
// at eight different times, so a deadline counted from the wrong moment (the run's start, the plan's) shows.
export const INPUT: NetworkRunInput = { retryIntervalMs: 1_000, totalTimeoutMs: 3_500, configureTimeoutMs: 2_200 };
/** How long one slow answer takes: at most once a path, so that the planning step (no deadline) ends. */
const SLOW_MS = 400;

const DOCUMENT = { compute: { vmId: 'x' }, network: { interface: [{ macAddress: '000D3A000001' }] } };
const RETRYABLE = new BootstateError('HTTP_STATUS', 'IMDS answered 503', { retryable: true });
const REFUSED = new BootstateError('HTTP_STATUS', 'IMDS answered 400');
/** Retryable on purpose: only IMDS is asked again, so a chart retrying any other step is caught. */
const brokeIn = (actor: ActorName) => new BootstateError('IO', `${actor} broke`, { retryable: true });

export type Step = { type: 'done'; actor: ActorName; value: unknown } | { type: 'failed'; actor: ActorName; error: unknown } | { type: 'time'; to: number };

/** What each actor can do when asked. */
const OUTCOMES: Record<ActorName, Step[]> = {
  fetchDocument: [
    { type: 'done', actor: 'fetchDocument', value: DOCUMENT },
    { type: 'failed', actor: 'fetchDocument', error: RETRYABLE },
    { type: 'failed', actor: 'fetchDocument', error: REFUSED },
  ],
  plan: [
    { type: 'done', actor: 'plan', value: { planned: true, why: null } },
    { type: 'done', actor: 'plan', value: { planned: false, why: 'the network section is empty' } },
    { type: 'failed', actor: 'plan', error: brokeIn('plan') },
  ],
  inspect: [
    { type: 'done', actor: 'inspect', value: { stack: 'networkd', why: null } },
    { type: 'done', actor: 'inspect', value: { stack: null, why: 'no network stack is installed' } },
    { type: 'failed', actor: 'inspect', error: brokeIn('inspect') },
  ],
  render: [
    { type: 'done', actor: 'render', value: undefined },
    { type: 'failed', actor: 'render', error: brokeIn('render') },
  ],
  apply: [
    { type: 'done', actor: 'apply', value: undefined },
    { type: 'failed', actor: 'apply', error: brokeIn('apply') },
  ],
};

const newOracle = () => new NetworkOracle(INPUT);

/**
 * What can happen next: the actor in flight answers or fails, it answers slowly (once a path, never past a
 * deadline), or the clock reaches the next retry or deadline.
 */
function offers(oracle: NetworkOracle, waited: boolean): Step[] {
  if (oracle.output) return [];
  const steps = [...(oracle.inFlight ? OUTCOMES[oracle.inFlight] : [])];
  const due = oracle.nextDue;
  if (oracle.inFlight && !waited && (due === null || oracle.now + SLOW_MS < due)) steps.push({ type: 'time', to: oracle.now + SLOW_MS });
  if (due !== null) steps.push({ type: 'time', to: due });
  return steps;
}

/** Every (oracle state, step) pair reached once by its shortest path; no path is a prefix of another. */
export function networkPaths(): Step[][] {
  type Path = { steps: Step[]; extended: boolean };
  const paths: Path[] = [];
  const seen = new Set<string>();
  let frontier: Array<{ oracle: NetworkOracle; waited: boolean; path: Path | null }> = [{ oracle: newOracle(), waited: false, path: null }];
  while (frontier.length) {
    const next: typeof frontier = [];
    for (const { oracle, waited, path } of frontier) {
      for (const step of offers(oracle, waited)) {
        const edge = `${waited} ${oracle.key()} ${JSON.stringify(step)}`;
        if (seen.has(edge)) continue;
        seen.add(edge);
        const after = oracle.clone();
        apply(after, step);
        if (path) path.extended = true;
        const child = { steps: [...(path?.steps ?? []), step], extended: false };
        paths.push(child);
        next.push({ oracle: after, waited: waited || (step.type === 'time' && step.to < (oracle.nextDue ?? Infinity)), path: child });
      }
    }
    frontier = next;
  }
  return paths.filter((p) => !p.extended).map((p) => p.steps);
}

function apply(oracle: NetworkOracle, step: Step) {
  if (step.type === 'done') oracle.done(step.actor, step.value);
  else if (step.type === 'failed') oracle.failed(step.actor, step.error);
  else oracle.advanceTo(step.to);
}

interface Gate {
  actor: ActorName;
  input: unknown;
  signal: AbortSignal;
  settled: boolean;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** The five actors as promises that settle only when a step says so. */
function gatedActors(gates: Gate[]) {
  const gated = (actor: ActorName) =>
    fromPromise<unknown, unknown>(
      ({ input, signal }) =>
        new Promise((resolve, reject) => {
          const gate: Gate = {
            actor,
            input,
            signal,
            settled: false,
            resolve: (value) => ((gate.settled = true), resolve(value)),
            reject: (error) => ((gate.settled = true), reject(error)),
          };
          gates.push(gate);
        }),
    );
  return Object.fromEntries(ACTORS.map((a) => [a, gated(a)]));
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** What the world saw of the run: the actors' starts, those running and those cut short, and the output. */
function seenOf(gates: Gate[], output: NetworkRunOutput | null, errors: number) {
  const count = (p: (g: Gate) => boolean) => Object.fromEntries(ACTORS.map((a) => [a, gates.filter((g) => g.actor === a && p(g)).length]));
  const f = output?.failure ? toFailure(output.failure) : null;
  return {
    started: count(() => true),
    inFlight: gates.filter((g) => !g.settled && !g.signal.aborted).map((g) => g.actor),
    aborted: count((g) => !g.settled && g.signal.aborted),
    planInputs: gates.filter((g) => g.actor === 'plan').map((g) => (g.input as { document: unknown }).document),
    output: output && {
      result: output.result,
      why: output.why,
      failure: f && { code: f.code, error: f.data.find(([k]) => k === 'error')?.[1] ?? null, lastError: f.data.find(([k]) => k === 'last_error')?.[1] ?? null },
    },
    errors,
  };
}

/** The chart's phrases in the oracle's words where they mention what the oracle's do. */
function phrased(seen: SeenNetworkOutput | null, expected: SeenNetworkOutput | null): SeenNetworkOutput | null {
  if (!seen || !expected) return seen;
  const mentions = (phrase: string | null, must: string | null) => (phrase !== null && must !== null && phrase.includes(must) ? must : phrase);
  const failure = seen.failure && { ...seen.failure, error: mentions(seen.failure.error, expected.failure?.error ?? null) };
  return { ...seen, why: mentions(seen.why, expected.why), failure };
}

function expectedOf(oracle: NetworkOracle) {
  const { started, aborted, planInputs, output } = oracle;
  return { started, inFlight: oracle.inFlight && !output ? [oracle.inFlight] : [], aborted, planInputs, output, errors: 0 };
}

/** Plays `steps` on `machine`, throwing at the first difference from the oracle; `taken` hears each transition. */
export async function play(machine: AnyStateMachine, steps: Step[], taken?: (t: AnyTransitionDefinition) => void): Promise<void> {
  const gates: Gate[] = [];
  const clock = new SimulatedClock();
  const errors: unknown[] = [];
  const inspect = (e: InspectionEvent) => {
    if (taken && e.type === '@xstate.microstep' && e.actorRef.sessionId === e.rootId) e._transitions.forEach(taken);
  };
  const actor = createActor(machine.provide({ actors: gatedActors(gates) as never }), { input: INPUT, clock, inspect });
  actor.subscribe({ error: (e) => errors.push(e) });
  actor.start();
  const oracle = newOracle();
  const compare = (after: string) => {
    const snapshot = actor.getSnapshot();
    const seen = seenOf(gates, snapshot.status === 'done' ? (snapshot.output as NetworkRunOutput) : null, errors.length);
    const expected = expectedOf(oracle);
    const shown = { ...seen, output: phrased(seen.output, expected.output) };
    if (JSON.stringify(shown) !== JSON.stringify(expected)) throw new Error(`after ${after}: saw ${JSON.stringify(seen)}, expected ${JSON.stringify(expected)}`);
  };
  try {
    compare('start');
    for (const step of steps) {
      if (step.type === 'time') {
        // A millisecond before: nothing due then may have happened yet, so a timer firing early shows too.
        clock.increment(step.to - 1 - clock.now());
        await settle();
        oracle.advanceTo(step.to - 1);
        compare(`clock at ${step.to - 1} ms`);
        clock.increment(1);
      } else {
        const gate = gates.filter((g) => g.actor === step.actor).at(-1);
        if (!gate || gate.settled || gate.signal.aborted) throw new Error(`${step.actor} is not in flight`);
        if (step.type === 'done') gate.resolve(step.value);
        else gate.reject(step.error);
      }
      await settle();
      apply(oracle, step);
      compare(describeStep(step));
    }
  } finally {
    actor.stop();
  }
}

function describeStep(step: Step): string {
  if (step.type === 'time') return `clock at ${step.to} ms`;
  if (step.type === 'failed') return `${step.actor} failed${toFailure(step.error).retryable ? ' (retryable)' : ''}`;
  const v = step.value as { planned?: boolean; stack?: string | null } | undefined;
  if (step.actor === 'plan') return v!.planned ? 'planned' : 'no plan';
  if (step.actor === 'inspect') return v!.stack ? `stack ${v!.stack}` : 'no stack';
  return `${step.actor} done`;
}

export const describePath = (steps: Step[]) => steps.map(describeStep).join(' → ');

/** Every path of the oracle, as the mutation check takes them, and the first a chart disagrees on. */
export const { fixedPaths, firstDisagreement } = oracleChecks(networkPaths, describePath, play);
