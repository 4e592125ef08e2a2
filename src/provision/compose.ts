/**
 * A provisioning run put together, before its chart starts (run-chart.ts runs it): the sinks and the logger (with KVP
 * telemetry), systemd's notifier, the secrets store, the backend (real or scratch) and the reporter (real or dry run),
 * the observers (src/observe/), the chart's real actors, and the chart's actor over the facts read before it.
 * Nothing here runs the chart.
 */
import { createActor, type Actor, type InspectionEvent } from 'xstate';
import { createProvisioningMachine, type ProvisioningMachine } from '../../machines/provisioning.js';
import { provisioningActors } from './actors.js';
import { EncodedReports } from './encoded-reports.js';
import { SystemdStatus } from '../observe/systemd-status.js';
import { DryRunReporter } from '../azure/dry-run-reporter.js';
import { HealthReporter } from '../azure/wireserver.js';
import { toFailure } from '../core/errors.js';
import { scrubData, SecretStore } from '../core/secrets.js';
import { pinoDestination } from '../kvp/log-sink.js';
import { KvpTelemetry } from '../kvp/telemetry.js';
import { createLogger, type Logger } from '../logging/log.js';
import { Sinks } from '../logging/sinks.js';
import { RunObservers } from '../observe/observers.js';
import { BootDiagnostics } from '../observe/boot-diagnostics.js';
import { otlpSettings, type OtlpSettings } from '../observe/otlp-settings.js';
import { RunTrace } from '../observe/run-trace.js';
import { markerStore } from './marker.js';
import { readProvisioningMedia } from '../azure/media.js';
import type { Provisioner } from '../os/provisioner.js';
import { RealProvisioner } from '../os/real.js';
import { ScratchProvisioner } from '../os/scratch.js';
import { SdNotifier } from '../system/sd-notify.js';
import { onAzure, type BeforeChart, type ProvisionOptions } from './types.js';

/** A run's parts: what its chart's actors use, what observes it, and what is flushed and released when it ends. */
export interface ComposedRun {
  sinks: Sinks;
  kvp: KvpTelemetry | null;
  log: Logger;
  closeLog(): void;
  systemd: SdNotifier;
  secrets: SecretStore;
  provisioner: Provisioner;
  reporter: HealthReporter;
  reports: EncodedReports;
  observers: RunObservers;
  /** The run's trace and where it goes, when an OTLP endpoint is configured (docs/telemetry.md). */
  trace: { recorder: RunTrace; settings: OtlpSettings } | null;
  /** Media reads the chart stopped waiting for, which may still be unmounting: awaited before exit. */
  mediaReads: Promise<unknown>[];
  /** The KVP copy of the report: `written`, `off` (disabled or never attempted), or `failed: <reason>`. */
  kvpReport: string;
  /** The boot timeline and failure diagnostics for KVP, when KVP and `[boot_diagnostics]` are on. */
  diagnostics: BootDiagnostics | null;
  /** The chart's actor, not started. */
  actor: Actor<ProvisioningMachine>;
}

/** Puts a run together over what the first half read (`before`). */
export async function composeRun(options: ProvisionOptions, before: BeforeChart): Promise<ComposedRun> {
  const { config, facts } = before;
  const { sinks, kvp, log, closeLog } = openSinks(options, before);
  logConfig(log, options, before);
  // Under Type=notify: READY=1 when the chart says so (its tellSystemdReady action), and before exit in any case,
  // since a process that exits without it fails the start; STATUS= lines from what the chart is doing.
  const systemd = SdNotifier.fromEnvironment({ warn: (message) => log.warn({ step: 'systemd' }, message) });
  logLockAndStartup(log, before);
  const provisioner: Provisioner = options.scratchDir ? new ScratchProvisioner(options.scratchDir, config) : new RealProvisioner({ config });
  const reporter = options.dryRun ? new DryRunReporter(options.onNote ?? ((line) => log.info({ step: 'report' }, line))) : new HealthReporter();
  const otlp = facts.lockRefused ? null : otlpSettings(config.telemetry);
  const trace = otlp ? { recorder: new RunTrace('provision'), settings: otlp } : null;
  const observers = await RunObservers.start(sinks, {
    journal: { enable: config.journal.enable, dir: config.data_dir.path, keep: config.journal.keep },
    kvp,
    liveUrl: options.inspectUrl,
    onLiveProblem: (message) => log.warn({ step: 'inspect' }, message),
    caller: options.inspect,
    status: systemd.active ? new SystemdStatus(systemd) : null,
    trace: trace?.recorder ?? null,
  });
  const secrets = new SecretStore();
  const diagnostics = kvp && config.boot_diagnostics.enable ? new BootDiagnostics(config.boot_diagnostics, { underSystemd: systemd.active }) : null;
  const parts: Omit<ComposedRun, 'actor'> = {
    sinks, kvp, log, closeLog, systemd, provisioner, reporter, observers, trace, diagnostics,
    secrets,
    reports: new EncodedReports((data) => scrubData(secrets, data)),
    mediaReads: [],
    kvpReport: 'off',
  };
  const actors = realActors(options, parts, before);
  // The VM id's telemetry keys and journal, before the chart starts; never for a run refused the lock (the journal
  // of this VM id is the other agent's) nor off Azure.
  if (facts.vmId && !facts.lockRefused && onAzure(facts.platform) !== false) {
    kvp?.setVmId(facts.vmId);
    observers.journal.open(facts.vmId);
  }
  const noteDiagnostics = diagnostics ? sinks.observer('boot diagnostics', (event: InspectionEvent) => diagnostics.inspect(event)) : null;
  const systemdReady = () => {
    systemd.ready();
    if (systemd.active) diagnostics?.noteReady();
  };
  const actor = createActor(createProvisioningMachine(actors, { systemdReady }), {
    input: { config, groups: options.groups, startup: facts },
    inspect: noteDiagnostics ? (event) => (observers.inspect(event), noteDiagnostics(event)) : observers.inspect,
  });
  return Object.assign(parts, { actor });
}

