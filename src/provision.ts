/**
 * Runs one provisioning. This module loads the config, takes the instance lock and, on a first boot, sends the
 * first IMDS request (src/azure/first-imds-request.ts); only then does it load the rest (src/provision-run.ts:
 * logging, KVP, the journal, the chart with its real actors, the OS steps), whose modules are most of what a start
 * evaluates. That request is the IMDS actor's first attempt, so it travels while they load. `cli.ts` maps the
 * output to the exit code.
 */
import { join } from 'node:path';
import type { InspectionEvent } from 'xstate';
import type { ProvisioningOutput } from '../machines/provisioning.js';
import { FirstImdsRequest } from './azure/first-imds-request.js';
import { DEFAULT_CONFIG, SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE, type Config } from './config/defaults.js';
import { loadConfig } from './config/load.js';
import type { StepSelection } from './config/steps.js';
import { toFailure } from './core/errors.js';
import { acquireInstanceLock, type InstanceLock } from './instance-lock.js';
import type { LogFormat } from './logging/log-text.js';
import { AZURE_INIT_DATA_DIR, FileMarkerStore } from './os/marker.js';
import type { MarkerState } from './os/provisioner.js';
import { checkPlatform } from './os/platform.js';
import { readVmId, type VmId } from './os/vmid.js';
import type { SinkFailure } from './logging/sinks.js';

/** Signals that end a run the same way: the failure report within the short budget, unless Ready is pending. */
export const TERMINATING_SIGNALS: NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'];
/** Where the instance lock goes when `<data_dir>` cannot hold it, so two agents never provision at once. */
export const RUNTIME_LOCK_DIR = '/run/bootstate';

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
/**
 * How long loading the rest waits at most for the first IMDS request to be written. On a VM that takes well under a
 * millisecond; the bound is for a connection that hangs, whose attempt then goes on beside the rest.
 */
export const FIRST_REQUEST_HEAD_START_MS = 50;

/** The loaded configuration, as the run uses it. */
export type LoadedConfig =
  | { ok: true; config: Config; warnings: string[] }
  | { ok: false; error: unknown; config: Config; warnings: string[] };

/** What the instance lock came to: held (or not, and why), or refused because another agent holds it. */
export interface LockOutcome {
  instance: InstanceLock | null;
  /** Lines for the log once it exists: why the lock moved, or why the run goes on without it. */
  warnings: Array<{ code: string; reason?: string; message: string }>;
  /** Another agent holds it: this run reports nothing. */
  refused?: { error: unknown };
}

/** Provisions this VM (or a dry-run directory) once and returns the chart's output. */
export async function runProvision(options: ProvisionOptions = {}): Promise<ProvisionResult> {
  const dryRunDir = options.dryRun ? options.scratchDir : undefined;
  const adjust = (c: Config): Config => {
    const adjusted = (options.adjustConfig ?? ((x: Config) => x))(c);
    return dryRunDir ? keepUnder(dryRunDir, adjusted) : adjusted;
  };
  const loaded = await loadConfig({
    systemFile: options.systemConfigFile ?? SYSTEM_CONFIG_FILE,
    dropinDir: options.dropinDir ?? SYSTEM_CONFIG_DROPIN_DIR,
    override: options.configPath ?? process.env.BOOTSTATE_CONFIG,
  }).then(
    (result) => ({ ok: true as const, config: adjust(result.config), warnings: result.warnings }),
    (error: unknown) => ({ ok: false as const, error, config: adjust(DEFAULT_CONFIG), warnings: [] }),
  );
  const config: Config = withSkippedSteps(loaded.config, options.steps);
  if (!loaded.ok && options.scratchDir) {
    // A dry run must not fall back to the defaults: they point at this machine's /var and the real fabric.
    const failure = toFailure(loaded.error);
    (options.stderr ?? process.stderr).write(`bootstate: ${(loaded.error as Error)?.message ?? failure.reason}; dry run not started\n`);
    return { result: 'failed', exitCode: failure.exitCode, reason: failure.reason, code: failure.code, reported: false, journalPath: null, config, commands: [], sinksOff: [], kvpReport: 'off' };
  }

  const signals = options.handleSignals ? catchSignals() : null;
  // Off Azure (no asset tag, no media) nothing is read or sent: the chart ends in notOnAzure.
  const platform = await checkPlatform(config, options.sysRoot ?? '/');
  const lock = takeInstanceLock(config, options.scratchDir);
  const beforeChart = loaded.ok && !lock.refused && platform.onAzure ? await readBeforeChart(config, options.sysRoot ?? '/') : null;
  // The first IMDS attempt, sent now when this boot will want it: this VM id has no marker, ours or azure-init's.
  // A provisioned VM's boots, a pending Ready and a pool VM waiting to be claimed send no request.
  const first = beforeChart?.marker === 'none' ? new FirstImdsRequest(config.imds) : null;
  try {
    await first?.written(FIRST_REQUEST_HEAD_START_MS);
    const { provisionLoaded } = await import('./provision-run.js');
    return await provisionLoaded(options, { loaded, config, lock, beforeChart, platform, first, signals });
  } finally {
    signals?.stop();
    first?.drop();
  }
}

