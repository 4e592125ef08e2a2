/**
 * Model-based test of the provisioning statechart (docs/architecture.md#how-the-charts-are-proved): the real machine is
 * traversed with `xstate/graph`'s TestModel, and of its shortest paths the fewest that together take every transition
 * (chosen greedily) are played against the real interpreter with gated fake actors and a SimulatedClock, each step
 * checked twice: against the path's own pure replay (checkState) and against the oracle written from the protocol.
 * The suite fails unless both the planned and the observed transitions cover every transition of every state node.
 * Then the kill-set: the paths that together kill every mutant of the chart (recorded by `npm run mutate`, which also
 * plays every path — the oracle's full walk and every model path), each compared with the oracle.
 *
 * Bounding the parallel states (see `mayMove` and `modelEvents` in support.ts). Offering every region's events
 * everywhere multiplies the interleavings of `provisioning` (InProgress ‖ work), `gathering` (imds ‖ media) and
 * `configuringOs` (hostname ‖ account ‖ sshd) without reaching a single extra transition, so:
 * - the InProgress region moves only while the work region is at its start (IMDS requesting for the first time,
 *   media reading); it then stays where it is (sending, backoff, sent, abandoned) while the work goes on;
 * - the work region waits while InProgress is in backoff, so the two regions' retry timers never race;
 * - in `gathering` the imds region moves first, then media (an IMDS answer with password logins off leaves
 *   gathering at once, aborting the media read); in `configuringOs` hostname, then account (in its
 *   `credentials`, password then keys), then sshd;
 * - of the active delayed transitions only the one due first is offered (a total deadline is offered from
 *   `requesting`, a retry from `backoff` only if it is shorter than the deadline still running).
 * Every transition definition stays reachable under these rules; the coverage proofs below check exactly that.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { AnyMachineSnapshot, AnyStateNode, AnyTransitionDefinition } from 'xstate';
import { provisioningMachine } from '../../machines/provisioning-machine.js';
import { HEALTH_FAILED, HEALTH_IN_PROGRESS, HEALTH_READY, type ProvisioningContext, type ProvisioningOutput } from '../../machines/provisioning.js';
import { KINDS } from '../../src/core/errors.js';
import { eventLabel, modelPaths, ORACLE_PATHS, playAgainstOracle } from './check.js';
import { RECORD_AGAIN, resolveKillSet } from '../mutation/kill-set.js';
import { shortEventType } from '../mutation/mutants.js';
import { STEP } from '../support/chart.js';
import { lastStart, startsOf } from './gates.js';
import { startRun, type Run } from './harness.js';
import {
  allStateNodes,
  allTransitions,
  edgeKey,
  expectedHealth,
  FINAL_OUTPUT,
  macrostep,
  replay,
  type ModelEvent,
} from './support.js';

// One TestModel per start (what the run read before the chart), together reaching every way out of `starting`.
const paths = modelPaths(provisioningMachine);

const everyTransition = new Set(allTransitions(provisioningMachine).map(edgeKey));
const planned = new Set<string>();
const observed = new Set<string>();

/** One step of a pure replay, shared by every path with the same start and events so far. */
interface Replayed {
  snapshot: AnyMachineSnapshot;
  taken: AnyTransitionDefinition[];
}
const replayedSteps = new Map<string, Replayed>();

/** The step after `event` from `before` (keyed by the path so far), replayed purely once however many paths share it. */
function replayStep(key: string, before: Replayed, event: ModelEvent): Replayed {
  const known = replayedSteps.get(key);
  if (known) return known;
  const { snapshot, microsteps } = macrostep(provisioningMachine, before.snapshot, event);
  const direct = provisioningMachine.getTransitionData(before.snapshot as never, event as never).map(edgeKey);
  const first = (microsteps[0] ?? []).map(edgeKey);
  if (JSON.stringify(direct) !== JSON.stringify(first)) {
    throw new Error(`getTransitionData and the macrostep disagree on ${event.type}: ${direct.join(',')} vs ${first.join(',')}`);
  }
  const step = { snapshot, taken: microsteps.flat() };
  replayedSteps.set(key, step);
  return step;
}

/** Each path's own snapshots, replayed purely, and the transitions it takes in order; the plan is read off this replay. */
const replays = paths.map(({ start, input, events }) => {
  let key = start;
  if (!replayedSteps.has(key)) {
    const [initial] = replay(provisioningMachine, [], input);
    replayedSteps.set(key, { snapshot: initial!.snapshot, taken: initial!.microsteps.flat() });
  }
  const steps: Replayed[] = [replayedSteps.get(key)!];
  for (const event of events) {
    key += `\n${eventLabel(event)}`;
    steps.push(replayStep(key, steps.at(-1)!, event));
  }
  const taken = steps.flatMap((s) => s.taken);
  const keys = new Set(taken.map(edgeKey));
  for (const k of keys) planned.add(k);
  return { snapshots: steps.map((s) => s.snapshot), taken, keys };
});

