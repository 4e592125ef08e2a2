/**
 * Plays model paths of a provisioning chart (the real one, or a mutant) against the interpreter and compares, after
 * every event, what the outside world saw with what the oracle (oracle.ts) says it must see. No vitest here: the
 * mutation runner (scripts/mutate.ts) calls the same checks in-process for each mutant.
 */
import { createHash } from 'node:crypto';
import { TestModel } from 'xstate/graph';
import type { AnyStateMachine } from 'xstate';
import { provisioningMachine } from '../../machines/provisioning-machine.js';
import type { ProvisioningContext, ProvisioningInput, ProvisioningOutput } from '../../machines/provisioning.js';
import { toFailure, type Failure } from '../../src/core/errors.js';
import { startRun, type Gate, type Run } from './harness.js';
import { describeFailure, describePlan, ProvisioningOracle, type SeenFailure, type SeenOutput } from './oracle.js';
import { apply, oraclePaths } from './oracle-paths.js';
import { MODEL_STARTS, modelEvents, serializeState, shortEvent, type ModelEvent } from './support.js';
import type { BootstateError } from '../../src/core/errors.js';

const REPORT_IDS = new Set(['inProgressReport', 'readyReport', 'failureReport', 'poolReadyReport']);
const PLAN_IDS = new Set(['validate', 'hostname', 'user', 'password', 'certificates', 'ssh-keys', 'sshd']);
const MARKER_IDS = new Set(['pendingMarker', 'provisionedMarker', 'waitingMarker', 'shutdownMarker']);

const seenFailure = (f: Failure | null | undefined): SeenFailure | null => {
  if (!f) return null;
  const phase = f.data.find(([k]) => k === 'phase')?.[1];
  const lastError = f.data.find(([k]) => k === 'last_error')?.[1];
  const ppsType = f.data.find(([k]) => k === 'pps_type')?.[1];
  const key = f.data.find(([k]) => k === 'key')?.[1];
  return { code: f.code, ...(phase ? { phase } : {}), ...(lastError ? { lastError } : {}), ...(ppsType ? { ppsType } : {}), ...(key ? { key } : {}) };
};

/** One actor start as the world saw it: the request the fabric received, the plan an OS step got, the marker's VM. */
export function describeGate(gate: Gate): string {
  const input = gate.input as Record<string, any> | undefined;
  if (REPORT_IDS.has(gate.id)) {
    const failure = input?.failure ? ` ${describeFailure(seenFailure(toFailure(input.failure)))}` : '';
    return `${gate.id} ${input?.health} vm=${input?.vmId} pps=${input?.ppsType}${input?.answerMayBeLost ? ' answer-may-be-lost' : ''}${failure}`;
  }
  if (PLAN_IDS.has(gate.id)) {
    const plan = input?.plan;
    const described = `${gate.id} ${describePlan(plan && { ...plan, sshKeys: plan.sshKeys?.length })}`;
    const customData = `custom-data=${plan?.hasCustomData ?? false}/${plan?.customDataFound ?? false}`;
    return gate.id === 'validate' ? `${described} media-failure=${describeFailure(seenFailure(input?.mediaFailure))} ${customData}` : described;
  }
  if (MARKER_IDS.has(gate.id)) return `${gate.id} vm=${input?.vmId}`;
  if (gate.id === 'media') return input?.claimed ? 'media claimed' : 'media';
  if (gate.id === 'laterHostKeys') return `laterHostKeys ${input?.types?.join(',')}`;
  if (gate.id === 'reprovision') return `reprovision attempt=${input?.attempt} previous=${input?.previousError}`;
  if (gate.id === 'nicAttach') return `nicAttach tried=${input?.tried?.join(',')}`;
  if (gate.id === 'primaryNic') return `primaryNic nic=${input?.nic?.name}`;
  if (gate.id === 'lease') return `lease nic=${input?.nic}`;
  return gate.id;
}

