/**
 * The subcommands other than `provision`, `kvp` and `demo`: clean, report, monitor, graph, trace, inspect-server.
 * Their options are parsed and checked by the CLI table (`src/cli/subcommands.ts`); loaded only when one of them
 * runs, so a first boot never pays for them.
 */
import { writeFileSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { createActor, fromPromise, toPromise, type InspectionEvent } from 'xstate';
import { HEALTH_FAILED, HEALTH_IN_PROGRESS, HEALTH_READY, type Health } from '../machines/provisioning.js';
import { reportMachine } from '../machines/report.js';
import { ReportBook } from './actors/report-book.js';
import { closeAll } from './azure/http.js';
import { HealthReporter } from './azure/wireserver.js';
import { SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE, type Config } from './config/defaults.js';
import { loadConfig } from './config/load.js';
import type { ParsedArgs } from './cli/argv.js';
import { UsageError } from './cli/argv.js';
import { describeFailure, EXIT_FAILURE, EXIT_OK, failure } from './errors.js';
import { createLogger } from './log.js';
import type { LogFormat } from './log-text.js';
import { FileMarkerStore } from './os/marker.js';
import { readVmId } from './os/vmid.js';

async function configFrom(path: string | undefined): Promise<Config> {
  const { config } = await loadConfig({
    systemFile: SYSTEM_CONFIG_FILE,
    dropinDir: SYSTEM_CONFIG_DROPIN_DIR,
    override: path ?? process.env.BOOTSTATE_CONFIG,
  });
  return config;
}

type Values = ParsedArgs['values'];

export async function clean(values: Values): Promise<number> {
  const config = await configFrom(values.config as string | undefined);
  const logs = values.logs === true;
  const removed = await new FileMarkerStore(config.data_dir.path).clean({ logs, logPath: config.log_path.path });
  for (const path of removed) process.stdout.write(`removed ${path}\n`);
  const history = logs ? await cleanRunHistory(config) : [];
  for (const line of history) process.stdout.write(`${line}\n`);
  if (removed.length === 0 && history.length === 0) process.stdout.write('nothing to remove\n');
  return EXIT_OK;
}

/**
 * `clean --logs` for image capture: the build VM's run journals (and traces drawn next to them) and the records in
 * the guest KVP pool must not ship in the image. Returns one line per thing removed or emptied.
 */
async function cleanRunHistory(config: Config): Promise<string[]> {
  const lines: string[] = [];
  const runs = join(config.data_dir.path, 'runs');
  const names = await readdir(runs).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [] as string[];
    throw error;
  });
  for (const name of names.sort()) {
    await rm(join(runs, name), { recursive: true });
    lines.push(`removed ${join(runs, name)}`);
  }
  const { KvpStore, poolPath } = await import('./kvp/store.js');
  const pool = new KvpStore({ path: poolPath(config.telemetry.kvp_dir, config.telemetry.kvp_pool), lossy: true });
  const { exists, size, records } = pool.info();
  if (exists && size > 0) {
    pool.clear();
    lines.push(`emptied ${pool.path} (${records} KVP record${records === 1 ? '' : 's'})`);
  }
  return lines;
}

const HEALTH_BY_NAME: Record<string, Health> = {
  ready: HEALTH_READY,
  'in-progress': HEALTH_IN_PROGRESS,
  failure: HEALTH_FAILED,
};

export async function report(values: Values, positionals: string[]): Promise<number> {
  const health = HEALTH_BY_NAME[positionals[0]];
  const reason = values.reason as string | undefined;
  if (health === HEALTH_FAILED && !reason) throw new UsageError('a failure report needs --reason TEXT');
  if (health !== HEALTH_FAILED && reason !== undefined) throw new UsageError(`--reason applies only to a failure report`);
  const config = await configFrom(values.config as string | undefined);
  const { log, close } = createLogger({ logPath: config.log_path.path, format: values['log-format'] as LogFormat | undefined });
  const vmId = (values['vm-id'] as string | undefined) ?? (await readVmId()).vmId;
  const book = new ReportBook();
  // An image builder's own failure: its reason is theirs, the rest of the report is ours.
  const description =
    health === HEALTH_FAILED
      ? book.failure({ ...failure('UNHANDLED', []), reason: reason!, code: 'UNHANDLED' }, vmId)
      : undefined;
  const reporter = new HealthReporter();
  const actor = createActor(
    reportMachine.provide({
      actors: {
        post: fromPromise(async ({ signal }) => {
          await reporter.post({ config: config.wireserver, health, vmId, description, signal, log });
        }),
      },
    }),
    {
      input: {
        retryIntervalMs: config.wireserver.retry_interval_secs * 1000,
        totalTimeoutMs: config.wireserver.total_retry_timeout_secs * 1000,
      },
    },
  );
  actor.start();
  const output = await toPromise(actor);
  await closeAll();
  close();
  if (output.accepted) {
    process.stdout.write(`reported ${health}\n`);
    return EXIT_OK;
  }
  const why = output.failure ? describeFailure(output.failure) : 'no answer';
  process.stderr.write(`bootstate report: ${health} not accepted by ${config.wireserver.health_endpoint}: ${why}; check that this VM reaches the wireserver (wireserver.health_endpoint)\n`);
  return EXIT_FAILURE;
}

