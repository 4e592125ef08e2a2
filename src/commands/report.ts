/**
 * `bootstate report ready|in-progress|failure`: one health report to the wireserver, for image builders and
 * support, through the same report chart (machines/report.ts) and so with the same retries and deadline as a
 * first boot's.
 */
import { createActor, fromPromise, toPromise } from 'xstate';
import { HEALTH_FAILED, HEALTH_IN_PROGRESS, HEALTH_READY, type Health } from '../../machines/provisioning.js';
import { reportMachine } from '../../machines/report.js';
import { timerMs } from '../../machines/retry.js';
import { EncodedReports } from '../provision/encoded-reports.js';
import { closeAll } from '../azure/http.js';
import { HealthReporter } from '../azure/wireserver.js';
import type { ParsedArgs } from '../cli/argv.js';
import { UsageError } from '../cli/argv.js';
import { configFrom } from '../cli/options.js';
import { describeFailure, EXIT_FAILURE, EXIT_OK, failure } from '../core/errors.js';
import { createLogger } from '../logging/log.js';
import type { LogFormat } from '../logging/log-text.js';
import { readVmId } from '../azure/vmid.js';

const HEALTH_BY_NAME: Record<string, Health> = {
  ready: HEALTH_READY,
  'in-progress': HEALTH_IN_PROGRESS,
  failure: HEALTH_FAILED,
};

export async function report(values: ParsedArgs['values'], positionals: string[]): Promise<number> {
  const health = HEALTH_BY_NAME[positionals[0]];
  const reason = values.reason as string | undefined;
  if (health === HEALTH_FAILED && !reason) throw new UsageError('a failure report needs --reason TEXT');
  if (health !== HEALTH_FAILED && reason !== undefined) throw new UsageError(`--reason applies only to a failure report`);
  const config = await configFrom(values.config as string | undefined);
  const { log, close } = createLogger({ logPath: config.log_path.path, format: values['log-format'] as LogFormat | undefined });
  const vmId = (values['vm-id'] as string | undefined) ?? (await readVmId()).vmId;
  const book = new EncodedReports();
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
        retryIntervalMs: timerMs(config.wireserver.retry_interval_secs),
        totalTimeoutMs: timerMs(config.wireserver.total_retry_timeout_secs),
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
