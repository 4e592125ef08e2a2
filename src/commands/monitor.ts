/**
 * `bootstate monitor [--once]`: the HealthService observations (host plugin and IMDS heartbeats) after a first
 * boot, posted until stopped; `--once` measures every signal once and prints what it measured and posted.
 */
import type { InspectionEvent } from 'xstate';
import { closeAll } from '../azure/http.js';
import type { ParsedArgs } from '../cli/argv.js';
import { configFrom } from '../cli/options.js';
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';
import { createLogger } from '../logging/log.js';
import type { LogFormat } from '../logging/log-text.js';
import { readVmId } from '../os/vmid.js';

export async function monitor(values: ParsedArgs['values']): Promise<number> {
  const config = await configFrom(values.config as string | undefined);
  const { runMonitor, defaultEndpoints } = await import('../monitor/run.js');
  const { KvpTelemetry } = await import('../kvp/telemetry.js');
  const { pinoDestination } = await import('../kvp/log-sink.js');
  const { createJournal } = await import('../inspect/journal.js');
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
  const live = values.inspect ? (await import('../inspect/live.js')).startLiveInspector(values.inspect as string, { onProblem: (message) => log.warn({ step: 'inspect' }, message) }) : null;
  const observeLive = sinks.observer('live inspector', (event: InspectionEvent) => live?.inspect(event));
  const once = values.once === true;
  const { MonitorSummary } = await import('../monitor/summary.js');
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
