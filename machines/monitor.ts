/**
 * The monitor statechart: the control flow of `bootstate monitor`, which keeps telling the fabric's health
 * store whether the host plugin and IMDS are reachable (docs/protocol.md#healthservice).
 *
 * One parallel region per signal loops `measuring` → `waiting` (`after` its period) → `measuring`. Each
 * measurement resolves with plain data (`ok`, `value`, and `at`, the clock reading when it finished), so the
 * chart stays pure: the failure streak is the `at` of its first failure, and a signal turns unhealthy only once
 * that streak is as old as its roll-up window. Every completed measurement sends exactly one observation to the
 * `reporter`, invoked on the root so it lives as long as the run; the reporter's client posts one observation
 * per POST and queues (at most ten) what arrives while a POST is in flight. STOP leaves `running`, which aborts
 * every measurement in flight, and `stopping` flushes the queue once before the final state.
 *
 * With `once` each region measures once and is done: the timer-started `bootstate monitor --once` runs one such cycle
 * a period, going on from the streaks (and the plugin's availability) the previous cycle left in its output.
 */
import { assign, enqueueActions, fromCallback, setup } from 'xstate';
import type { Observation } from '../src/azure/healthservice.js';
import type { MonitorConfig } from '../src/config/defaults.js';
import {
  HEARTBEAT,
  IMDS_HEARTBEAT,
  VERSIONS,
  type Measurement,
  type MonitorContext,
  type MonitorEvent,
  type MonitorInput,
  type MonitorOutput,
  type MonitorState,
  type ReporterEvent,
  type VersionsMeasurement,
} from './monitor-types.js';
import { placeholder } from './placeholder.js';
import { periodicFor, timerMs } from './retry.js';

export * from './monitor-types.js';

/** A period as a timer delay: never above 2^31−1 ms, where the runtime would fire at once and loop, nor below 1 ms. */
const periodMs = (secs: number) => timerMs(secs, 1);

/** Builds the chart input from configuration (seconds), the `--once` flag and what the previous run left. */
export function monitorInput(config: MonitorConfig, once: boolean, saved: MonitorState | null = null): MonitorInput {
  return {
    once,
    saved,
    heartbeatPeriodMs: periodMs(config.heartbeat_period_secs),
    versionsPeriodMs: periodMs(config.versions_period_secs),
    imdsPeriodMs: periodMs(config.imds_period_secs),
    heartbeatRollupMs: config.heartbeat_rollup_secs * 1000,
    imdsRollupMs: config.imds_rollup_secs * 1000,
  };
}

/**
 * Returns the streak start after one measurement: any success ends the streak, a failure starts one or
 * continues it.
 *
 * @example
 *   nextStreak(null, { ok: false, at: 60_000 })   // 60_000
 *   nextStreak(60_000, { ok: false, at: 120_000 }) // 60_000
 *   nextStreak(60_000, { ok: true, at: 180_000 })  // null
 */
export function nextStreak(streakStart: number | null, measurement: Pick<Measurement, 'ok' | 'at'>): number | null {
  if (measurement.ok) return null;
  return streakStart ?? measurement.at;
}

/**
 * Whether a signal counts as unhealthy at `now`: only once its failure streak began at least `rollupMs` ago.
 *
 * @example
 *   isUnhealthy(60_000, 300_000, 300_000) // false: 4 minutes of failures
 *   isUnhealthy(60_000, 360_000, 300_000) // true: 5 minutes
 */
export function isUnhealthy(streakStart: number | null, now: number, rollupMs: number): boolean {
  return streakStart !== null && now - streakStart >= rollupMs;
}

/** Builds the observation for a rolled-up signal from the streak after the measurement. */
export function rolledUpObservation(
  name: string,
  streakStart: number | null,
  measurement: Measurement,
  rollupMs: number,
  value: string,
): Observation {
  return { ObservationName: name, IsHealthy: !isUnhealthy(streakStart, measurement.at, rollupMs), Description: '', Value: value };
}

/** Builds the `/versions` observation: no roll-up, sent as measured. */
export function versionsObservation(measurement: VersionsMeasurement): Observation {
  return { ObservationName: VERSIONS, IsHealthy: measurement.ok, Description: '', Value: measurement.value };
}