export async function monitor(values: Values): Promise<number> {
  const config = await configFrom(values.config as string | undefined);
  const { runMonitor, defaultEndpoints } = await import('./monitor/run.js');
  const { KvpTelemetry, pinoDestination } = await import('./kvp/telemetry.js');
  const { createJournal } = await import('./inspect/journal.js');
  const kvp = config.telemetry.kvp ? new KvpTelemetry({ config: config.telemetry }) : null;
  const { log, close, sinks } = createLogger({
    logPath: config.log_path.path,
    format: values['log-format'] as LogFormat | undefined,
    extra: kvp ? [{ level: 'warn', stream: pinoDestination(kvp), sink: 'kvp telemetry' }] : [],
  });
  const { vmId } = await readVmId();
  kvp?.setVmId(vmId);
  let journal: ReturnType<typeof createJournal> | null = null;
  try {
    if (config.journal.enable) journal = createJournal({ dir: config.data_dir.path, vmId, keep: config.journal.keep });
  } catch (error) {
    sinks.fail('journal', error);
  }
  const observeJournal = sinks.observer('journal', (event: InspectionEvent) => journal?.inspect(event));
  const live = values.inspect ? (await import('./inspect/live.js')).startLiveInspector(values.inspect as string, { onProblem: (message) => log.warn({ step: 'inspect' }, message) }) : null;
  const observeLive = sinks.observer('live inspector', (event: InspectionEvent) => live?.inspect(event));
  const once = values.once === true;
  const { MonitorSummary } = await import('./monitor/summary.js');
  const summary = new MonitorSummary();
  try {
    const result = await runMonitor({
      config,
      once,
      log,
      onMeasured: (name, measurement) => summary.measured(name, measurement),
      onPosted: (batch, outcome) => summary.posted(batch, outcome),
      onUnhealthy: (observation) =>
        kvp?.event('WARN', 'monitor.observation', `${observation.ObservationName} unhealthy: ${observation.Value}`),
      inspect: (event) => {
        observeJournal(event);
        observeLive(event);
      },
    });
    if (!once) return result.exitCode;
    for (const line of summary.lines(defaultEndpoints(config).healthService)) process.stdout.write(`${line}\n`);
    return result.exitCode !== EXIT_OK ? result.exitCode : summary.failed ? EXIT_FAILURE : EXIT_OK;
  } finally {
    kvp?.flush();
    sinks.observer('journal', () => journal?.close())();
    await live?.stop();
    await closeAll();
    close();
  }
}

export async function graph(values: Values): Promise<number> {
  const { renderMachine } = await import('./inspect/render.js');
  const text = await renderMachine(values.machine as string, values.format as string, { overview: values.overview === true });
  if (values.output) writeFileSync(values.output as string, text);
  else process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  return EXIT_OK;
}

export async function trace(values: Values, positionals: string[]): Promise<number> {
  // The loader turns V8's JITs off for the agent's short runs (scripts/loader.cjs); a trace is an offline pass over
  // a journal of any length, where compiled code is far faster than the interpreter on a large journal. The code
  // caches were checked when their scripts loaded, before this: a trace leaves dist/*.cache as they were.
  setFlagsFromString('--opt --sparkplug');
  const { writeTrace } = await import('./inspect/render.js');
  const config = await configFrom(values.config as string | undefined);
  const written = await writeTrace({ journal: positionals[0], dataDir: config.data_dir.path, output: values.output as string | undefined });
  process.stdout.write(`${written.summary}\ntrace: ${written.path}\n`);
  return EXIT_OK;
}

export async function inspectServer(values: Values): Promise<number> {
  const host = values.host as string;
  if (!isLoopback(host) && values['allow-remote'] !== true) {
    throw new UsageError(`--host ${host} is not a loopback address: anyone who reaches it sees every run; add --allow-remote to mean it`);
  }
  const { startInspectServer } = await import('./inspect/live.js');
  const server = await startInspectServer({ host, port: Number(values.port) });
  process.stdout.write(`${JSON.stringify({ agent: server.agentUrl, viewer: server.viewerUrl })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  return EXIT_OK;
}

/** `127.0.0.0/8`, `::1` and `localhost`: addresses only this machine can reach. */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  return bare === 'localhost' || bare === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(bare) || /^::ffff:127\./.test(bare);
}
