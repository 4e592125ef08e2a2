/**
 * The first half of a provisioning run (see README.md here): loads the config, catches the terminating signals,
 * checks the platform, takes the instance lock, reads the VM id and its marker — each read's failure kept as a
 * Failure, for the chart to route on — and, on a first boot, sends the first IMDS request (first-imds-request.ts);
 * only then does it load the second half (run-chart.ts, the run composed in compose.ts: logging, KVP, the journal,
 * the chart with its real actors, the OS steps), whose modules are most of what a start evaluates. What it read is
 * the chart's input, `StartupFacts`, handed over in `BeforeChart` (types.ts).
 */
import { join } from 'node:path';
import type { StartupFacts } from '../../machines/provisioning.js';
import { DEFAULT_CONFIG, SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE, type Config } from '../config/defaults.js';
import { loadConfigOrOnly } from '../config/load.js';
import type { StepSelection } from '../config/steps.js';
import { toFailure } from '../core/errors.js';
import { markerStore } from './marker.js';
import { checkPlatform } from '../azure/platform.js';
import { readVmId, type VmId } from '../azure/vmid.js';
import { IMDS_HEAD_START_MS } from '../../machines/provisioning/head-start.js';
import { FirstImdsRequest } from './first-imds-request.js';
import { takeInstanceLock } from './instance-lock.js';
import { catchSignals } from './signals.js';
import { onAzure, type LoadedConfig, type ProvisionOptions, type ProvisionResult } from './types.js';

/** Provisions this VM (or a dry-run directory) once and returns the chart's output. */
export async function runProvision(options: ProvisionOptions = {}): Promise<ProvisionResult> {
  const dryRunDir = options.dryRun ? options.scratchDir : undefined;
  const adjust = (c: Config): Config => {
    const adjusted = (options.adjustConfig ?? ((x: Config) => x))(c);
    return dryRunDir ? keepUnder(dryRunDir, adjusted) : adjusted;
  };
  const loaded = await loadRunConfig(options, adjust);
  const config: Config = withSkippedSteps(loaded.config, options.steps);
  if (!loaded.ok && loaded.fallback === 'defaults' && options.scratchDir) {
    // A dry run must not fall back to the defaults: they point at this machine's /var and the real fabric.
    const failure = toFailure(loaded.error);
    (options.stderr ?? process.stderr).write(`bootstate: ${(loaded.error as Error)?.message ?? failure.reason}; dry run not started\n`);
    return { result: 'failed', exitCode: failure.exitCode, reason: failure.reason, code: failure.code, reported: false, journalPath: null, config, commands: [], sinksOff: [], kvpReport: 'off' };
  }

  const signals = options.handleSignals ? catchSignals() : null;
  // Off Azure (no asset tag, no media) nothing is sent: the chart ends in notOnAzure. A check that fails decides
  // nothing, and the run goes on.
  const platform = await checkPlatform(config, options.sysRoot ?? '/').catch((error: unknown) => ({ failure: toFailure(error) }));
  const lock = takeInstanceLock(config, options.scratchDir);
  const { vmIdRead, read } = await readVmIdAndMarker(config, options.sysRoot ?? '/', !lock.refused);
  // The first IMDS attempt, sent now when this boot will want it: this VM id has no marker, ours or azure-init's.
  // A provisioned VM's boots, a pending Ready and a pool VM waiting to be claimed send no request.
  const wanted = loaded.ok && !lock.refused && onAzure(platform) !== false && read.marker === 'none';
  const first = wanted ? new FirstImdsRequest(config.imds) : null;
  const facts: Required<StartupFacts> = {
    configFailure: loaded.ok ? null : toFailure(loaded.error),
    platform,
    lockRefused: lock.refused ? toFailure(lock.refused.error) : null,
    ...read,
    imdsSent: first !== null,
  };
  try {
    // Loading the rest waits for the first request to be written: on a VM well under a millisecond; the bound is for
    // a connection that hangs, whose attempt then goes on beside the rest.
    await first?.written(IMDS_HEAD_START_MS);
    const { runProvisioningChart } = await import('./run-chart.js');
    return await runProvisioningChart(options, { facts, loaded, config, vmIdRead, lock, first, signals });
  } finally {
    signals?.stop();
    first?.drop();
  }
}

/**
 * The keys a run reads again, alone, when the whole config fails to load: where its state is (the data dir: lock,
 * markers, journals), whether this is an Azure VM and where it reports (the fabric's addresses, the log and KVP). With
 * them the marker is found where the image keeps it, and a provisioned VM's outcome is not lost to an unrelated
 * broken value (docs/configuration.md#a-configuration-that-fails-to-load).
 */
export const STARTUP_KEYS: Readonly<Record<string, readonly string[]>> = {
  data_dir: ['path'],
  platform: ['check'],
  imds: ['endpoint'],
  wireserver: ['address', 'health_endpoint'],
  telemetry: ['kvp', 'kvp_dir', 'kvp_pool', 'kvp_diagnostics'],
  log_path: ['path'],
  // azure-init's names for the same keys: a file written for it moves its data directory with these.
  azure_init_data_dir: ['path'],
  azure_init_log_path: ['path'],
};

/**
 * The run's config: the whole of it; or, when that fails, the error and the STARTUP_KEYS read alone over the
 * defaults (`fallback: 'keys'`); or, when even those fail (a file that cannot be read or parsed), the defaults.
 */
export async function loadRunConfig(options: ProvisionOptions, adjust: (c: Config) => Config): Promise<LoadedConfig> {
  const from = {
    systemFile: options.systemConfigFile ?? SYSTEM_CONFIG_FILE,
    dropinDir: options.dropinDir ?? SYSTEM_CONFIG_DROPIN_DIR,
    override: options.configPath ?? process.env.BOOTSTATE_CONFIG,
  };
  const loaded = await loadConfigOrOnly(from, STARTUP_KEYS);
  if ('onlyError' in loaded) return { ok: false, error: loaded.error, fallback: 'defaults', config: adjust(DEFAULT_CONFIG), warnings: [] };
  const config = adjust(loaded.config);
  return 'error' in loaded ? { ok: false, error: loaded.error, fallback: 'keys', config, warnings: [] } : { ok: true, config, warnings: loaded.warnings };
}

/**
 * This VM id and, when the lock is held (`withMarker`), its marker state, each read or why not (a planted marker,
 * an unreadable data directory): the chart reports a failure. A run refused the lock leaves the marker alone: reading
 * it tidies stale files, which are the other agent's to tidy.
 */
async function readVmIdAndMarker(config: Config, sysRoot: string, withMarker: boolean): Promise<{ vmIdRead: VmId | null; read: VmIdAndMarker }> {
  const read: VmIdAndMarker = { vmId: null, vmIdFailure: null, marker: null, markerFailure: null };
  let vmIdRead: VmId;
  try {
    vmIdRead = await readVmId({ sysRoot });
  } catch (error) {
    read.vmIdFailure = toFailure(error);
    return { vmIdRead: null, read };
  }
  read.vmId = vmIdRead.vmId;
  if (!withMarker) return { vmIdRead, read };
  try {
    read.marker = await markerStore(config).state(vmIdRead.vmId);
  } catch (error) {
    read.markerFailure = toFailure(error);
  }
  return { vmIdRead, read };
}

/** The facts readVmIdAndMarker reads. */
type VmIdAndMarker = Pick<Required<StartupFacts>, 'vmId' | 'vmIdFailure' | 'marker' | 'markerFailure'>;

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
