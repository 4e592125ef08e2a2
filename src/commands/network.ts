/**
 * `bootstate network`: the network step of every boot (bootstate-network.service, after the first-boot unit's
 * READY=1 and network-online.target): the VM's NICs, secondary IP addresses and IPv6 from IMDS, rendered for the
 * image's network stack and applied live. It exits 0 when it configured the network or kept the image's own
 * configuration (saying why, as a warning), 1 when writing or applying failed, so the unit shows it. The outcome
 * goes to the journal and, in one line, to KVP.
 */
import type { ParsedArgs } from '../cli/argv.js';
import { unitRun } from '../cli/unit-run.js';
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';
import { run } from '../system/exec.js';
import { checkPlatform } from '../azure/platform.js';

export function network(values: ParsedArgs['values']): Promise<number> {
  return unitRun(values, async ({ config, log, event }) => {
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
    const sysClassNet = (values['sys-class-net'] as string | undefined) ?? '/sys/class/net';
    const outcome = await networkPass(config, { root, sysClassNet, live: root === '/', run, log });
    (outcome.result === 'failed' ? log.error : log.info).call(log, { step: 'network', result: outcome.result, stack: outcome.stack }, `network: ${outcome.summary}`);
    // The warnings reached KVP through the log already; this is the one-line outcome.
    event(outcome.result === 'failed' ? 'ERROR' : 'INFO', 'network', outcome.summary);
    return outcome.result === 'failed' ? EXIT_FAILURE : EXIT_OK;
  });
}
