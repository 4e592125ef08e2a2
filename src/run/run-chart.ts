/**
 * The second half of a provisioning run, loaded by provision.ts once the config is loaded, the instance lock taken,
 * the VM id and its marker read and, on a first boot, the first IMDS request sent: sets up logging, KVP and the
 * journal, builds the chart with the real actors and what was read as its input, runs it to its final state and
 * returns its output.
 */
import { createActor, toPromise, type InspectionEvent } from 'xstate';
import { createProvisioningMachine, HEALTH_FAILED, ZERO_VM_ID, type ProvisioningOutput, type StartupFacts } from '../../machines/provisioning.js';
import { provisioningActors } from '../actors/provisioning.js';
import { ReportBook } from '../actors/report-book.js';
import { TransitionTelemetry } from '../observe/transition-telemetry.js';
import type { FirstImdsRequest } from './first-imds-request.js';
import { closeAll } from '../azure/http.js';
import { DryRunReporter } from '../azure/dry-run-reporter.js';
import { HealthReporter } from '../azure/wireserver.js';
import type { Config } from '../config/defaults.js';
import { EXIT_FAILURE, toFailure, type Failure } from '../core/errors.js';
import { createJournal } from '../inspect/journal.js';
import { pinoDestination } from '../kvp/log-sink.js';
import { KvpTelemetry } from '../kvp/telemetry.js';
import { createLogger, type Logger } from '../logging/log.js';
import { readProvisioningMedia } from '../os/media.js';
import type { Provisioner } from '../os/provisioner.js';
import { RealProvisioner } from '../os/real.js';
import { ScratchProvisioner } from '../os/scratch.js';
import { SdNotifier } from '../os/sd-notify.js';
import { SecretStore } from '../core/secrets.js';
import { SystemdStatus } from '../actors/systemd-status.js';
import { Sinks } from '../logging/sinks.js';
import { markerStore } from '../os/marker.js';
import type { LockOutcome } from './instance-lock.js';
import type { CaughtSignals } from './signals.js';
import { onAzure, type LoadedConfig, type PlatformRead, type ProvisionOptions, type ProvisionResult, type ReadBeforeChart } from './types.js';

/** What provision.ts prepared: the config, the instance lock, and the first IMDS request if it sent one. */
export interface Prepared {
  loaded: LoadedConfig;
  config: Config;
  lock: LockOutcome;
  /** This VM id and (with the lock held) its marker state, or why either could not be read. */
  read: ReadBeforeChart;
  /** Whether this is an Azure VM: off Azure nothing is sent or written to KVP. */
  platform: PlatformRead;
  first: FirstImdsRequest | null;
  /** With `handleSignals`: the terminating signals, caught since the run began. */
  signals: CaughtSignals | null;
}

