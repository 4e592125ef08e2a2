/**
 * The real actors behind the monitor chart's named placeholders. Each measurement is one request whose answer
 * is classified into plain data stamped with the clock; the reporter and the flush share one HealthService
 * client, so the flush on STOP sees exactly what the reporter queued.
 */
import { fromCallback, fromPromise } from 'xstate';
import { HEARTBEAT, IMDS_HEARTBEAT, VERSIONS, type Measurement, type ReporterEvent, type VersionsMeasurement } from '../../machines/monitor.js';
import type { HealthServiceClient, MonitorLog } from '../azure/healthservice.js';
import type { HostPluginClient } from '../azure/hostplugin.js';
import { checkImdsHeartbeat } from './imds-heartbeat.js';

export interface MonitorActorDeps {
  hostPlugin: HostPluginClient;
  /** IMDS origin, e.g. `http://169.254.169.254`. */
  imdsOrigin: string;
  healthService: HealthServiceClient;
  requestTimeoutMs: number;
  /** Monotonic milliseconds; measurements are stamped with it when they finish. */
  now: () => number;
  log: MonitorLog;
  /** Told what every measurement found, by observation name. */
  onMeasured?: (name: string, measurement: Measurement) => void;
}

/** Builds the actor implementations the runner passes to `monitorMachine.provide`. */
export function monitorActors(deps: MonitorActorDeps) {
  const { hostPlugin, imdsOrigin, healthService, requestTimeoutMs, now, log } = deps;
  const measured = <M extends Measurement>(name: string, measurement: M): M => {
    deps.onMeasured?.(name, measurement);
    return measurement;
  };
  return {
    checkHeartbeat: fromPromise<Measurement>(async ({ signal }) => {
      const result = await hostPlugin.checkHealth({ requestTimeoutMs, signal });
      return measured(HEARTBEAT, { ...result, at: now() });
    }),
    checkVersions: fromPromise<VersionsMeasurement>(async ({ signal }) => {
      const result = await hostPlugin.checkVersions({ requestTimeoutMs, signal });
      return measured(VERSIONS, { ...result, at: now() });
    }),
    checkImds: fromPromise<Measurement>(async ({ signal }) => {
      const result = await checkImdsHeartbeat(imdsOrigin, { requestTimeoutMs, signal });
      return measured(IMDS_HEARTBEAT, { ...result, at: now() });
    }),
    reporter: fromCallback<ReporterEvent>(({ receive }) => {
      receive((event) => {
        log.debug({ observation: event.observation }, 'health observation');
        healthService.report(event.observation).catch((error: unknown) => {
          log.warn({ error: (error as Error).message }, 'health observation not reported');
        });
      });
    }),
    flush: fromPromise<void>(() => healthService.flush()),
  };
}