/** The run's output as the exit status and the final log lines show it (provision.ts logs the cause's detail and the warnings). */
function seenOutput(run: Run): SeenOutput | null {
  const snapshot = run.actor.getSnapshot();
  if (snapshot.status !== 'done') return null;
  const output = snapshot.output as ProvisioningOutput;
  const context = snapshot.context as ProvisioningContext;
  const lastError = output.result === 'failed' ? seenFailure(context.failure ?? context.reportFailure)?.lastError : undefined;
  return {
    state: snapshot.value as SeenOutput['state'],
    result: output.result,
    exitCode: output.exitCode,
    ...(output.code ? { code: output.code as SeenOutput['code'] } : {}),
    reported: output.reported,
    ...(lastError ? { lastError } : {}),
    warnings: context.warnings,
  };
}

/** The marker this VM id has on disk: the last one a marker step finished writing, else the one the run found. */
function seenMarker(run: Run, input: ProvisioningInput): string {
  const written = run.gates.filter((g) => MARKER_IDS.has(g.id) && g.outcome === 'done').at(-1);
  const names: Record<string, string> = { pendingMarker: 'report-pending', provisionedMarker: 'provisioned', waitingMarker: 'waiting-for-reuse', shutdownMarker: 'waiting-for-shutdown' };
  if (written?.id === 'waitingMarker' && (written.input as { ppsType?: string }).ppsType === 'Savable') return 'waiting-for-reuse-savable';
  return written ? names[written.id]! : (input.startup?.marker ?? 'none');
}

const liveIds = (run: Run) => run.gates.filter((g) => !g.settled && !g.signal.aborted).map((g) => g.id).sort();

