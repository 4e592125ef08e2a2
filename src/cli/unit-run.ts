/**
 * What every every-boot unit's command shares (`resource-disk`, `network`): the configuration of `--config`, a logger
 * whose warnings also reach KVP telemetry, the VM id on those records, and the pool flushed and the log closed
 * however the body ends. The body gets them and says what one KVP event sums the run up as.
 */
import type { ParsedArgs } from './argv.js';
import { configFrom } from './options.js';
import type { Config } from '../config/defaults.js';
import { createLogger, type Logger } from '../logging/log.js';
import type { LogFormat } from '../logging/log-text.js';
import { readVmId } from '../azure/vmid.js';

export interface UnitRun {
  config: Config;
  log: Logger;
  /** One line for KVP, the run's outcome (`level` ERROR or INFO); nothing when KVP telemetry is off. */
  event(level: 'INFO' | 'ERROR', name: string, message: string): void;
}

/** Runs `body` with the unit's configuration, logger and KVP event; resolves to the body's exit code. */
export async function unitRun(values: ParsedArgs['values'], body: (run: UnitRun) => Promise<number>): Promise<number> {
  const config = await configFrom(values.config as string | undefined);
  const { KvpTelemetry } = await import('../kvp/telemetry.js');
  const { pinoDestination } = await import('../kvp/log-sink.js');
  const kvp = config.telemetry.kvp ? new KvpTelemetry({ config: config.telemetry }) : null;
  const { log, close } = createLogger({
    logPath: config.log_path.path,
    format: values['log-format'] as LogFormat | undefined,
    extra: kvp ? [{ level: 'warn', stream: pinoDestination(kvp), sink: 'kvp telemetry' }] : [],
  });
  try {
    kvp?.setVmId((await readVmId()).vmId);
    return await body({ config, log, event: (level, name, message) => kvp?.event(level, name, message) });
  } finally {
    kvp?.flush();
    close();
  }
}
