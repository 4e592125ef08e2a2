/**
 * Plays paths of a monitor chart (the real one or a mutant) on the interpreter with gated checks and a StepClock,
 * comparing after every event what left the process — observations sent, requests made per check, checks in
 * flight, the output — with the oracle (oracle.ts). Paths come from the chart (xstate/graph) and from the oracle's
 * own states, so a mutant cannot avoid the event that exposes it. No vitest here: scripts/mutate.ts runs it too.
 */
import { createActor, type AnyEventObject, type AnyStateMachine } from 'xstate';
import { TestModel } from 'xstate/graph';
import { monitorMachine, type MonitorInput, type MonitorState } from '../../machines/monitor.js';
import type { Observation } from '../../src/azure/healthservice.js';
import { BREAK_REPORTER, Gates, StepClock, gatedActors, settle } from './harness.js';
import { MonitorOracle, type SeenMeasurement, type Signal } from './oracle.js';

// Distinct periods let the clock tell the regions' timers apart; zero roll-up makes every failure visible
// in the observation, so each step's report can be checked (roll-up over time has its own scenario tests).
export const INPUT: Omit<MonitorInput, 'once' | 'saved'> = {
  heartbeatPeriodMs: 1_000,
  versionsPeriodMs: 2_000,
  imdsPeriodMs: 3_000,
  heartbeatRollupMs: 0,
  imdsRollupMs: 0,
};

/** How a run starts: resident, one cycle from nothing, or one cycle going on from what an earlier one left. */
export interface Mode {
  once: boolean;
  saved: MonitorState | null;
  label: string;
}

/** An earlier cycle's failure streaks (before this run's clock began) and a usable plugin. */
const SAVED: MonitorState = { heartbeatStreak: -60_000, imdsStreak: -120_000, versionsAvailable: true };

export const MODES: Mode[] = [
  { once: false, saved: null, label: '' },
  { once: true, saved: null, label: '--once: ' },
  { once: true, saved: SAVED, label: '--once after a cycle: ' },
];

export const inputOf = (mode: Mode): MonitorInput => ({ ...INPUT, once: mode.once, saved: mode.saved });

export const REGIONS = [
  { key: 'heartbeat', actor: 'checkHeartbeat', delay: 'heartbeatPeriod', ms: INPUT.heartbeatPeriodMs },
  { key: 'versions', actor: 'checkVersions', delay: 'versionsPeriod', ms: INPUT.versionsPeriodMs },
  { key: 'imds', actor: 'checkImds', delay: 'imdsPeriod', ms: INPUT.imdsPeriodMs },
] as const;

/** What each check can find: healthy, unhealthy, and for /versions also "answered but not available". */
function measurements(key: Signal): SeenMeasurement[] {
  if (key === 'versions') {
    return [
      { ok: true, value: '', available: true, at: 0 },
      { ok: true, value: 'HTTP status 404', available: false, at: 0 },
      { ok: false, value: 'HTTP status 500', available: false, at: 0 },
    ];
  }
  return [
    { ok: true, value: '', at: 0 },
    { ok: false, value: 'Missing field: [network]', at: 0 },
  ];
}

const done = (actor: string, output: SeenMeasurement) => ({ type: `xstate.done.actor.${actor}`, output });
const periodOver = (r: (typeof REGIONS)[number]) => ({ type: `xstate.after.${r.delay}.monitor.running.${r.key}.waiting` });

/** Every event the chart can take in `snapshot`, with the payloads its guards and actions read. */
export function eventsFor(snapshot: any): AnyEventObject[] {
  if (snapshot.status !== 'active') return [];
  const events: AnyEventObject[] = [];
  for (const region of REGIONS) {
    if (snapshot.matches({ running: { [region.key]: 'measuring' } })) {
      for (const m of measurements(region.key)) events.push(done(region.actor, m));
      events.push({ type: `xstate.error.actor.${region.actor}`, error: 'bug' });
    }
    if (snapshot.matches({ running: { [region.key]: 'waiting' } })) events.push(periodOver(region));
  }
  if (snapshot.matches('running')) events.push({ type: 'STOP' });
  if (snapshot.matches('stopping')) {
    events.push({ type: 'xstate.done.actor.flush', output: undefined });
    events.push({ type: 'xstate.error.actor.flush', error: 'bug' });
  }
  events.push({ type: 'xstate.error.actor.reporter', error: 'bug' });
  return events;
}

