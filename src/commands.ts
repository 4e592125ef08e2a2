/**
 * The subcommands other than `provision` and `kvp`: clean, report, monitor, graph, trace, inspect-server, demo.
 * Loaded only when one of them is asked for, so a first boot never pays for them.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createActor, fromPromise, toPromise } from 'xstate';
import { HEALTH_FAILED, HEALTH_IN_PROGRESS, HEALTH_READY, type Health } from '../machines/provisioning.js';
import { reportMachine } from '../machines/report.js';
import { ReportBook } from './actors/report-book.js';
import { closeAll } from './azure/http.js';
import { HealthReporter } from './azure/wireserver.js';
import { SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE, type Config } from './config/defaults.js';
import { loadConfig } from './config/load.js';
import { EXIT_FAILURE, EXIT_OK, failure } from './errors.js';
import { createLogger } from './log.js';
import { FileMarkerStore } from './os/marker.js';
import { readVmId } from './os/vmid.js';

/** Runs subcommand `name` with its arguments and resolves to the exit code. */
export async function runSubcommand(name: string, args: string[]): Promise<number> {
  switch (name) {
    case 'clean':
      return clean(args);
    case 'report':
      return report(args);
    case 'monitor':
      return monitor(args);
    case 'graph':
      return graph(args);
    case 'trace':
      return trace(args);
    case 'inspect-server':
      return inspectServer(args);
    case 'demo': {
      const { runDemo } = await import('./demo.js');
      return runDemo(args);
    }
    default:
      throw new Error(`unknown subcommand ${name}`);
  }
}

async function configFrom(path: string | undefined): Promise<Config> {
  const { config } = await loadConfig({
    systemFile: SYSTEM_CONFIG_FILE,
    dropinDir: SYSTEM_CONFIG_DROPIN_DIR,
    override: path ?? process.env.BOOTSTATE_CONFIG,
  });
  return config;
}

async function clean(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { logs: { type: 'boolean' }, config: { type: 'string' } }, strict: true });
  const config = await configFrom(values.config);
  const removed = await new FileMarkerStore(config.data_dir.path).clean({ logs: values.logs ?? false, logPath: config.log_path.path });
  for (const path of removed) process.stdout.write(`removed ${path}\n`);
  if (removed.length === 0) process.stdout.write('nothing to remove\n');
  return EXIT_OK;
}

const HEALTH_BY_NAME: Record<string, Health> = {
  ready: HEALTH_READY,
  'in-progress': HEALTH_IN_PROGRESS,
  failure: HEALTH_FAILED,
};

async function report(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: { reason: { type: 'string' }, config: { type: 'string' }, 'vm-id': { type: 'string' } },
    strict: true,
    allowPositionals: true,
  });
  const health = HEALTH_BY_NAME[positionals[0] ?? ''];
  if (!health || positionals.length !== 1) {
    process.stderr.write('usage: bootstate report ready|in-progress|failure [--reason TEXT]\n');
    return 2;
  }
  if (health === HEALTH_FAILED && !values.reason) {
    process.stderr.write('bootstate report failure needs --reason\n');
    return 2;
  }
  const config = await configFrom(values.config);
  const { log, close } = createLogger({ logPath: config.log_path.path });
  const vmId = values['vm-id'] ?? (await readVmId()).vmId;
  const book = new ReportBook();
  // An image builder's own failure: its reason is theirs, the rest of the report is ours.
  const description =
    health === HEALTH_FAILED
      ? book.failure({ ...failure('UNHANDLED', []), reason: values.reason!, code: 'UNHANDLED' }, vmId)
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
  process.stderr.write(`report not accepted: ${output.failure?.reason} ${JSON.stringify(output.failure?.data ?? [])}\n`);
  return EXIT_FAILURE;
}

async function monitor(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { once: { type: 'boolean' }, config: { type: 'string' }, inspect: { type: 'string' } },
    strict: true,
  });
  const config = await configFrom(values.config);
  const { runMonitor } = await import('./monitor/run.js');
  const { KvpTelemetry, pinoDestination } = await import('./kvp/telemetry.js');
  const { createJournal } = await import('./inspect/journal.js');
  const kvp = config.telemetry.kvp ? new KvpTelemetry({ config: config.telemetry }) : null;
  const { log, close } = createLogger({
    logPath: config.log_path.path,
    extra: kvp ? [{ level: 'warn', stream: pinoDestination(kvp) }] : [],
  });
  const { vmId } = await readVmId();
  kvp?.setVmId(vmId);
  const journal = config.journal.enable ? createJournal({ dir: config.data_dir.path, vmId, keep: config.journal.keep }) : null;
  const live = values.inspect ? (await import('./inspect/live.js')).startLiveInspector(values.inspect) : null;
  try {
    const result = await runMonitor({
      config,
      once: values.once ?? false,
      log,
      onUnhealthy: (observation) =>
        kvp?.event('WARN', 'monitor.observation', `${observation.ObservationName} unhealthy: ${observation.Value}`),
      inspect: (event) => {
        journal?.inspect(event);
        live?.inspect(event);
      },
    });
    return result.exitCode;
  } finally {
    kvp?.flush();
    journal?.close();
    await live?.stop();
    await closeAll();
    close();
  }
}

async function graph(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      machine: { type: 'string', default: 'provisioning' },
      format: { type: 'string', default: 'svg' },
      output: { type: 'string', short: 'o' },
    },
    strict: true,
  });
  const { renderMachine } = await import('./inspect/render.js');
  const text = await renderMachine(values.machine!, values.format!);
  if (values.output) writeFileSync(values.output, text);
  else process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  return EXIT_OK;
}

async function trace(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: { output: { type: 'string', short: 'o' }, config: { type: 'string' } },
    strict: true,
    allowPositionals: true,
  });
  const { writeTrace } = await import('./inspect/render.js');
  const config = await configFrom(values.config);
  const written = await writeTrace({ journal: positionals[0], dataDir: config.data_dir.path, output: values.output });
  process.stdout.write(`${written}\n`);
  return EXIT_OK;
}

async function inspectServer(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { host: { type: 'string', default: '127.0.0.1' }, port: { type: 'string', default: '8787' } },
    strict: true,
  });
  const { startInspectServer } = await import('./inspect/live.js');
  const server = await startInspectServer({ host: values.host!, port: Number(values.port) });
  process.stdout.write(`${JSON.stringify({ agent: server.agentUrl, viewer: server.viewerUrl })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  return EXIT_OK;
}