/** Terminating signals caught for a run, from before its chart exists until it has ended. */
export interface CaughtSignals {
  /** From now on each signal calls `terminate`; one caught before this calls it at once. */
  deliverTo(terminate: () => void): void;
  /** Restores the default handling (idempotent). */
  stop(): void;
}

/**
 * Catches TERMINATING_SIGNALS from the start of a run, so that a signal while the agent is still loading (systemd
 * stopping the unit in its first tenth of a second) ends it with a failure report like one a moment later would,
 * instead of killing it silently.
 */
function catchSignals(): CaughtSignals {
  let caught = false;
  let terminate: (() => void) | null = null;
  const onSignal = () => (terminate ? terminate() : (caught = true));
  for (const signal of TERMINATING_SIGNALS) process.on(signal, onSignal);
  return {
    deliverTo(fn) {
      terminate = fn;
      if (caught) fn();
    },
    stop() {
      for (const signal of TERMINATING_SIGNALS) process.off(signal, onSignal);
    },
  };
}

/**
 * This VM id and its marker state, read as the chart would read them, once the lock is held; the chart takes them
 * from here. Null when either cannot be read (a planted marker, an unreadable data directory): the chart then reads
 * them itself and reports why, and no IMDS request goes out before it.
 */
async function readBeforeChart(config: Config, sysRoot: string): Promise<{ vmId: VmId; marker: MarkerState } | null> {
  try {
    const vmId = await readVmId({ sysRoot });
    return { vmId, marker: await markerStore(config).state(vmId.vmId) };
  } catch {
    return null;
  }
}

/** The marker store of a run: our data directory, and azure-init's provisioned markers. */
export const markerStore = (config: Config): FileMarkerStore => new FileMarkerStore(config.data_dir.path, [AZURE_INIT_DATA_DIR]);

/**
 * One agent at a time. An unusable data directory still gets one: the lock moves to the runtime directory (under
 * the scratch root for dry and scratch runs); only when neither can hold it does the run go on unlocked.
 */
function takeInstanceLock(config: Config, scratchDir: string | undefined): LockOutcome {
  const outcome: LockOutcome = { instance: null, warnings: [] };
  const lockDirs = [config.data_dir.path, scratchDir ? join(scratchDir, RUNTIME_LOCK_DIR) : RUNTIME_LOCK_DIR];
  for (const [index, dir] of lockDirs.entries()) {
    try {
      outcome.instance = acquireInstanceLock(dir);
      if (index > 0) outcome.warnings.push({ code: 'IO', message: `instance lock taken in ${dir} because ${config.data_dir.path} cannot hold it` });
      return outcome;
    } catch (error) {
      const failure = toFailure(error);
      if (failure.code === 'ALREADY_RUNNING') return { ...outcome, refused: { error } };
      const last = index === lockDirs.length - 1;
      outcome.warnings.push({ code: failure.code, reason: failure.reason, message: `${last ? 'running without the instance lock' : 'instance lock not taken'}: ${(error as Error).message}` });
    }
  }
  return outcome;
}

/**
 * A dry run's config: the data dir (markers, lock, journals, saved custom data), the log and the KVP pool directory
 * moved under `dir`, so nothing outside it is written.
 */
export function keepUnder(dir: string, config: Config): Config {
  return {
    ...config,
    data_dir: { path: join(dir, config.data_dir.path) },
    log_path: { path: config.log_path.path ? join(dir, config.log_path.path) : '' },
    telemetry: { ...config.telemetry, kvp_dir: join(dir, config.telemetry.kvp_dir) },
    custom_data: {
      ...config.custom_data,
      custom_data_path: config.custom_data.custom_data_path ? join(dir, config.custom_data.custom_data_path) : '',
      user_data_path: config.custom_data.user_data_path ? join(dir, config.custom_data.user_data_path) : '',
    },
  };
}
/** The config with the steps `--only`/`--skip` leave out added to `[steps] skip`. */
function withSkippedSteps(config: Config, steps: StepSelection | undefined): Config {
  if (!steps || steps.skip.length === 0) return config;
  return { ...config, steps: { skip: [...new Set([...config.steps.skip, ...steps.skip])] } };
}
