/**
 * The monitor chart's data (machines/monitor.ts): what a measurement finds, the chart's input and output, and the
 * state one `bootstate monitor --once` hands to the next, so that a timer-started cycle rolls up failures across runs.
 */
import type { Observation } from '../src/azure/healthservice.js';

export const HEARTBEAT = 'GuestAgentPluginHeartbeat';
export const VERSIONS = 'GuestAgentPluginVersions';
export const IMDS_HEARTBEAT = 'InstanceMetadataHeartbeat';

/** What one measurement found: its own health, the text for `Value`, and when it finished (clock ms). */
export interface Measurement {
  ok: boolean;
  value: string;
  at: number;
}

/** A `/versions` measurement also says whether the plugin supports the protocol version we need. */
export interface VersionsMeasurement extends Measurement {
  available: boolean;
}

/**
 * What a run leaves for the next one: the failure streaks (clock ms, so the clock must be one that all runs of a boot
 * share) and whether the plugin was found usable, after which `/versions` is not measured again.
 */
export interface MonitorState {
  heartbeatStreak: number | null;
  imdsStreak: number | null;
  versionsAvailable: boolean;
}

/** Periods and roll-up windows in milliseconds, whether to stop after one measurement per signal, and the state to go on from. */
export interface MonitorInput {
  once: boolean;
  heartbeatPeriodMs: number;
  versionsPeriodMs: number;
  imdsPeriodMs: number;
  heartbeatRollupMs: number;
  imdsRollupMs: number;
  /** What the previous run left (`--once` under the timer); null: a first run. */
  saved: MonitorState | null;
}

export interface MonitorContext extends Omit<MonitorInput, 'saved'>, MonitorState {
  stopRequested: boolean;
  reporterFailed: boolean;
}

export interface MonitorOutput {
  result: 'completed' | 'stopped' | 'failed';
  exitCode: number;
  /** What the next run goes on from. */
  state: MonitorState;
}

export type MonitorEvent = { type: 'STOP' };

/** The only event the reporter receives. */
export type ReporterEvent = { type: 'OBSERVE'; observation: Observation };
