/**
 * `bootstate monitor [--once]`: the HealthService observations (host plugin and IMDS heartbeats) after a first
 * boot, posted until stopped; `--once` measures every signal once, prints what it measured and posted, and is the
 * cycle `bootstate-monitor.timer` starts every minute: it goes on from the roll-up state the previous cycle left
 * (src/monitor/state-file.ts), saves its own, and publishes a hostname changed since the last cycle
 * (src/monitor/hostname-watch.ts). A cycle writes no run journal (one a minute would rotate the first boot's out)
 * and keeps debug lines out of the log file. With an OTLP endpoint (and `[telemetry] otlp_monitor`), each `--once`
 * cycle is sent as one trace once it is done (src/observe/trace-export.ts).
 */
import type { InspectionEvent } from 'xstate';
import { closeAll } from '../azure/http.js';
import type { ParsedArgs } from '../cli/argv.js';
import { configFrom } from '../cli/options.js';
import type { Config } from '../config/defaults.js';
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';
import { createLogger } from '../logging/log.js';
import type { LogFormat } from '../logging/log-text.js';
import { readVmId } from '../azure/vmid.js';
import type { MonitorState } from '../../machines/monitor-types.js';
import type { MonitorLog } from '../azure/healthservice.js';
import { otlpSettings } from '../observe/otlp-settings.js';
import { RunTrace } from '../observe/run-trace.js';
import type { MonitorSummary } from '../monitor/summary.js';

export async function monitor(values: ParsedArgs['values']): Promise<number> {
  const config = await configFrom(values.config as string | undefined);
  const once = values.once === true;
  const { runMonitor, defaultEndpoints } = await import('../monitor/run.js');
  const { KvpTelemetry } = await import('../kvp/telemetry.js');
  const { pinoDestination } = await import('../kvp/log-sink.js');
  const kvp = config.telemetry.kvp ? new KvpTelemetry({ config: config.telemetry }) : null;
  const { log, close, sinks } = createLogger({
    logPath: config.log_path.path,
    fileLevel: once ? 'info' : 'debug',
    format: values['log-format'] as LogFormat | undefined,
    extra: kvp ? [{ level: 'warn', stream: pinoDestination(kvp), sink: 'kvp telemetry' }] : [],
  });
  const { vmId } = await readVmId();
  kvp?.setVmId(vmId);
  let journal: { inspect(event: InspectionEvent): void; close(): void } | null = null;
  try {
    if (config.journal.enable && !once) journal = (await import('../inspect/journal.js')).createJournal({ dir: config.data_dir.path, vmId, keep: config.journal.keep });
  } catch (error) {
    sinks.fail('journal', error);
  }
  const observeJournal = sinks.observer('journal', (event: InspectionEvent) => journal?.inspect(event));
  const live = values.inspect ? (await import('../inspect/live.js')).startLiveInspector(values.inspect as string, { onProblem: (message) => log.warn({ step: 'inspect' }, message) }) : null;
  const observeLive = sinks.observer('live inspector', (event: InspectionEvent) => live?.inspect(event));
  const { MonitorSummary } = await import('../monitor/summary.js');
  const summary = new MonitorSummary();
  const cycle = once ? await startCycle(config, log) : null;
  const trace = once ? cycleTrace(config) : null;
  const observeTrace = sinks.observer('trace', (event: InspectionEvent) => trace?.recorder.inspect(event));
  try {
    const result = await runMonitor({
      config,
      once,
      saved: cycle?.saved ?? null,
      log,
      onMeasured: (name, measurement) => summary.measured(name, measurement),
      onPosted: (batch, outcome) => summary.posted(batch, outcome),
      onUnhealthy: (observation) => kvp?.event('WARN', 'monitor.observation', `${observation.ObservationName} unhealthy: ${observation.Value}`),
      inspect:
        journal || live || trace
          ? (event) => {
              observeJournal(event);
              observeLive(event);
              observeTrace(event);
            }
          : undefined,
    });
    if (!cycle) return result.exitCode;
    await cycle.end(result.state);
    for (const line of summary.lines(defaultEndpoints(config).healthService)) process.stdout.write(`${line}\n`);
    await trace?.send(summary, result.exitCode, vmId, log);
    return result.exitCode !== EXIT_OK ? result.exitCode : summary.failed ? EXIT_FAILURE : EXIT_OK;
  } finally {
    kvp?.flush();
    sinks.observer('journal', () => journal?.close())();
    await live?.stop();
    await closeAll();
    close();
  }
}

/** A `--once` cycle's trace, when an OTLP endpoint is configured and `otlp_monitor` allows it: recorded, then sent. */
function cycleTrace(config: Config) {
  const otlp = config.telemetry.otlp_monitor ? otlpSettings(config.telemetry) : null;
  if (!otlp) return null;
  const recorder = new RunTrace('monitor cycle');
  return {
    recorder,
    async send(summary: MonitorSummary, exitCode: number, vmId: string, log: MonitorLog): Promise<void> {
      const spans = recorder.finish({ result: summary.failed ? 'unhealthy' : 'healthy', exitCode });
      Object.assign(recorder.root.attributes, summary.traceAttributes());
      const { exportTrace, runResource } = await import('../observe/trace-export.js');
      const outcome = await exportTrace(spans, runResource(vmId, undefined), otlp);
      if ('failed' in outcome) log.warn({ step: 'trace' }, `trace not exported: ${outcome.failed}`);
    },
  };
}

/** A `--once` cycle's state from the previous one, and what it does after posting: save its own, watch the hostname. */
async function startCycle(config: Config, log: MonitorLog) {
  const { currentBootId, loadMonitorState, saveMonitorState } = await import('../monitor/state-file.js');
  const file = config.monitor.state_file;
  let bootId: string | null = null;
  let saved: MonitorState | null = null;
  try {
    bootId = currentBootId();
    const loaded = loadMonitorState(file, bootId);
    saved = loaded.state;
    if (loaded.discarded && loaded.warn) log.warn({ file }, `monitor state discarded, starting afresh: ${loaded.discarded}`);
    else if (loaded.discarded) log.debug({ file }, `monitor state discarded, starting afresh: ${loaded.discarded}`);
  } catch (error) {
    log.warn({ file }, `monitor state not read, starting afresh: ${(error as Error).message}`);
  }
  return {
    saved,
    async end(state: MonitorState | null) {
      try {
        const cleared = state && bootId ? saveMonitorState(file, bootId, state) : null;
        if (cleared) log.warn({ file }, `monitor state: ${cleared}`);
      } catch (error) {
        log.warn({ file }, `monitor state not saved: ${(error as Error).message}`);
      }
      try {
        const { watchHostname } = await import('../monitor/hostname-watch.js');
        await watchHostname({ config: config.hostname_publishing, dataDir: config.data_dir.path, log });
      } catch (error) {
        log.warn({ step: 'hostnamePublish' }, `hostname not checked: ${(error as Error).message}`);
      }
    },
  };
}
