/**
 * Model-based test of the provisioning statechart (docs/architecture.md#how-the-charts-are-proved): the real machine is
 * traversed with `xstate/graph`'s TestModel, every shortest path is played against the real interpreter with gated fake
 * actors and a SimulatedClock, and the suite fails unless both the planned and the observed transitions cover every
 * transition of every state node.
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
import type { AnyMachineSnapshot, AnyStateNode } from 'xstate';
import { provisioningMachine } from '../../machines/provisioning-machine.js';
import { HEALTH_FAILED, HEALTH_IN_PROGRESS, HEALTH_READY, type ProvisioningContext, type ProvisioningOutput } from '../../machines/provisioning.js';
import { KINDS } from '../../src/core/errors.js';
import { modelPaths, ORACLE_PATHS, playAgainstOracle } from './check.js';
import { STEP } from '../support/chart.js';
import { lastStart, startsOf } from './gates.js';
import { startRun, type Run } from './harness.js';
import {
  allStateNodes,
  allTransitions,
  edgeKey,
  expectedHealth,
  FINAL_OUTPUT,
  replay,
  type ModelEvent,
} from './support.js';

// One TestModel per start (what the run read before the chart), together reaching every way out of `starting`.
const paths = modelPaths(provisioningMachine);

const everyTransition = new Set(allTransitions(provisioningMachine).map(edgeKey));
const planned = new Set<string>();
const observed = new Set<string>();

/** Each path's own snapshots, replayed purely; the planned transitions are read off this replay. */
const replays = paths.map(({ path, input }) => {
  const events = path.steps.slice(1).map((s) => s.event as ModelEvent);
  const steps = replay(provisioningMachine, events, input);
  for (const key of steps[0]!.microsteps.flat().map(edgeKey)) planned.add(key);
  for (let i = 1; i < steps.length; i++) {
    const direct = provisioningMachine.getTransitionData(steps[i - 1]!.snapshot as never, events[i - 1] as never).map(edgeKey);
    const microsteps = steps[i]!.microsteps.map((ts) => ts.map(edgeKey));
    if (JSON.stringify(direct) !== JSON.stringify(microsteps[0] ?? [])) {
      throw new Error(`getTransitionData and the macrostep disagree on ${events[i - 1]!.type}: ${direct.join(',')} vs ${(microsteps[0] ?? []).join(',')}`);
    }
    for (const key of microsteps.flat()) planned.add(key);
  }
  return steps.map((s) => s.snapshot);
});

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

describe('the provisioning statechart, path by path', () => {
  afterAll(() => {
    console.log(
      `model paths: ${paths.length}; transitions planned ${planned.size}/${everyTransition.size}, observed ${
        [...observed].filter((k) => everyTransition.has(k)).length
      }/${everyTransition.size}`,
    );
  });

  paths.forEach(({ path, input, name }, index) => {
    it(`${name} reaches ${JSON.stringify(path.state.value)}`, async () => {
      const run = startRun(input, provisioningMachine, 'path');
      try {
        const own = replays[index]!;
        for (const [i, step] of path.steps.entries()) {
          expect(own[i]!.value, 'replayed value').toEqual((step.state as AnyMachineSnapshot).value);
          await run.play(step.event as ModelEvent);
          checkState(run, own[i]!);
        }
      } finally {
        for (const t of run.transitions) observed.add(edgeKey(t));
        run.actor.stop();
      }
    });
  });
});

// The expected effects come from oracle.ts, written from the protocol: a wrong transition cannot agree with it by
// generating its own paths. Every model path above, and every path the oracle chooses itself, is compared step by
// step on what the world saw (reports and KVP records with their pps_type, actors started and in flight, output,
// journal's final state), pool VMs and steps left out included.
describe('the provisioning statechart against the oracle, on its own paths', () => {
  paths.forEach(({ name, input, events }) => {
    it(name, () => playAgainstOracle(provisioningMachine, input, events));
  });
});

describe("the provisioning statechart against the oracle, on the oracle's paths", () => {
  for (const { name, input, events } of ORACLE_PATHS()) it(name.replace(/^\(oracle\) /, ''), () => playAgainstOracle(provisioningMachine, input, events));
});

describe('coverage of the provisioning statechart', () => {
  it('plans every transition of every state node', () => {
    expect([...everyTransition].filter((k) => !planned.has(k))).toEqual([]);
    expect([...planned].filter((k) => !everyTransition.has(k))).toEqual([]);
  });

  it('observes every transition of every state node while the paths run', () => {
    expect([...everyTransition].filter((k) => !observed.has(k))).toEqual([]);
    expect([...observed].filter((k) => !everyTransition.has(k))).toEqual([]);
  });
});