/** Runs the chart over what `runProvision` prepared. */
export async function provisionLoaded(options: ProvisionOptions, { loaded, config, lock, read, platform, first, signals }: Prepared): Promise<ProvisionResult> {
  const sinks = new Sinks();
  // Neither a machine off Azure nor a run refused the instance lock writes anything to KVP.
  const kvp = config.telemetry.kvp && onAzure(platform) !== false && !lock.refused
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
  for (const warning of loaded.warnings) log.warn({ step: 'config' }, warning);
  for (const step of config.steps.skip) {
    log.info({ step, skipped: true }, `step ${step} skipped (${options.steps?.why[step] ?? '[steps] skip in the configuration'})`);
  }
  if (!loaded.ok) {
    const goesOn = loaded.fallback === 'keys' ? 'going on with only the keys saying where the run keeps its state and where it reports' : 'going on with the defaults';
    log.error({ step: 'config', reason: toFailure(loaded.error).reason }, `configuration failed to load: ${String((loaded.error as Error).message ?? loaded.error)}; ${goesOn}`);
  }

  // Under Type=notify: READY=1 when the chart says so (its tellSystemdReady action), and before exit in any case,
  // since a process that exits without it fails the start; STATUS= lines from what the chart is doing.
  const systemd = SdNotifier.fromEnvironment({ warn: (message) => log.warn({ step: 'systemd' }, message) });
  for (const warning of lock.warnings) log.warn({ step: 'lock', code: warning.code, reason: warning.reason }, warning.message);
  // The chart ends a refused run at once (alreadyRunning): the instance holding the lock reports.
  const lockRefused = lock.refused ? toFailure(lock.refused.error) : null;
  if (lock.refused) log.error({ code: lockRefused!.code, reason: lockRefused!.reason }, (lock.refused.error as Error).message);
  else logStartup(log, loaded.ok, platform, read);
  const { instance } = lock;

  const secrets = new SecretStore();
  const provisioner: Provisioner = options.scratchDir
    ? new ScratchProvisioner(options.scratchDir, config)
    : new RealProvisioner({ config });
  const reporter = options.dryRun ? new DryRunReporter(options.onNote ?? ((line) => log.info({ step: 'report' }, line))) : new HealthReporter();
  const transitions = kvp ? new TransitionTelemetry(kvp) : null;

  let journal: ReturnType<typeof createJournal> | null = null;
  const early: Array<[InspectionEvent, Date]> = [];
  let live: { inspect(event: InspectionEvent): void; stop(): Promise<void> } | null = null;
  if (options.inspectUrl) {
    const { startLiveInspector } = await import('../inspect/live.js');
    live = startLiveInspector(options.inspectUrl, { onProblem: (message) => log.warn({ step: 'inspect' }, message) });
  }

  const reports = new ReportBook();
  // A media read the chart stopped waiting for may still be unmounting; exiting under it would leave a mount.
  const mediaReads: Promise<unknown>[] = [];
  let kvpReport = 'off';
  const actors = provisioningActors({
    log,
    provisioner,
    markers: markerStore,
    firstImds: first,
    readMedia: (_config, store, signal) => {
      const read = readProvisioningMedia({ secrets: store, signal, onNote: (note) => log.info({ step: 'media' }, note) });
      mediaReads.push(read.catch(() => undefined));
      return read;
    },
    secrets,
    // A scratch run keeps even the transport key's directory inside its own tree.
    ...(options.scratchDir ? { transportParent: `${options.scratchDir.replace(/\/+$/, '')}/run` } : {}),
    console: (text) => void (options.stdout ?? process.stdout).write(text),
    reporter,
    reports,
    kvp,
    onKvpReport: ({ written, error }) => (kvpReport = written ? 'written' : `failed: ${error}`),
  });
  // The VM id's telemetry keys and journal, before the chart starts; never for a run refused the lock (the journal
  // of this VM id is the other agent's) nor off Azure.
  const onVmId = (vmId: string) => {
    kvp?.setVmId(vmId);
    if (config.journal.enable && !journal && sinks.isOn('journal')) {
      try {
        journal = createJournal({ dir: config.data_dir.path, vmId, keep: config.journal.keep });
      } catch (error) {
        sinks.fail('journal', error);
        early.length = 0;
        return;
      }
      for (const [event, at] of early.splice(0)) observeJournal(event, at);
    }
  };

  const observeJournal = sinks.observer('journal', (event: InspectionEvent, at?: Date) => {
    if (journal) journal.inspect(event, at);
    else if (config.journal.enable && early.length < 1000) early.push([event, at ?? new Date()]);
  });
  const observeTransitions = transitions ? sinks.observer('kvp telemetry', (event: InspectionEvent) => transitions.inspect(event)) : null;
  const observeLive = live ? sinks.observer('live inspector', (event: InspectionEvent) => live!.inspect(event)) : null;
  const observeCaller = options.inspect ? sinks.observer('inspect', options.inspect) : null;
  const status = systemd.active ? new SystemdStatus(systemd) : null;
  if (read.vmId && !lockRefused && onAzure(platform) !== false) onVmId(read.vmId.vmId);
  const startup: StartupFacts = {
    configFailure: loaded.ok ? null : toFailure(loaded.error),
    platform,
    lockRefused,
    vmId: read.vmId?.vmId ?? null,
    vmIdFailure: read.vmIdFailure,
    marker: read.marker,
    markerFailure: read.markerFailure,
    imdsSent: first !== null,
  };
  const actor = createActor(createProvisioningMachine(actors, { systemdReady: () => systemd.ready() }), {
    input: { config, groups: options.groups, startup },
    inspect: (event) => {
      observeJournal(event);
      observeTransitions?.(event);
      observeLive?.(event);
      observeCaller?.(event);
      status?.inspect(event);
    },
  });


  let output: ProvisioningOutput;
  try {
    actor.start();
    // A signal caught before the chart existed ends it now, through the same failure report.
    signals?.deliverTo(() => actor.send({ type: 'TERMINATE' }));
    output = await toPromise(actor);
  } catch (error) {
    // The chart handles every actor error itself; reaching here is a bug. The fabric must still hear of it.
    const failure = toFailure(error);
    log.fatal({ reason: failure.reason }, `unhandled error: ${(error as Error)?.message ?? String(error)}`);
    const vmId = (actor.getSnapshot().context as { vmId?: string } | undefined)?.vmId ?? ZERO_VM_ID;
    const reported = await reportLastResort(reporter, reports, config, vmId, failure, kvp, log);
    output = { result: 'failed', exitCode: EXIT_FAILURE, reason: failure.reason, code: failure.code, reported };
  } finally {
    signals?.stop();
  }

  // What the chart noted but did not fail on (an unreadable provisioning media, a KVP writer that stopped).
  const noted = (actor.getSnapshot().context as { warnings?: string[] } | undefined)?.warnings ?? [];
  for (const warning of noted) log.warn({ step: 'provision' }, warning);
  const summary = {
    result: output.result, reason: output.reason, code: output.code, exitCode: output.exitCode, reported: output.reported,
    kvpReport, sinksOff: sinks.off.map((s) => s.sink), sinkWritesLost: sinks.lost,
  };
  const context = actor.getSnapshot().context as OutcomeContext | undefined;
  if (output.result === 'failed') {
    const cause = context?.failure ?? context?.reportFailure;
    const detail = cause ? Object.fromEntries(factsOf(cause)) : undefined;
    // The journal's one line about a failed boot: what failed, while doing what, and the facts behind it.
    const during = !context?.failure && context?.reportFailure ? ' while reporting Ready' : '';
    log.error({ ...summary, detail }, `provisioning failed: ${output.reason}${during}${cause ? inParentheses(factsOf(cause)) : ''}`);
  } else {
    if (context?.plan?.source === 'media' && context.imdsFailure) {
      const device = context.media?.device ?? 'the provisioning media';
      log.warn(
        { step: 'imds', reason: context.imdsFailure.reason, device },
        `IMDS failed: ${context.imdsFailure.reason}${inParentheses(factsOf(context.imdsFailure))}; provisioned from the provisioning media on ${device} instead`,
      );
    }
    log.info(summary, `provisioning finished: ${output.result}`);
  }
  sinks.observer('kvp telemetry', () => transitions?.flush())();
  sinks.observer('kvp telemetry', () => kvp?.flush())();
  await Promise.all(mediaReads);
  secrets.clear();
  const journalPath = sinks.isOn('journal') ? ((journal as ReturnType<typeof createJournal> | null)?.path ?? null) : null;
  sinks.observer('journal', () => (journal as ReturnType<typeof createJournal> | null)?.close())();
  try {
    await live?.stop();
  } catch (error) {
    sinks.fail('live inspector', error);
  }
  first?.drop();
  await closeAll();
  instance?.release();
  await readyBeforeExit(systemd);
  closeLog();
  return {
    ...output,
    journalPath,
    config,
    commands: provisioner instanceof ScratchProvisioner ? provisioner.commands : [],
    sinksOff: sinks.off,
    kvpReport,
  };
}