const monitorSetup = setup({
  types: {
    context: {} as MonitorContext,
    input: {} as MonitorInput,
    events: {} as MonitorEvent,
    output: {} as MonitorOutput,
  },
  actors: {
    checkHeartbeat: placeholder<Measurement>('checkHeartbeat'),
    checkVersions: placeholder<VersionsMeasurement>('checkVersions'),
    checkImds: placeholder<Measurement>('checkImds'),
    reporter: fromCallback<ReporterEvent>(() => undefined),
    flush: placeholder<void>('flush'),
  },
  guards: {
    once: ({ context }) => context.once,
    versionsKnownAvailable: ({ context }) => context.versionsAvailable,
    versionsAvailable: (_, measurement: VersionsMeasurement) => measurement.available,
  },
  delays: {
    heartbeatPeriod: ({ context }) => context.heartbeatPeriodMs,
    versionsPeriod: ({ context }) => context.versionsPeriodMs,
    imdsPeriod: ({ context }) => context.imdsPeriodMs,
  },
  actions: {
    observeHeartbeat: enqueueActions(({ context, enqueue }, measurement: Measurement) => {
      const streak = nextStreak(context.heartbeatStreak, measurement);
      enqueue.assign({ heartbeatStreak: streak });
      const observation = rolledUpObservation(HEARTBEAT, streak, measurement, context.heartbeatRollupMs, '');
      enqueue.sendTo('reporter', { type: 'OBSERVE', observation } satisfies ReporterEvent);
    }),
    observeVersions: enqueueActions(({ enqueue }, measurement: VersionsMeasurement) => {
      enqueue.assign({ versionsAvailable: measurement.available });
      enqueue.sendTo('reporter', { type: 'OBSERVE', observation: versionsObservation(measurement) } satisfies ReporterEvent);
    }),
    observeImds: enqueueActions(({ context, enqueue }, measurement: Measurement) => {
      const streak = nextStreak(context.imdsStreak, measurement);
      enqueue.assign({ imdsStreak: streak });
      const observation = rolledUpObservation(IMDS_HEARTBEAT, streak, measurement, context.imdsRollupMs, measurement.value);
      enqueue.sendTo('reporter', { type: 'OBSERVE', observation } satisfies ReporterEvent);
    }),
    noteStop: assign({ stopRequested: true }),
    noteReporterFailed: assign({ reporterFailed: true }),
  },
});

const periodic = periodicFor(monitorSetup);
type Loop = Parameters<typeof periodic>[0];
type Done = Exclude<NonNullable<Loop['invoke']['onDone']>, readonly unknown[] | string>;

/** The observation a measurement makes, with the measurement as its `params`. */
const observed = <A extends 'observeHeartbeat' | 'observeVersions' | 'observeImds'>(type: A) =>
  ({ type, params: ({ event }: { event: { output: unknown } }) => event.output as VersionsMeasurement }) as const;

/**
 * One signal's loop: measure, observe, wait its period, measure again; with `once`, measure once and be done. An
 * actor classifies every answer, so a rejection is a bug: the cycle is skipped and the streak kept. `stopWhen`: the
 * transitions that end the loop early, after the `once` one.
 */
function signalLoop(
  src: 'checkHeartbeat' | 'checkVersions' | 'checkImds',
  observe: 'observeHeartbeat' | 'observeVersions' | 'observeImds',
  every: 'heartbeatPeriod' | 'versionsPeriod' | 'imdsPeriod',
  more: { stopWhen?: readonly Done[]; starting?: Loop['starting'] } = {},
) {
  return periodic({
    ...(more.starting ? { starting: more.starting } : {}),
    every,
    invoke: {
      id: src,
      src,
      onDone: [{ guard: 'once', target: 'done', actions: observed(observe) }, ...(more.stopWhen ?? []), { target: 'waiting', actions: observed(observe) }],
      onError: [{ guard: 'once', target: 'done' }, { target: 'waiting' }],
    },
    // The union of three sources widens the done event's output: each measurement's type is its actor's.
  } as Loop);
}

export const monitorMachine = monitorSetup.createMachine({
  id: 'monitor',
  context: ({ input: { saved, ...input } }) => ({
    ...input,
    heartbeatStreak: saved?.heartbeatStreak ?? null,
    imdsStreak: saved?.imdsStreak ?? null,
    versionsAvailable: saved?.versionsAvailable ?? false,
    stopRequested: false,
    reporterFailed: false,
  }),
  invoke: { id: 'reporter', src: 'reporter', onError: { target: '.stopped', actions: 'noteReporterFailed' } },
  initial: 'running',
  states: {
    running: {
      type: 'parallel',
      on: { STOP: { target: 'stopping', actions: 'noteStop' } },
      onDone: 'stopping',
      states: {
        heartbeat: signalLoop('checkHeartbeat', 'observeHeartbeat', 'heartbeatPeriod'),
        // The plugin is re-checked only until it is available, as waagent re-initialises it; a run that goes on from
        // one which found the plugin usable does not ask again.
        versions: signalLoop('checkVersions', 'observeVersions', 'versionsPeriod', {
          starting: { always: [{ guard: 'versionsKnownAvailable', target: 'done' }, { target: 'measuring' }] },
          stopWhen: [
            {
              guard: { type: 'versionsAvailable', params: ({ event }: { event: { output: unknown } }) => event.output as VersionsMeasurement },
              target: 'done',
              actions: observed('observeVersions'),
            },
          ],
        }),
        imds: signalLoop('checkImds', 'observeImds', 'imdsPeriod'),
      },
    },
    stopping: {
      invoke: { id: 'flush', src: 'flush', onDone: 'stopped', onError: 'stopped' },
    },
    stopped: { type: 'final' },
  },
  output: ({ context }): MonitorOutput => {
    const state = { heartbeatStreak: context.heartbeatStreak, imdsStreak: context.imdsStreak, versionsAvailable: context.versionsAvailable };
    if (context.reporterFailed) return { result: 'failed', exitCode: 1, state };
    return { result: context.stopRequested ? 'stopped' : 'completed', exitCode: 0, state };
  },
});