/**
 * The paths played: greedily, the one taking the most transitions no path chosen yet takes (the shorter on a tie),
 * until every planned transition is taken. Each is named after the first transition it was chosen for.
 */
function coverTransitions(): Array<{ index: number; title: string }> {
  const left = new Set(planned);
  const chosen: Array<{ index: number; title: string }> = [];
  while (left.size) {
    let best = -1;
    let gain = 0;
    replays.forEach(({ keys, taken }, i) => {
      let n = 0;
      for (const k of keys) if (left.has(k)) n++;
      if (n > gain || (n === gain && n > 0 && taken.length < replays[best]!.taken.length)) [best, gain] = [i, n];
    });
    const first = replays[best]!.taken.find((t) => left.has(edgeKey(t)))!;
    for (const k of replays[best]!.keys) left.delete(k);
    chosen.push({ index: best, title: `${paths[best]!.start}: ${describeTransition(first)}` });
  }
  return chosen;
}

/** A transition in words: `reportingReady.requesting, on error readyReport (way 1 of 2), goes to reportingReady.backoff`. */
function describeTransition(t: AnyTransitionDefinition): string {
  const local = (node: AnyStateNode) => node.path.join('.') || '(root)';
  const siblings = t.eventType === '' ? (t.source.always ?? []) : (t.source.transitions.get(t.eventType) ?? []);
  const which = siblings.length > 1 ? ` (way ${siblings.indexOf(t) + 1} of ${siblings.length})` : '';
  const to = t.target?.length ? `goes to ${t.target.map(local).join(', ')}` : 'stays';
  return `${local(t.source)}, on ${shortEventType(t.eventType, t.source)}${which}, ${to}`;
}

const cover = coverTransitions();
const killSet = resolveKillSet('provisioning', [...paths, ...ORACLE_PATHS()]);
/** Model paths of the kill-set not in the cover: played with both checks like the cover's. */
const covered = new Set(cover.map((c) => paths[c.index]!.id));
const modelKillers = killSet.found.filter(({ path }) => path.id.startsWith('model ') && !covered.has(path.id));
const oracleKillers = killSet.found.filter(({ path }) => !path.id.startsWith('model '));
const killerTitle = (start: string, catches: string) => `${start}: catches a chart where ${catches}`;

/** The invoke id → the state node that invokes it. */
const invoker = new Map<string, AnyStateNode>(
  allStateNodes(provisioningMachine.root).flatMap((node) => node.invoke.map((inv) => [inv.id, node] as const)),
);

const REPORTS = [
  { state: { provisioning: { inProgress: { sending: 'requesting' } } }, id: STEP.inProgressReport, health: HEALTH_IN_PROGRESS },
  { state: { reportingReady: 'requesting' }, id: STEP.readyReport, health: HEALTH_READY },
  { state: { reportingFailure: 'requesting' }, id: STEP.failureReport, health: HEALTH_FAILED },
  { state: { preprovisioned: { reportingPoolReady: 'requesting' } }, id: STEP.poolReadyReport, health: HEALTH_READY },
] as const;

