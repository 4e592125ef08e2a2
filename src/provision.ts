/**
 * Runs one provisioning: loads the config, sets up logging, KVP and the journal, builds the chart with the real
 * actors, runs it to its final state and returns its output. `cli.ts` maps the output to the exit code.
 */
import { join } from 'node:path';
import { createActor, toPromise, type InspectionEvent } from 'xstate';
import { createProvisioningMachine, HEALTH_FAILED, ZERO_VM_ID, type ProvisioningOutput } from '../machines/provisioning.js';
import { provisioningActors } from './actors/provisioning.js';
import { ReportBook } from './actors/report-book.js';
import { TransitionTelemetry } from './actors/transition-telemetry.js';
import { closeAll } from './azure/http.js';
import { DryRunReporter } from './azure/dry-run-reporter.js';
import { HealthReporter } from './azure/wireserver.js';
import { DEFAULT_CONFIG, SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE, type Config } from './config/defaults.js';
import { loadConfig } from './config/load.js';
import type { StepSelection } from './config/steps.js';
import { EXIT_FAILURE, toFailure, type Failure } from './errors.js';
import { acquireInstanceLock, type InstanceLock } from './instance-lock.js';
import { createJournal } from './inspect/journal.js';
import { KvpTelemetry, pinoDestination } from './kvp/telemetry.js';
import { createLogger, type Logger } from './log.js';
import type { LogFormat } from './log-text.js';
import { readProvisioningMedia } from './os/media.js';
import { AZURE_INIT_DATA_DIR, FileMarkerStore } from './os/marker.js';
import type { Provisioner } from './os/provisioner.js';
import { RealProvisioner } from './os/real.js';
import { ScratchProvisioner } from './os/scratch.js';
import { SecretStore } from './secrets.js';
import { Sinks, type SinkFailure } from './sinks.js';

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
  const config = withSkippedSteps(loaded.config, options.steps);
  if (!loaded.ok && options.scratchDir) {
    // A dry run must not fall back to the defaults: they point at this machine's /var and the real fabric.
    const failure = toFailure(loaded.error);
    (options.stderr ?? process.stderr).write(`bootstate: ${(loaded.error as Error)?.message ?? failure.reason}; dry run not started\n`);
    return { result: 'failed', exitCode: failure.exitCode, reason: failure.reason, code: failure.code, reported: false, journalPath: null, config, commands: [], sinksOff: [], kvpReport: 'off' };
  }

  const sinks = new Sinks();
  const kvp = config.telemetry.kvp
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
  if (!loaded.ok) log.error({ step: 'config', reason: toFailure(loaded.error).reason }, `configuration failed to load: ${String((loaded.error as Error).message ?? loaded.error)}`);

  let instance: InstanceLock | null = null;
  // An unusable data directory still gets one agent at a time: the lock moves to the runtime directory (under
  // the scratch root for dry and scratch runs); only when neither can hold it does the run go on unlocked.
  const lockDirs = [config.data_dir.path, options.scratchDir ? join(options.scratchDir, RUNTIME_LOCK_DIR) : RUNTIME_LOCK_DIR];
  for (const [index, dir] of lockDirs.entries()) {
    try {
      instance = acquireInstanceLock(dir);
      if (index > 0) log.warn({ step: 'lock', code: 'IO' }, `instance lock taken in ${dir} because ${config.data_dir.path} cannot hold it`);
      break;
    } catch (error) {
      const failure = toFailure(error);
      if (failure.code === 'ALREADY_RUNNING') {
        // The instance holding the lock reports; a second report from here could only contradict it.
        log.error({ code: failure.code, reason: failure.reason }, (error as Error).message);
        closeLog();
        return { result: 'failed', exitCode: failure.exitCode, reason: failure.reason, code: failure.code, reported: false, journalPath: null, config, commands: [], sinksOff: sinks.off, kvpReport: 'off' };
      }
      const last = index === lockDirs.length - 1;
      log.warn({ step: 'lock', code: failure.code, reason: failure.reason }, `${last ? 'running without the instance lock' : 'instance lock not taken'}: ${(error as Error).message}`);
    }
  }

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
    const { startLiveInspector } = await import('./inspect/live.js');
    live = startLiveInspector(options.inspectUrl, { onProblem: (message) => log.warn({ step: 'inspect' }, message) });
  }

  const reports = new ReportBook();
  // A media read the chart stopped waiting for may still be unmounting; exiting under it would leave a mount.
  const mediaReads: Promise<unknown>[] = [];
  let kvpReport = 'off';
  const actors = provisioningActors({
    log,
    loadConfig: () => (loaded.ok ? Promise.resolve(config) : Promise.reject(loaded.error)),
    sysRoot: options.sysRoot ?? '/',
    provisioner,
    markers: (c) => new FileMarkerStore(c.data_dir.path, [AZURE_INIT_DATA_DIR]),
    readMedia: (_config, store, signal) => {
      const read = readProvisioningMedia({ secrets: store, signal, onNote: (note) => log.info({ step: 'media' }, note) });
      mediaReads.push(read.catch(() => undefined));
      return read;
    },
    secrets,
    reporter,
    reports,
    kvp,
    onKvpReport: ({ written, error }) => (kvpReport = written ? 'written' : `failed: ${error}`),
    onVmId: (vmId) => {
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
    },
  });

  const observeJournal = sinks.observer('journal', (event: InspectionEvent, at?: Date) => {
    if (journal) journal.inspect(event, at);
    else if (config.journal.enable && early.length < 1000) early.push([event, at ?? new Date()]);
  });
  const observeTransitions = transitions ? sinks.observer('kvp telemetry', (event: InspectionEvent) => transitions.inspect(event)) : null;
  const observeLive = live ? sinks.observer('live inspector', (event: InspectionEvent) => live!.inspect(event)) : null;
  const observeCaller = options.inspect ? sinks.observer('inspect', options.inspect) : null;
  const actor = createActor(createProvisioningMachine(actors), {
    input: { config, groups: options.groups },
    inspect: (event) => {
      observeJournal(event);
      observeTransitions?.(event);
      observeLive?.(event);
      observeCaller?.(event);
    },
  });

  const terminate = () => actor.send({ type: 'TERMINATE' });
  if (options.handleSignals) for (const signal of TERMINATING_SIGNALS) process.on(signal, terminate);

  let output: ProvisioningOutput;
  try {
    actor.start();
    output = await toPromise(actor);
  } catch (error) {
    // The chart handles every actor error itself; reaching here is a bug. The fabric must still hear of it.
    const failure = toFailure(error);
    log.fatal({ reason: failure.reason }, `unhandled error: ${(error as Error)?.message ?? String(error)}`);
    const vmId = (actor.getSnapshot().context as { vmId?: string } | undefined)?.vmId ?? ZERO_VM_ID;
    const reported = await reportLastResort(reporter, reports, config, vmId, failure, kvp, log);
    output = { result: 'failed', exitCode: EXIT_FAILURE, reason: failure.reason, code: failure.code, reported };
  } finally {
    if (options.handleSignals) for (const signal of TERMINATING_SIGNALS) process.off(signal, terminate);
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
  await closeAll();
  instance?.release();
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

/** The config with the steps `--only`/`--skip` leave out added to `[steps] skip`. */
function withSkippedSteps(config: Config, steps: StepSelection | undefined): Config {
  if (!steps || steps.skip.length === 0) return config;
  return { ...config, steps: { skip: [...new Set([...config.steps.skip, ...steps.skip])] } };
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