/**
 * What was read before the chart, as the log says it: the platform, the VM id and what the marker makes of this boot
 * (with a config that failed to load, only a marker that proves the outcome decides it).
 */
function logStartup(log: Logger, configLoaded: boolean, platform: PlatformRead, read: ReadBeforeChart): void {
  // A check that failed is the chart's warning, logged with the others at the end.
  if (!('failure' in platform)) {
    if (!platform.onAzure) {
      log.warn({ step: 'platform' }, `not an Azure VM: ${platform.why}; nothing is provisioned or reported`);
      return;
    }
    log.debug({ step: 'platform' }, `on Azure: ${platform.why}`);
  }
  const id = read.vmId;
  if (!id) return;
  if (id.source === 'unreadable') log.warn({ step: 'vmId' }, 'product_uuid unreadable; using the zero VM id');
  log.info({ step: 'vmId', vmId: id.vmId, generation: id.generation }, 'VM id read');
  // A marker that proves the outcome decides this boot even when the config failed to load.
  if (read.marker === 'provisioned') log.info({ vmId: id.vmId }, 'already provisioned; nothing to do');
  if (read.marker === 'report-pending') log.info({ vmId: id.vmId }, 'provisioned earlier but Ready not accepted; reporting Ready');
  if (!configLoaded) return;
  if (read.marker === 'waiting-for-reuse') log.info({ vmId: id.vmId }, 'pool VM: Ready reached the pool in an earlier boot; waiting again to be claimed');
}

/**
 * The safety net under the chart's tellSystemdReady: a Type=notify process that exits without READY=1 fails its
 * start, whatever its exit code says.
 */
async function readyBeforeExit(systemd: SdNotifier): Promise<void> {
  systemd.ready();
  await systemd.flush();
}

/** What the end-of-run lines read from the chart's final context. */
interface OutcomeContext {
  failure?: Failure | null;
  reportFailure?: Failure | null;
  imdsFailure?: Failure | null;
  plan?: { source: 'imds' | 'media' } | null;
  media?: { device: string } | null;
}

/** A failure's supporting data without the stack, as key/value pairs. */
function factsOf(failure: Failure): Array<[string, string]> {
  return failure.data.filter(([key]) => key !== 'stack_base64');
}

/** ` (key=value, …)`, or nothing when there are no facts. */
function inParentheses(facts: Array<[string, string]>): string {
  return facts.length > 0 ? ` (${facts.map(([key, value]) => `${key}=${value}`).join(', ')})` : '';
}
/** One failure report outside the chart (KVP, then one HTTP attempt bounded by 10 s); whether it was accepted. */
async function reportLastResort(
  reporter: HealthReporter,
  reports: ReportBook,
  config: Config,
  vmId: string,
  failure: Failure,
  kvp: KvpTelemetry | null,
  log: Logger,
): Promise<boolean> {
  const description = reports.failure(failure, vmId);
  if (kvp && !kvp.writeReport(description)) log.error({ step: 'kvp', reason: 'kvp report not written' }, `KVP report not written: ${kvp.lastError}`);
  try {
    await reporter.post({ config: config.wireserver, health: HEALTH_FAILED, vmId, description, signal: AbortSignal.timeout(10_000), log });
    return true;
  } catch {
    return false;
  }
}