function checkState(run: Run, expected: AnyMachineSnapshot) {
  const snapshot = run.actor.getSnapshot();
  const context = snapshot.context as ProvisioningContext;
  expect(run.errors).toEqual([]);
  expect(snapshot.value).toEqual(expected.value);
  expect(snapshot.status).toBe(expected.status);

  const health = expectedHealth(snapshot);
  for (const tag of [HEALTH_IN_PROGRESS, HEALTH_READY, HEALTH_FAILED] as const) {
    expect(snapshot.hasTag(tag), `tag ${tag}`).toBe(tag === health);
  }

  // Leaving a state aborts its actor; a re-entered state's earlier start is aborted too.
  for (const gate of run.gates) {
    if (gate.settled) continue;
    const live = gate === run.latest(gate.id) && snapshot._nodes.some((n) => n.id === invoker.get(gate.id)!.id) && snapshot.status === 'active';
    expect(gate.signal.aborted, `signal of ${gate.id} (seq ${gate.seq})`).toBe(!live);
  }

  for (const report of REPORTS) {
    if (!snapshot.matches(report.state as never)) continue;
    const gate = run.pending(report.id);
    expect(gate.input.health).toBe(report.health);
    expect(gate.input.vmId).toBe(context.vmId);
    if (report.health === HEALTH_IN_PROGRESS) continue;
    expect(gate.input.failure).toEqual(report.health === HEALTH_FAILED ? context.failure : null);
    const record = run.kvp.filter((r) => r.seq < gate.seq).at(-1);
    expect(record?.event, 'KVP record written before the report').toEqual({
      type: 'kvp.report',
      health: report.health,
      vmId: context.vmId,
      failure: report.health === HEALTH_FAILED ? context.failure : null,
      ppsType: context.ppsType,
    });
  }

  if (snapshot.status === 'done') {
    const output = snapshot.output as ProvisioningOutput;
    expect(output).toEqual(expected.output);
    const final = snapshot.value as string;
    expect(output).toMatchObject(FINAL_OUTPUT[final]!);
    if (output.result === 'failed') {
      expect(output.reason).toBe(KINDS[output.code as keyof typeof KINDS].reason);
      expect(output.exitCode).toBe(KINDS[output.code as keyof typeof KINDS].exitCode);
    } else {
      expect(output.exitCode).toBe(0);
      expect(output.reason).toBeUndefined();
    }
    if (final === 'failed' || final === 'failedUnreported') {
      const reported = lastStart(run, 'failureReport')!.input.failure;
      const written = run.kvp.filter((r) => r.event.health === HEALTH_FAILED).at(-1)!.event.failure;
      expect(reported.reason).toBe(output.reason);
      expect(written).toEqual(reported);
    }
    if (final === 'alreadyProvisioned' || final === 'alreadyRunning') expect(run.gates.some((g) => g.id.endsWith('Report'))).toBe(false);
    expect(startsOf(run, 'inProgressReport').filter((g) => !g.settled && !g.signal.aborted)).toEqual([]);
    expect(run.kvpStopped).toBe(true);
  }
}

/** Plays model path `index` with both checks: each step against its own replay (checkState), then against the oracle. */
async function playBoth(index: number) {
  const { path, input, events } = paths[index]!;
  const run = startRun(input, provisioningMachine, 'path');
  try {
    const own = replays[index]!.snapshots;
    for (const [i, step] of path.steps.entries()) {
      expect(own[i]!.value, 'replayed value').toEqual((step.state as AnyMachineSnapshot).value);
      await run.play(step.event as ModelEvent);
      checkState(run, own[i]!);
    }
  } finally {
    for (const t of run.transitions) observed.add(edgeKey(t));
    run.actor.stop();
  }
  // The expected effects come from oracle.ts, written from the protocol: a wrong transition cannot agree with it by
  // generating its own paths. Compared step by step on what the world saw (reports and KVP records with their
  // pps_type, actors started and in flight, output, journal's final state), pool VMs and steps left out included.
  await playAgainstOracle(provisioningMachine, input, events);
}

describe('the provisioning statechart, one path for each transition, against its replay and the oracle', () => {
  afterAll(() => {
    console.log(
      `model paths: ${paths.length}, ${cover.length} played to cover the transitions and ${modelKillers.length + oracleKillers.length} of the kill-set; transitions planned ${planned.size}/${everyTransition.size}, observed ${
        [...observed].filter((k) => everyTransition.has(k)).length
      }/${everyTransition.size}`,
    );
  });

  for (const { index, title } of cover) it(title, () => playBoth(index));
  for (const { entry, path } of modelKillers) it(killerTitle(path.start, entry.catches), () => playBoth(paths.indexOf(path as (typeof paths)[number])));
});

describe('the provisioning statechart against the oracle, on the kill-set', () => {
  it('finds every recorded path of the kill-set among the paths generated now', () => {
    expect(killSet.missing, `recorded paths no longer generated: ${RECORD_AGAIN}`).toEqual([]);
    expect(killSet.found.length, `the kill-set of the provisioning chart is empty: ${RECORD_AGAIN}`).toBeGreaterThan(0);
    expect(killSet.complete, `the kill-set was recorded from some of the mutants only (--sample or --chart): ${RECORD_AGAIN}`).toBe(true);
  });

  for (const { entry, path } of oracleKillers) it(killerTitle(path.start, entry.catches), () => playAgainstOracle(provisioningMachine, path.input, path.events));
});

describe('coverage of the provisioning statechart', () => {
  it('gives every path played a title of its own', () => {
    const titles = [...cover.map((c) => c.title), ...[...modelKillers, ...oracleKillers].map(({ entry, path }) => killerTitle(path.start, entry.catches))];
    expect(titles.filter((t, i) => titles.indexOf(t) !== i)).toEqual([]);
  });

  it('plans every transition of every state node', () => {
    expect([...everyTransition].filter((k) => !planned.has(k))).toEqual([]);
    expect([...planned].filter((k) => !everyTransition.has(k))).toEqual([]);
  });

  it('observes every transition of every state node while the paths run', () => {
    expect([...everyTransition].filter((k) => !observed.has(k))).toEqual([]);
    expect([...observed].filter((k) => !everyTransition.has(k))).toEqual([]);
  });
});
