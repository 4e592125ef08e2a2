/**
 * Runs the real provisioning machine with gated fake actors and a SimulatedClock. Each invoked actor is a gate the
 * test opens (`resolve`) or fails (`reject`); timers fire only when the test moves the clock; the KVP writer records
 * what it receives; every transition the interpreter takes is recorded through `inspect`.
 */
import { createActor, fromCallback, fromPromise, SimulatedClock, type AnyStateMachine, type AnyTransitionDefinition, type InspectionEvent } from 'xstate';
import { provisioningMachine } from '../../machines/provisioning-machine.js';
import type { KvpEvent, ProvisioningInput } from '../../machines/provisioning.js';
import { STATE, stateValue } from '../support/chart.js';
import type { ModelEvent } from './support.js';

export { startup } from './support.js';

/** One start of one invoked actor: what it was given, and the switch that finishes it. */
export interface Gate {
  id: string;
  input: any;
  signal: AbortSignal;
  /** Position in the run's shared sequence of actor starts and KVP records. */
  seq: number;
  settled: boolean;
  /** How it was settled: finished, or failed. */
  outcome?: 'done' | 'failed';
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

export interface KvpRecord {
  event: KvpEvent;
  seq: number;
}

const GATED = [
  'reportHealth',
  'fetchMetadata',
  'readMedia',
  'validatePlan',
  'setHostname',
  'publishHostname',
  'createUser',
  'setPassword',
  'writeSshKeys',
  'fetchCertificates',
  'configureSshd',
  'regenerateHostKeys',
  'addHostKeys',
  'completeHostKeys',
  'checkProxyAgent',
  'markReportPending',
  'markProvisioned',
  'saveCustomData',
  'markWaitingForReuse',
  'pollReprovisionData',
  'markWaitingForShutdown',
  'waitForNicDetach',
  'waitForNicAttach',
  'probePrimaryNic',
  'waitForCarrierSwitch',
  'renewLease',
] as const;

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** More microsteps than this for one event is an endless loop of eventless transitions (the real chart takes a few). */
const MICROSTEPS_PER_EVENT = 1000;

export type Run = ReturnType<typeof startRun>;

/** What one run's fake actors record; found through the run's actor system, so one provided chart serves every run. */
interface RunRecord {
  seq: number;
  gates: Gate[];
  kvp: KvpRecord[];
  kvpStarted: boolean;
  kvpStopped: boolean;
  /**
   * What the chart told systemd's notifier, as the notifier sends it: READY once, however often the chart says so.
   * Read from the events sent to it, not from the notifier: a chart that ends in its first state never starts its
   * children (a run's READY=1 before exit is then the one systemd hears).
   */
  systemd: string[];
}

const records = new WeakMap<object, RunRecord>();
const recordOf = (system: object) => records.get(system)!;

const gated = fromPromise<any, any>(
  ({ input: actorInput, self, signal, system }) =>
    new Promise((resolve, reject) => {
      const record = recordOf(system);
      const gate: Gate = {
        id: self.id,
        input: actorInput,
        signal,
        seq: record.seq++,
        settled: false,
        resolve: (value) => {
          gate.settled = true;
          gate.outcome = 'done';
          resolve(value);
        },
        reject: (error) => {
          gate.settled = true;
          gate.outcome = 'failed';
          reject(error);
        },
      };
      record.gates.push(gate);
    }),
);

const kvpWriter = fromCallback<KvpEvent>(({ receive, system }) => {
  const record = recordOf(system);
  record.kvpStarted = true;
  receive((event) => {
    // Lets a path fail the writer for real: an error thrown while receiving stops the callback actor.
    if ((event as { type: string }).type === 'test.kvp.fail') throw (event as unknown as { error: unknown }).error;
    record.kvp.push({ event, seq: record.seq++ });
  });
  return () => {
    record.kvpStopped = true;
  };
});

/** READY=1 as the run's service manager hears it: once, however often the chart says so. */
const tellSystemdReady = ({ system }: { system: unknown }) => {
  const { systemd } = recordOf(system as never);
  if (!systemd.includes('READY')) systemd.push('READY');
};

/** Each chart provided with the fake actors once: building a machine is the costly part of a short run. */
const provided = new WeakMap<AnyStateMachine, AnyStateMachine>();
function withFakes(chart: AnyStateMachine): AnyStateMachine {
  let machine = provided.get(chart);
  if (!machine) {
    machine = chart.provide({ actors: { ...Object.fromEntries(GATED.map((name) => [name, gated])), kvpWriter } as any, actions: { tellSystemdReady } as any });
    provided.set(chart, machine);
  }
  return machine;
}

/**
 * How the IMDS request's head start ends: `written` — as the real IMDS actor does, the run tells the chart its
 * request has been written (`imds.sent`) whenever the chart waits for it, so a test can go straight to the media and
 * the host keys; `path` — only when the test (a model path) sends `imds.sent` or moves the clock.
 */
export type HeadStart = 'written' | 'path';

const MEDIA_WAITING = stateValue(STATE.mediaWaiting);

/**
 * Creates and starts an actor of the real machine with `input` (see `startup` for a run's reads before the chart);
 * nothing moves until the test opens a gate or moves the clock.
 */
export function startRun(input: ProvisioningInput, chart: AnyStateMachine = provisioningMachine, headStart: HeadStart = 'written') {
  const record: RunRecord = { seq: 0, gates: [], kvp: [], kvpStarted: false, kvpStopped: false, systemd: [] };
  const { gates, kvp, systemd } = record;
  const transitions: AnyTransitionDefinition[] = [];
  const errors: unknown[] = [];
  const clock = new SimulatedClock();
  const dueAt = new WeakMap<object, number>();
  const machine = withFakes(chart);
  let microsteps = 0;

  const actor = createActor(machine, {
    input,
    clock,
    inspect: (event: InspectionEvent) => {
      if (event.type !== '@xstate.microstep' || event.actorRef.sessionId !== event.rootId) return;
      transitions.push(...event._transitions);
      // Thrown inside the interpreter's step, this stops the actor with an error the test sees.
      if (++microsteps > MICROSTEPS_PER_EVENT) throw new Error(`more than ${MICROSTEPS_PER_EVENT} microsteps for one event: an endless loop`);
    },
  });
  records.set(actor.system, record);
  actor.subscribe({ error: (error) => errors.push(error) });

  /** Records the due time of each timer scheduled since the last call; time only moves in `fire`. */
  const noteTimers = () => {
    for (const scheduled of Object.values(actor.system.getSnapshot()._scheduledEvents)) {
      if (!dueAt.has(scheduled)) dueAt.set(scheduled, clock.now() + (scheduled as { delay: number }).delay);
    }
  };

  /** The most recent start of the actor invoked as `id`. */
  const latest = (id: string): Gate | undefined => gates.filter((g) => g.id === id).at(-1);

  const pending = (id: string): Gate => {
    const gate = latest(id);
    if (!gate || gate.settled || gate.signal.aborted) throw new Error(`actor '${id}' is not running`);
    return gate;
  };

  /**
   * Fires the timer that sends `type`, moving the clock to its due time. Throws when another timer is due earlier:
   * such a path cannot happen in real time.
   */
  const fire = (type: string) => {
    const scheduled = Object.values(actor.system.getSnapshot()._scheduledEvents);
    const timer = scheduled.find((s) => s.event.type === type);
    if (!timer) throw new Error(`no timer is scheduled for ${type}`);
    const due = dueAt.get(timer)!;
    const earlier = scheduled.filter((s) => s !== timer && dueAt.get(s)! <= due);
    if (earlier.length) throw new Error(`${type} (due ${due} ms) cannot fire before ${earlier.map((s) => `${s.event.type} (due ${dueAt.get(s)} ms)`).join(', ')}`);
    clock.set(due);
  };

  /** After each step: the IMDS request of a `written` run is on its socket as soon as the chart waits for it. */
  const step = async () => {
    await settle();
    if (headStart === 'written' && actor.getSnapshot().status === 'active' && actor.getSnapshot().matches(MEDIA_WAITING as never)) {
      actor.send({ type: 'imds.sent' });
      await settle();
    }
    noteTimers();
  };

  actor.start();
  // The first step starts the invoked actors before it runs the initial states' entry actions, all in one
  // synchronous turn; a request leaves the process only after it. So the first step's requests come after its KVP
  // records, as they do on the wire.
  for (const gate of gates) gate.seq = record.seq++;
  if (headStart === 'written' && actor.getSnapshot().matches(MEDIA_WAITING as never)) actor.send({ type: 'imds.sent' });
  noteTimers();

  return {
    actor,
    clock,
    gates,
    kvp,
    systemd,
    transitions,
    errors,
    /** The KVP writer is not running: it stopped, or never started (a chart that ended in its first state). */
    get kvpStopped() {
      return record.kvpStopped || !record.kvpStarted;
    },
    latest,
    pending,
    /** Lets promise settlements reach the machine. */
    settle,
    async resolve(id: string, value?: unknown) {
      microsteps = 0;
      pending(id).resolve(value);
      await step();
    },
    async reject(id: string, error: unknown) {
      microsteps = 0;
      if (id === 'kvp') (actor.getSnapshot().children as Record<string, { send(e: unknown): void }>).kvp!.send({ type: 'test.kvp.fail', error });
      else pending(id).reject(error);
      await step();
    },
    async fire(type: string) {
      microsteps = 0;
      fire(type);
      await step();
    },
    /** Moves the clock by `ms`, firing whatever falls due. */
    async advance(ms: number) {
      microsteps = 0;
      clock.increment(ms);
      await step();
    },
    async send(event: { type: 'TERMINATE' } | { type: 'imds.sent' }) {
      microsteps = 0;
      actor.send(event);
      await step();
    },
    /** Plays one event of a model path against the real actor. */
    async play(event: ModelEvent) {
      const { type } = event;
      if (type === 'xstate.init') return;
      if (type.startsWith('xstate.done.actor.')) return this.resolve(type.slice(18), event.output);
      if (type.startsWith('xstate.error.actor.')) return this.reject(type.slice(19), event.error);
      if (type.startsWith('xstate.after.')) return this.fire(type);
      if (type === 'TERMINATE' || type === 'imds.sent') return this.send({ type });
      // An oracle path moves the clock itself; every timer due by then fires, earliest first.
      if (type === 'time') return this.advance(event.to! - clock.now());
      throw new Error(`cannot play ${type}`);
    },
  };
}