/** The incoming edge's identity: event type plus the payload fields guards and actions branch on. */
export function edgeKey(event: AnyEventObject | undefined): string {
  if (!event) return 'init';
  const o = (event.output ?? {}) as { ok?: boolean; available?: boolean };
  return `${event.type}${o.ok === undefined ? '' : `:ok=${o.ok}`}${o.available === undefined ? '' : `:available=${o.available}`}`;
}

/** State value, incoming edge and every context field that changes (guards, observations and output read them). */
export function serializeState(snapshot: any, event: AnyEventObject | undefined): string {
  const { once, heartbeatStreak, imdsStreak, versionsAvailable, stopRequested, reporterFailed } = snapshot.context;
  return JSON.stringify({
    value: snapshot.value,
    status: snapshot.status,
    context: { once, heartbeatStreak, imdsStreak, versionsAvailable, stopRequested, reporterFailed },
    via: edgeKey(event),
  });
}

/** What the oracle can be told at its current state (the same vocabulary as the chart's events). */
function oracleOffers(oracle: MonitorOracle): AnyEventObject[] {
  if (oracle.over) return [];
  const events: AnyEventObject[] = [];
  if (oracle.running) {
    for (const region of REGIONS) {
      if (oracle.signals[region.key] === 'measuring') {
        for (const m of measurements(region.key)) events.push(done(region.actor, m));
        events.push({ type: `xstate.error.actor.${region.actor}`, error: 'bug' });
      }
      if (oracle.signals[region.key] === 'waiting') events.push(periodOver(region));
    }
    events.push({ type: 'STOP' });
  }
  if (oracle.flushing) {
    events.push({ type: 'xstate.done.actor.flush', output: undefined });
    events.push({ type: 'xstate.error.actor.flush', error: 'bug' });
  }
  events.push({ type: 'xstate.error.actor.reporter', error: 'bug' });
  return events;
}

function tell(oracle: MonitorOracle, event: AnyEventObject) {
  const region = REGIONS.find((r) => event.type.endsWith(`.${r.actor}`) || event.type.startsWith(`xstate.after.${r.delay}.`));
  if (event.type === 'STOP') oracle.stop();
  else if (event.type === 'xstate.error.actor.reporter') oracle.reporterBroke();
  else if (event.type.endsWith('.flush')) oracle.flushEnded();
  else if (!region) throw new Error(`the oracle does not know ${event.type}`);
  else if (event.type.startsWith('xstate.done.actor.')) oracle.measured(region.key, event.output as SeenMeasurement);
  else if (event.type.startsWith('xstate.error.actor.')) oracle.broke(region.key);
  else oracle.periodOver(region.key);
}

/** Shortest event sequences reaching every (oracle state, event) pair, for `mode`; none a prefix of another. */
export function oraclePaths(mode: Mode): AnyEventObject[][] {
  const paths: Array<{ events: AnyEventObject[]; extended: boolean; oracle: MonitorOracle }> = [];
  const seen = new Set<string>();
  let frontier: Array<{ oracle: MonitorOracle; path: (typeof paths)[number] | null }> = [{ oracle: new MonitorOracle(inputOf(mode)), path: null }];
  while (frontier.length) {
    const next: typeof frontier = [];
    for (const { oracle, path } of frontier) {
      for (const event of oracleOffers(oracle)) {
        const edge = `${oracle.key()} ${edgeKey(event)}`;
        if (seen.has(edge)) continue;
        seen.add(edge);
        const after = oracle.clone();
        tell(after, event);
        if (path) path.extended = true;
        const child = { events: [...(path?.events ?? []), event], extended: false, oracle: after };
        paths.push(child);
        next.push({ oracle: after, path: child });
      }
    }
    frontier = next;
  }
  // A path that ends where another went on still lets every waiting period elapse: a signal that wrongly stopped
  // after a broken measurement shows itself only when its period is over.
  return paths
    .filter((p) => !p.extended)
    .map(({ events, oracle }) => [...events, ...(oracle.running ? REGIONS.filter((r) => oracle.signals[r.key] === 'waiting').map(periodOver) : [])]);
}

export function describePath(events: AnyEventObject[]): string {
  return events.map((e) => edgeKey(e).replace(/^xstate\.(done|error|after)\.(actor\.)?/, '$1 ')).join(' → ') || 'start';
}

