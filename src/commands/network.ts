/**
 * `bootstate network`: the network step of every boot (bootstate-network.service, after the first-boot unit's
 * READY=1 and network-online.target): the VM's NICs, secondary IP addresses and IPv6 from IMDS, rendered for the
 * image's network stack and applied live. It exits 0 when it configured the network or kept the image's own
 * configuration (saying why, as a warning), 1 when writing or applying failed, so the unit shows it. The outcome
 * goes to the journal and, in one line, to KVP.
 */
import type { ParsedArgs } from '../cli/argv.js';
import { configFrom } from '../cli/options.js';
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';
import { createLogger } from '../logging/log.js';
import type { LogFormat } from '../logging/log-text.js';
import { run } from '../system/exec.js';
import { readVmId } from '../azure/vmid.js';
import { checkPlatform } from '../azure/platform.js';

export async function network(values: ParsedArgs['values']): Promise<number> {
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
    if (!config.network.enable) {
      log.info({ step: 'network', skipped: true }, 'step network skipped ([network] enable = false in the configuration)');
      return EXIT_OK;
    }
    const root = (values.root as string | undefined) ?? '/';
    const platform = await checkPlatform(config);
    if (!platform.onAzure) {
      log.info({ step: 'network', skipped: true }, `step network skipped: not an Azure VM (${platform.why})`);
      return EXIT_OK;
    }
    const { networkPass } = await import('../network/pass.js');
    const outcome = await networkPass(config, { root, sysClassNet: (values['sys-class-net'] as string | undefined) ?? '/sys/class/net', live: root === '/', run, log });
    (outcome.result === 'failed' ? log.error : log.info).call(log, { step: 'network', result: outcome.result, stack: outcome.stack }, `network: ${outcome.summary}`);
    // The warnings reached KVP through the log already; this is the one-line outcome.
    kvp?.event(outcome.result === 'failed' ? 'ERROR' : 'INFO', 'network', outcome.summary);
    return outcome.result === 'failed' ? EXIT_FAILURE : EXIT_OK;
  } finally {
    kvp?.flush();
    close();
  }
}

