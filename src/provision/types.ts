/** What a provisioning run is asked to do and what it returns, shared by its two halves (provision.ts, run-chart.ts). */
import type { InspectionEvent } from 'xstate';
import type { ProvisioningOutput, StartupFacts } from '../../machines/provisioning.js';
import type { Config } from '../config/defaults.js';
import type { StepSelection } from '../config/steps.js';
import type { VmId } from '../azure/vmid.js';
import type { LogFormat } from '../logging/log-text.js';
import type { SinkFailure } from '../logging/sinks.js';
import type { FirstImdsRequest } from './first-imds-request.js';
import type { LockOutcome } from './instance-lock.js';
import type { CaughtSignals } from './signals.js';

export interface ProvisionOptions {
  /** `--config FILE|DIR`. */
  configPath?: string;
  /** `--groups`, merged over the configured groups. */
  groups?: string[];
  systemConfigFile?: string;
  dropinDir?: string;
  /** Adjusts the loaded config (the demo points it at its embedded fabric). */
  adjustConfig?(config: Config): Config;
  /** Provision into DIR with the scratch backend (files under DIR, commands recorded) instead of changing this machine. */
  scratchDir?: string;
  /**
   * `--dry-run DIR` (with `scratchDir`): also keep the data dir, log, KVP pool and journals under DIR, and send no
   * health report — each one is passed to `onNote` instead.
   */
  dryRun?: boolean;
  /** What a dry run would have told the fabric, one line each. */
  onNote?: (line: string) => void;
  sysRoot?: string;
  /** `--inspect ws://…`: stream allow-listed inspection events to a Stately inspector. */
  inspectUrl?: string;
  /** Extra observers (the demo prints transitions). */
  inspect?: (event: InspectionEvent) => void;
  /** Install handlers for TERMINATING_SIGNALS that send TERMINATE (the CLI does; tests running in-process do not). */
  handleSignals?: boolean;
  /** `--only` / `--skip`: OS steps this run leaves out, merged into `[steps] skip`. */
  steps?: StepSelection;
  /** Where stderr log lines go; default fd 2. */
  stderr?: { write(line: string): unknown };
  /** Where console text goes (the new host keys' fingerprint block); default fd 1, which the unit copies to the console. */
  stdout?: { write(text: string): unknown };
  /** `--log-format`: stderr as JSON or text lines (default: text under systemd). */
  logFormat?: LogFormat;
}

export interface ProvisionResult extends ProvisioningOutput {
  journalPath: string | null;
  config: Config;
  /** Commands the scratch backend recorded (dry runs and the demo). */
  commands: string[][];
  /** Sinks turned off during the run (journal, log file, stderr, kvp telemetry, live inspector) and why. */
  sinksOff: SinkFailure[];
  /** The KVP copy of the report: `written`, `off` (disabled or never attempted), or `failed: <reason>`. */
  kvpReport: string;
}

/** The loaded configuration, as the run uses it. */
export type LoadedConfig =
  | { ok: true; config: Config; warnings: string[] }
  /**
   * The whole config failed (`error`); `config` holds what the run could still read: the keys saying where its state
   * is and where it reports, over the defaults (`keys`), or the defaults alone (`defaults`).
   */
  | { ok: false; error: unknown; fallback: 'keys' | 'defaults'; config: Config; warnings: string[] };

/** Whether this is an Azure VM: the platform check's answer, or why it could not give one. */
export type PlatformRead = Required<StartupFacts>['platform'];

/** Whether the platform check said this is an Azure VM; undefined when it failed (the run then goes on). */
export const onAzure = (platform: PlatformRead): boolean | undefined => ('failure' in platform ? undefined : platform.onAzure);

/**
 * What the first half of a run hands the second (provision.ts → run-chart.ts): the facts read before the chart, which
 * are the chart's input (`startup`, one type: the chart's own `StartupFacts`), and what the run holds until it ends.
 */
export interface BeforeChart {
  /** The config, the platform, the instance lock, the VM id and its marker, each read or why not; the first IMDS request. */
  facts: Required<StartupFacts>;
  /** The config as loaded (its warnings, and what a config that failed to load fell back on), for the log. */
  loaded: LoadedConfig;
  /** The run's config: `loaded.config` with the steps `--only`/`--skip` leave out. */
  config: Config;
  /** The VM id as read (`facts.vmId` is its id): where it came from and the VM's generation, for the log. */
  vmIdRead: VmId | null;
  /** The instance lock, released when the run ends; its warnings, for the log. */
  lock: LockOutcome;
  /** The first IMDS request, when the first half sent it (`facts.imdsSent`). */
  first: FirstImdsRequest | null;
  /** With `handleSignals`: the terminating signals, caught since the run began. */
  signals: CaughtSignals | null;
}