/** Throws, naming the first difference, unless the world saw what the oracle expects. */
function compare(run: Run, input: ProvisioningInput, oracle: ProvisioningOracle, after: string) {
  const problems: string[] = [];
  const eq = (what: string, actual: unknown, expected: unknown) => {
    if (JSON.stringify(actual) !== JSON.stringify(expected)) problems.push(`${what}: saw ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
  };
  if (run.errors.length) problems.push(`the actor failed: ${String(run.errors[0])}`);
  eq('actors started', run.gates.map(describeGate).sort(), [...oracle.starts].sort());
  eq('actors in flight', liveIds(run), oracle.live());
  eq('KVP records', run.kvp.map((r) => describeKvp(r.event)), oracle.kvp);
  eq('systemd told', run.systemd, oracle.systemd);
  eq('run over', run.actor.getSnapshot().status === 'done', oracle.done);
  eq('output', seenOutput(run), oracle.output);
  // Each warning as soon as the run has it, not only in the final output: a path that ends mid-run still shows it.
  eq('warnings so far', (run.actor.getSnapshot().context as ProvisioningContext).warnings, oracle.warningsSoFar);
  eq('marker', seenMarker(run, input), oracle.marker);
  if (oracle.done && oracle.kvpAlive) eq('KVP writer stopped', run.kvpStopped, true);
  if (problems.length) throw new Error(`after ${after}: ${problems.join('; ')}`);
}

function describeKvp(event: { health: string; vmId: string; failure: Failure | null; ppsType: string }): string {
  const failure = event.failure ? ` ${describeFailure(seenFailure(event.failure))}` : '';
  return `${event.health}${failure} vm=${event.vmId} pps=${event.ppsType}`;
}

/** Plays one path's events, from the start `input` says, against `machine` and the oracle side by side. */
export async function playAgainstOracle(machine: AnyStateMachine, input: ProvisioningInput, events: ModelEvent[]): Promise<void> {
  const run = startRun(input, machine, 'path');
  const oracle = new ProvisioningOracle(input);
  try {
    compare(run, input, oracle, 'start');
    for (const event of events) {
      if (event.type === 'xstate.init') continue;
      await run.play(event);
      if (event.type.startsWith('xstate.after.')) oracle.advanceTo(run.clock.now());
      else apply(oracle, event);
      compare(run, input, oracle, shortEvent(event));
    }
  } finally {
    run.actor.stop();
  }
}

/** One TestModel of `machine` started with `input`. */
export const modelOf = (machine: AnyStateMachine, input: ProvisioningInput) =>
  new TestModel(machine, {
    input,
    events: (snapshot) => modelEvents(snapshot) as never[],
    serializeState: (snapshot, event, prev) => serializeState(snapshot, event, prev),
  });

/**
 * A path's stable id: where it comes from (`model` or `oracle`), its start, and a digest of its events in full
 * (outputs and errors included, which the readable name leaves out). The kill-set (kill-set.json) names paths by it.
 */
export function pathId(source: 'model' | 'oracle', start: string, events: ModelEvent[]): string {
  return `${source} ${start} ${createHash('sha256').update(events.map(eventLabel).join('\n')).digest('hex').slice(0, 16)}`;
}

/** An event in full: type, output, error code and retryability, clock reading. */
export function eventLabel(e: ModelEvent): string {
  const error = e.error as BootstateError | undefined;
  return [e.type, e.output === undefined ? '' : JSON.stringify(e.output), error ? `${error.code}:${error.retryable}` : '', e.to ?? ''].join('|');
}

export interface PlayablePath {
  id: string;
  /** The start and the events, for reading: not unique (outputs are abridged). */
  name: string;
  start: string;
  input: ProvisioningInput;
  events: ModelEvent[];
}

/**
 * The shortest paths to every transition of `machine`, from each of the starts MODEL_STARTS (what the run read
 * before the chart), one TestModel each (see provisioning.test.ts for the bounds on the regions).
 */
export function modelPaths(machine: AnyStateMachine) {
  return MODEL_STARTS.flatMap(({ name: start, input }) =>
    modelOf(machine, input).getShortestPaths().map((path) => {
      const events = path.steps.slice(1).map((s) => s.event as ModelEvent);
      return { id: pathId('model', start, events), name: `${start}: ${events.map(shortEvent).join(' → ') || 'start'}`, start, input, events, path };
    }),
  );
}

let oracleCache: PlayablePath[] | null = null;
/** The oracle's own paths, computed once: they do not depend on the chart. */
export const ORACLE_PATHS = (): PlayablePath[] =>
  (oracleCache ??= oraclePaths().map(({ start, events }) => ({
    id: pathId('oracle', start.name, events),
    name: `(oracle) ${start.name}: ${events.map(shortEvent).join(' → ') || 'start'}`,
    start: start.name,
    input: start.input,
    events,
  })));

/**
 * A path of the real chart with each timer event replaced by the clock reading it fired at: played on a mutant it
 * moves the clock as the oracle does, whatever timers the mutant has.
 */
async function withClockReadings(input: ProvisioningInput, events: ModelEvent[]): Promise<ModelEvent[]> {
  const run = startRun(input, provisioningMachine, 'path');
  try {
    const played: ModelEvent[] = [];
    for (const event of events) {
      if (event.type === 'xstate.init') continue;
      await run.play(event);
      played.push(event.type.startsWith('xstate.after.') ? { type: 'time', to: run.clock.now() } : event);
    }
    return played;
  } finally {
    run.actor.stop();
  }
}

export interface CheckPath {
  /** Stable across runs while the path exists: what the kill-set records. */
  id: string;
  name: string;
  /** Throws, naming the first difference, unless `machine` shows the world what the oracle expects on this path. */
  play(machine: AnyStateMachine): Promise<void>;
}

const checkPath = ({ id, name, input, events }: { id: string; name: string; input: ProvisioningInput; events: ModelEvent[] }): CheckPath => ({
  id,
  name,
  play: (machine) => playAgainstOracle(machine, input, events),
});

/**
 * Paths that do not depend on the chart under test: the oracle's own, and the real chart's model paths (their clock
 * readings taken on the real chart the first time each is played).
 */
export async function fixedPaths(): Promise<CheckPath[]> {
  const chart = modelPaths(provisioningMachine).map(({ id, name, input, events }): CheckPath => {
    let played: Promise<ModelEvent[]> | undefined;
    return { id, name, play: async (machine) => playAgainstOracle(machine, input, await (played ??= withClockReadings(input, events))) };
  });
  return [...ORACLE_PATHS().map(checkPath), ...chart];
}

/** The shortest paths of `machine` itself (a mutant generates its own, as the model tests do for the real chart). */
export const ownPaths = (machine: AnyStateMachine): CheckPath[] => modelPaths(machine).map(checkPath);
