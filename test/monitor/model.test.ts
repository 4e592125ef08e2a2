/**
 * Model-based tests of the monitor chart (docs/architecture.md#how-the-charts-are-proved): xstate/graph traverses the
 * real machine, each shortest path runs on the real interpreter with gated actors and a stepped clock, and coverage of
 * every transition of every state node is proved twice, from the plan and from what the interpreter reported while the
 * paths ran.
 */
import { describe, expect, it } from 'vitest';
import {
  createActor,
  getInitialMicrosteps,
  getMicrosteps,
  type AnyEventObject,
  type AnyTransitionDefinition,
  type InspectionEvent,
  type SnapshotFrom,
} from 'xstate';
import { getStateNodes, TestModel } from 'xstate/graph';
import { HEARTBEAT, IMDS_HEARTBEAT, VERSIONS, monitorMachine } from '../../machines/monitor.js';
import type { Observation } from '../../src/azure/healthservice.js';
import { edgeKey, eventsFor, inputOf, MODES, type Mode, oraclePaths, playAgainstOracle, REGIONS as CHECK_REGIONS, serializeState, describePath as describeEvents } from './check.js';
import { BREAK_REPORTER, Gates, StepClock, gatedActors, settle } from './harness.js';

const NAMES = { heartbeat: HEARTBEAT, versions: VERSIONS, imds: IMDS_HEARTBEAT } as const;
const REGIONS = CHECK_REGIONS.map((r) => ({ ...r, name: NAMES[r.key] }));

type Snapshot = SnapshotFrom<typeof monitorMachine>;

function modelFor(mode: Mode) {
  return new TestModel(monitorMachine, {
    input: inputOf(mode),
    events: eventsFor as never,
    serializeState: serializeState as never,
  });
}

const allNodes = [monitorMachine.root, ...getStateNodes(monitorMachine.root)];

/** A stable name for a transition, the same for the machine and for its `provide`d copy. */
function transitionKey(t: AnyTransitionDefinition): string {
  const siblings = t.source.transitions.get(t.eventType) ?? [];
  return `${t.source.id} --${t.eventType}[${siblings.findIndex((s) => s === t)}]--> ${(t.target ?? []).map((n) => n.id).join(',') || '(self)'}`;
}

const everyTransition = new Set(
  allNodes.flatMap((node) => [...node.transitions.values()].flat().concat(node.always ?? []).map(transitionKey)),
);

/** Transitions a step takes: the event's own, plus the done-state transitions its microsteps raise. */
function plannedTransitions(prev: Snapshot, event: AnyEventObject): string[] {
  const taken = monitorMachine.getTransitionData(prev, event as never).map(transitionKey);
  const micro = getMicrosteps(monitorMachine, prev, event as never).map(([s]) => s);
  for (let k = 1; k < micro.length; k++) {
    for (const node of allNodes) {
      const doneType = `xstate.done.state.${node.id}`;
      for (const t of node.transitions.get(doneType) ?? []) {
        const sourceActive = micro[k - 1]._nodes.includes(node);
        const targetsActive = (t.target ?? []).every((n) => micro[k]._nodes.includes(n));
        if (sourceActive && targetsActive) taken.push(transitionKey(t));
      }
    }
  }
  return [...taken, ...eventlessTaken(micro)];
}

/** Eventless transitions between consecutive microsteps: the source left, every target entered. */
function eventlessTaken(micro: Snapshot[]): string[] {
  const taken: string[] = [];
  for (let k = 1; k < micro.length; k++) {
    for (const node of allNodes) {
      for (const t of node.always ?? []) {
        const left = micro[k - 1]._nodes.includes(node) && !micro[k]._nodes.includes(node);
        if (left && (t.target ?? []).every((n) => micro[k]._nodes.includes(n))) taken.push(transitionKey(t));
      }
    }
  }
  return taken;
}

const models = MODES.map((mode) => ({ mode, paths: modelFor(mode).getShortestPaths() }));
const observed = new Set<string>();