/** Plays `events` on `machine` and the oracle side by side; throws at the first difference. */
export async function playAgainstOracle(machine: AnyStateMachine, mode: Mode, events: AnyEventObject[]): Promise<void> {
  const gates = new Gates();
  const observations: Observation[] = [];
  const clock = new StepClock();
  const errors: unknown[] = [];
  const actor = createActor(machine.provide({ actors: gatedActors(gates, observations) } as never), { input: inputOf(mode), clock });
  actor.subscribe({ error: (e) => errors.push(e) });
  const oracle = new MonitorOracle(inputOf(mode));
  const compare = (after: string) => {
    const snapshot = actor.getSnapshot();
    const requests = Object.fromEntries(Object.keys(oracle.requests).map((id) => [id, gates.invocations.get(id) ?? 0]));
    const seen = {
      observations,
      requests,
      inFlight: gates.inFlight(),
      output: snapshot.status === 'done' ? snapshot.output : null,
      timersLeft: snapshot.status === 'done' ? clock.pending : 0,
      errors: errors.map(String),
    };
    const expected = { observations: oracle.observations, requests: oracle.requests, inFlight: oracle.inFlight(), output: oracle.output, timersLeft: 0, errors: [] };
    for (const key of Object.keys(seen) as Array<keyof typeof seen>) {
      if (JSON.stringify(seen[key]) !== JSON.stringify(expected[key])) {
        throw new Error(`after ${after}: ${key}: saw ${JSON.stringify(seen[key])}, expected ${JSON.stringify(expected[key])}`);
      }
    }
  };
  actor.start();
  try {
    compare('start');
    for (const event of events) {
      const region = REGIONS.find((r) => event.type.startsWith(`xstate.after.${r.delay}.`));
      if (event.type === 'xstate.error.actor.reporter') {
        const reporter = actor.getSnapshot().children.reporter;
        if (!reporter) throw new Error('after the reporter broke: no reporter is running');
        reporter.send(BREAK_REPORTER as never);
      } else if (event.type.startsWith('xstate.done.actor.')) gates.resolve(event.type.slice(18), event.output);
      else if (event.type.startsWith('xstate.error.actor.')) gates.reject(event.type.slice(19), new Error('bug'));
      else if (region) clock.fire(region.ms);
      else actor.send(event as never);
      await settle();
      tell(oracle, event);
      compare(describePath([event]));
    }
  } finally {
    actor.stop();
  }
}

/** The chart's own shortest paths, for `mode`. */
export function modelPaths(machine: AnyStateMachine, mode: Mode) {
  const model = new TestModel(machine, { input: inputOf(mode), events: eventsFor as never, serializeState: serializeState as never });
  return model.getShortestPaths();
}

const oracleCache = new Map<Mode, AnyEventObject[][]>();

export interface CheckPath {
  /** Stable across runs while the path exists: what the kill-set records. */
  id: string;
  name: string;
  play(machine: AnyStateMachine): Promise<void>;
}

const checkPath = (mode: Mode, events: AnyEventObject[], source: 'model' | 'oracle'): CheckPath => ({
  id: `${source} ${mode.label}${describePath(events)}`,
  name: `${mode.label}${describePath(events)}`,
  play: (machine) => playAgainstOracle(machine, mode, events),
});

/** Paths that do not depend on the chart under test: the oracle's own and the real chart's model paths (their events name no chart state). */
export async function fixedPaths(): Promise<CheckPath[]> {
  return MODES.flatMap((mode) => [
    ...oraclePaths(mode).map((events) => checkPath(mode, events, 'oracle')),
    ...modelPaths(monitorMachine as unknown as AnyStateMachine, mode).map((p) => checkPath(mode, p.steps.slice(1).map((s) => s.event as AnyEventObject), 'model')),
  ]);
}

/** The shortest paths of `machine` itself. */
export const ownPaths = (machine: AnyStateMachine): CheckPath[] =>
  MODES.flatMap((mode) => modelPaths(machine, mode).map((p) => checkPath(mode, p.steps.slice(1).map((s) => s.event as AnyEventObject), 'model')));

/** The first path on which `machine` and the oracle disagree, or null. */
export async function firstDisagreement(machine: AnyStateMachine): Promise<{ path: string; message: string } | null> {
  for (const mode of MODES) {
    if (!oracleCache.has(mode)) oracleCache.set(mode, oraclePaths(mode));
    let chartPaths: AnyEventObject[][];
    try {
      chartPaths = modelPaths(machine, mode).map((p) => p.steps.slice(1).map((s) => s.event as AnyEventObject));
    } catch (error) {
      return { path: '(traversal)', message: String(error) };
    }
    for (const events of [...oracleCache.get(mode)!, ...chartPaths]) {
      try {
        await playAgainstOracle(machine, mode, events);
      } catch (error) {
        return { path: `${mode.label}${describePath(events)}`, message: (error as Error).message };
      }
    }
  }
  return null;
}
