/**
 * `bootstate monitor [--once]`: composes the monitor chart with the real fabric clients and runs it until it
 * stops. SIGTERM (and SIGINT, SIGHUP, SIGQUIT, and the caller's signal) sends STOP, so measurements in flight are
 * aborted and queued observations get their one POST before the promise resolves; a second signal aborts that POST.
 */
import { createActor, toPromise, type InspectionEvent } from 'xstate';
import { monitorInput, monitorMachine, type Measurement, type MonitorState } from '../../machines/monitor.js';
import { HealthServiceClient, type HealthServiceOptions, type MonitorLog, type Observation } from '../azure/healthservice.js';
import { HostPluginClient } from '../azure/hostplugin.js';
import type { Config } from '../config/defaults.js';
import { monitorActors } from './actors.js';
import { bootClockMs } from './state-file.js';

/** Where the monitor sends its requests; tests point these at a fake fabric. */
export interface MonitorEndpoints {
  /** Full URL of the health store, normally `http://168.63.129.16:80/HealthService`. */
  healthService: string;
  /** Origin of the host GA plugin, normally `http://168.63.129.16:32526`. */
  hostPlugin: string;
  /** Origin of IMDS, normally `http://169.254.169.254`. */
  imds: string;
}

export interface RunMonitorOptions {
  config: Pick<Config, 'monitor' | 'wireserver' | 'imds'>;
  /** Measure every signal once, report, and exit. */
  once: boolean;
  /** What the previous cycle left (`--once` under the timer). */
  saved?: MonitorState | null;
  /** Aborting it stops the monitor as SIGTERM does. */
  signal?: AbortSignal;
  log: MonitorLog;
  /** Receives every unhealthy observation after its POST attempt (the KVP telemetry sink). */
  onUnhealthy: (observation: Observation) => void;
  inspect?: (event: InspectionEvent) => void;
  endpoints?: Partial<MonitorEndpoints>;
  /** Install SIGTERM/SIGINT handlers for the duration of the run (default true). */
  handleSignals?: boolean;
  /** Told what every measurement found, by observation name (for `--once`'s summary). */
  onMeasured?: (name: string, measurement: Measurement) => void;
  /** Told the outcome of every HealthService POST. */
  onPosted?: HealthServiceOptions['onPosted'];
}

/** Signals that stop the monitor (as for provisioning: SIGHUP and SIGQUIT end it the same way as SIGTERM). */
const STOPPING_SIGNALS: NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'];

export interface MonitorResult {
  exitCode: number;
  /** What the next cycle goes on from; null when the run failed before the chart ended. */
  state: MonitorState | null;
}

/** Derives the endpoints from configuration: the wireserver address for both wireserver services, IMDS's origin. */
export function defaultEndpoints(config: RunMonitorOptions['config']): MonitorEndpoints {
  const wire = config.wireserver.address.includes(':') ? `[${config.wireserver.address}]` : config.wireserver.address;
  return {
    healthService: `http://${wire}:${config.monitor.health_service_port}/HealthService`,
    hostPlugin: `http://${wire}:${config.monitor.host_plugin_port}`,
    imds: new URL(config.imds.endpoint).origin,
  };
}

/**
 * Runs the monitor until STOP (or, with `once`, until every signal was measured and reported once).
 *
 * @example
 *   const { exitCode } = await runMonitor({ config, once: false, log, onUnhealthy: (o) => kvp.write(o) });
 *   process.exitCode = exitCode;
 */
export async function runMonitor(options: RunMonitorOptions): Promise<MonitorResult> {
  const { config, once, log } = options;
  const endpoints = { ...defaultEndpoints(config), ...options.endpoints };
  const requestTimeoutMs = config.monitor.request_timeout_secs * 1000;
  const hardStop = new AbortController();
  const healthService = new HealthServiceClient({
    url: endpoints.healthService,
    requestTimeoutMs,
    onUnhealthy: options.onUnhealthy,
    log,
    signal: hardStop.signal,
    onPosted: options.onPosted,
  });
  const machine = monitorMachine.provide({
    actors: monitorActors({
      hostPlugin: new HostPluginClient(endpoints.hostPlugin),
      imdsOrigin: endpoints.imds,
      healthService,
      requestTimeoutMs,
      now: bootClockMs,
      log,
      onMeasured: options.onMeasured,
    }),
  });
  const actor = createActor(machine, { input: monitorInput(config.monitor, once, options.saved ?? null), inspect: options.inspect });

  // A timer-started cycle says nothing at info level when all is well: it runs every minute.
  const note = (fields: object, message: string) => (once ? log.debug(fields, message) : log.info(fields, message));
  let stops = 0;
  const stop = (why: string) => {
    stops += 1;
    if (stops === 1) {
      log.info({ why }, 'monitor stopping');
      actor.send({ type: 'STOP' });
    } else {
      hardStop.abort();
    }
  };
  const onSignal = (name: NodeJS.Signals) => stop(name);
  const onAbort = () => stop('aborted');
  const handleSignals = options.handleSignals ?? true;
  if (handleSignals) for (const name of STOPPING_SIGNALS) process.on(name, onSignal);
  options.signal?.addEventListener('abort', onAbort, { once: true });

  try {
    note({ once, endpoints }, 'monitor started');
    actor.start();
    if (options.signal?.aborted) onAbort();
    const output = await toPromise(actor);
    note({ result: output.result }, 'monitor stopped');
    return { exitCode: output.exitCode, state: output.state };
  } catch (error) {
    log.warn({ error: (error as Error).message }, 'monitor failed');
    return { exitCode: 1, state: null };
  } finally {
    if (handleSignals) for (const name of STOPPING_SIGNALS) process.off(name, onSignal);
    options.signal?.removeEventListener('abort', onAbort);
    actor.stop();
  }
}