/** Runs one planned path against the real interpreter and checks every state and side effect on the way. */
async function runPath(mode: Mode, path: (typeof models)[number]['paths'][number]) {
  const gates = new Gates();
  const observations: Observation[] = [];
  const clock = new StepClock();
  const actor = createActor(monitorMachine.provide({ actors: gatedActors(gates, observations) }), {
    input: inputOf(mode),
    clock,
    inspect: (e: InspectionEvent) => {
      if (e.type === '@xstate.microstep' && e.actorRef.sessionId === e.rootId) e._transitions.forEach((t) => observed.add(transitionKey(t)));
    },
  });
  actor.start();
  let seen = 0;
  const execute = async ({ event }: { event: AnyEventObject }) => {
    const inFlight = REGIONS.filter((r) => actor.getSnapshot().matches({ running: { [r.key]: 'measuring' } } as never));
    const region = REGIONS.find((r) => event.type.endsWith(`.${r.actor}`) || event.type.startsWith(`xstate.after.${r.delay}.`));
    if (event.type.startsWith('xstate.done.actor.')) gates.resolve(event.type.slice('xstate.done.actor.'.length), event.output);
    else if (event.type === 'xstate.error.actor.reporter') actor.getSnapshot().children.reporter!.send(BREAK_REPORTER as never);
    else if (event.type.startsWith('xstate.error.actor.')) gates.reject(event.type.slice('xstate.error.actor.'.length), new Error('bug'));
    else if (event.type.startsWith('xstate.after.') && region) clock.fire(region.ms);
    else actor.send(event as never);
    await settle();

    // Side effects: a finished measurement reports exactly one observation about its own signal.
    const fresh = observations.slice(seen);
    seen = observations.length;
    if (event.type.startsWith('xstate.done.actor.check') && region) {
      const output = event.output as { ok: boolean; value: string };
      const value = region.key === 'heartbeat' ? '' : output.value;
      expect(fresh).toEqual([{ ObservationName: region.name, IsHealthy: output.ok, Description: '', Value: value }]);
    } else {
      expect(fresh).toEqual([]);
    }
    if (event.type === 'STOP') {
      // Leaving `running` aborts whatever was still being measured.
      for (const r of inFlight) expect(gates.signals.get(r.actor)?.at(-1)?.aborted).toBe(true);
      expect(gates.invocations.get('flush')).toBe(1);
    }
  };
  const checkState = (planned: Snapshot) => {
    const real = actor.getSnapshot();
    expect(real.value).toEqual(planned.value);
    expect(real.status).toBe(planned.status);
    expect(real.context).toEqual(planned.context);
    if (planned.status === 'done') {
      expect(real.output).toEqual(planned.output);
      expect(clock.pending).toBe(0);
    }
  };
  const events = Object.fromEntries([...everyEventType()].map((type) => [type, execute]));
  await path.test({ events: events as never, states: { '*': checkState as never } });
  actor.stop();
}

function* everyEventType(): Generator<string> {
  for (const node of allNodes) yield* node.transitions.keys();
  yield 'STOP';
}

function describePath(path: { steps: Array<{ event: AnyEventObject }> }): string {
  return path.steps.slice(1).map((s) => edgeKey(s.event).replace(/^xstate\.(done|error|after)\.(actor\.)?/, '$1 ')).join(' → ') || 'start';
}

// Each planned path runs once with both checks: against the plan (states, context, side effects of the interpreter),
// then against oracle.ts (docs/protocol.md#healthservice), not the chart: requests per check and period, the
// observations sent, the checks in flight and the output, after every event. Then the oracle's own paths.
for (const { mode, paths } of models) {
  describe(`the monitor chart${mode.label ? ` ${mode.label}` : ''} on every planned path, against its plan and the oracle`, () => {
    for (const path of paths) {
      const events = path.steps.slice(1).map((s) => s.event as AnyEventObject);
      it(`${mode.label}${describePath(path)}`, async () => {
        await runPath(mode, path);
        await playAgainstOracle(monitorMachine, mode, events);
      });
    }
  });
  describe(`the monitor chart${mode.label ? ` ${mode.label}` : ''} against the oracle, on the oracle's paths`, () => {
    for (const events of oraclePaths(mode)) it(`(oracle) ${mode.label}${describeEvents(events)}`, () => playAgainstOracle(monitorMachine, mode, events));
  });
}

describe('monitor chart coverage', () => {
  it('plans a path through every transition of every state node', () => {
    const planned = new Set<string>();
    for (const { mode, paths } of models) {
      eventlessTaken(getInitialMicrosteps(monitorMachine, inputOf(mode)).map(([s]) => s)).forEach((t) => planned.add(t));
      for (const path of paths) {
        for (let i = 1; i < path.steps.length; i++) {
          plannedTransitions(path.steps[i - 1].state, path.steps[i].event).forEach((t) => planned.add(t));
        }
      }
    }
    expect([...everyTransition].filter((t) => !planned.has(t))).toEqual([]);
  });

  it('saw the interpreter take every transition while the paths ran', () => {
    expect([...everyTransition].filter((t) => !observed.has(t))).toEqual([]);
  });
});