/** The sinks, KVP telemetry (neither off Azure nor for a run refused the instance lock) and the logger. */
function openSinks(options: ProvisionOptions, { config, facts }: BeforeChart): Pick<ComposedRun, 'sinks' | 'kvp' | 'log' | 'closeLog'> {
  const sinks = new Sinks();
  const kvp = config.telemetry.kvp && onAzure(facts.platform) !== false && !facts.lockRefused
    ? new KvpTelemetry({
        dir: config.telemetry.kvp_dir,
        pool: config.telemetry.kvp_pool,
        level: config.telemetry.kvp_level,
        // Telemetry goes quiet after its first failure; the report is still attempted (writeReport is not a sink).
        onFirstFailure: (message) => sinks.fail('kvp telemetry', new Error(message)),
      })
    : null;
  const { log, close: closeLog } = createLogger({
    logPath: config.log_path.path,
    stderr: options.stderr as never,
    format: options.logFormat,
    extra: kvp ? [{ level: 'warn', stream: pinoDestination(kvp), sink: 'kvp telemetry' }] : [],
    sinks,
  });
  return { sinks, kvp, log, closeLog };
}

/** The chart's real actors over the run's parts. */
function realActors(options: ProvisionOptions, parts: Omit<ComposedRun, 'actor'>, before: BeforeChart) {
  const { log } = parts;
  return provisioningActors({
    log,
    provisioner: parts.provisioner,
    markers: markerStore,
    firstImds: before.first,
    readMedia: (_config, store, signal) => {
      const read = readProvisioningMedia({ secrets: store, signal, onNote: (note) => log.info({ step: 'media' }, note) });
      parts.mediaReads.push(read.catch(() => undefined));
      return read;
    },
    secrets: parts.secrets,
    // A scratch run keeps even the transport key's directory inside its own tree.
    ...(options.scratchDir ? { transportParent: `${options.scratchDir.replace(/\/+$/, '')}/run` } : {}),
    console: (text) => void (options.stdout ?? process.stdout).write(text),
    reporter: parts.reporter,
    reports: parts.reports,
    kvp: parts.kvp,
    onKvpReport: ({ written, error }) => (parts.kvpReport = written ? 'written' : `failed: ${error}`),
  });
}

/** The config's warnings, the steps left out, and a config that failed to load. */
function logConfig(log: Logger, options: ProvisionOptions, { loaded, config }: BeforeChart): void {
  for (const warning of loaded.warnings) log.warn({ step: 'config' }, warning);
  for (const step of config.steps.skip) {
    log.info({ step, skipped: true }, `step ${step} skipped (${options.steps?.why[step] ?? '[steps] skip in the configuration'})`);
  }
  if (!loaded.ok) {
    const goesOn = loaded.fallback === 'keys' ? 'going on with only the keys saying where the run keeps its state and where it reports' : 'going on with the defaults';
    log.error({ step: 'config', reason: toFailure(loaded.error).reason }, `configuration failed to load: ${String((loaded.error as Error).message ?? loaded.error)}; ${goesOn}`);
  }
}

/**
 * The instance lock's warnings, then either why the lock was refused (the chart ends such a run at once,
 * alreadyRunning: the instance holding the lock reports) or what was read before the chart: the platform, the VM id
 * and what the marker makes of this boot (with a config that failed to load, only a marker that proves the outcome
 * decides it).
 */
function logLockAndStartup(log: Logger, { lock, facts, vmIdRead }: BeforeChart): void {
  for (const warning of lock.warnings) log.warn({ step: 'lock', code: warning.code, reason: warning.reason }, warning.message);
  if (lock.refused && facts.lockRefused) {
    log.error({ code: facts.lockRefused.code, reason: facts.lockRefused.reason }, (lock.refused.error as Error).message);
    return;
  }
  // A check that failed is the chart's warning, logged with the others at the end.
  if (!('failure' in facts.platform)) {
    if (!facts.platform.onAzure) {
      log.warn({ step: 'platform' }, `not an Azure VM: ${facts.platform.why}; nothing is provisioned or reported`);
      return;
    }
    log.debug({ step: 'platform' }, `on Azure: ${facts.platform.why}`);
  }
  if (!vmIdRead) return;
  const { vmId } = vmIdRead;
  if (vmIdRead.source === 'unreadable') log.warn({ step: 'vmId' }, 'product_uuid unreadable; using the zero VM id');
  log.info({ step: 'vmId', vmId, generation: vmIdRead.generation }, 'VM id read');
  // A marker that proves the outcome decides this boot even when the config failed to load.
  if (facts.marker === 'provisioned') log.info({ vmId }, 'already provisioned; nothing to do');
  if (facts.marker === 'report-pending') log.info({ vmId }, 'provisioned earlier but Ready not accepted; reporting Ready');
  if (facts.configFailure) return;
  if (facts.marker === 'waiting-for-reuse-savable') log.info({ vmId }, 'Savable pool VM: Ready reached the pool in an earlier boot; waiting again for its NIC, then to be claimed');
  if (facts.marker === 'waiting-for-reuse') log.info({ vmId }, 'pool VM: Ready reached the pool in an earlier boot; waiting again to be claimed');
}
