/**
 * `bootstate resource-disk`: the temporary disk's pass on every boot (bootstate-resource-disk.service, after the
 * first-boot unit): format it if it holds only what Azure put there, mount it, make the swap file. Whatever happens
 * to the disk, it exits 0 and says so in the journal and KVP: a temporary disk left alone is not a broken VM. It
 * exits 1 only when a step it started (partitioning, mkfs, the mount) failed, so the unit shows it.
 */
import { existsSync } from 'node:fs';
import type { ParsedArgs } from '../cli/argv.js';
import { unitRun } from '../cli/unit-run.js';
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';
import { run } from '../system/exec.js';

export function resourceDisk(values: ParsedArgs['values']): Promise<number> {
  return unitRun(values, async ({ config, log, event }) => {
    if (!config.resource_disk.enable || config.steps.skip.includes('resource-disk')) {
      log.info({ step: 'resource-disk', skipped: true }, `step resource-disk skipped (${config.resource_disk.enable ? '[steps] skip' : '[resource_disk] enable = false'} in the configuration)`);
      return EXIT_OK;
    }
    const { resourceDiskPass } = await import('../resource-disk/pass.js');
    const outcome = await resourceDiskPass(config.resource_disk, {
      run,
      log,
      sysRoot: (values.sysfs as string | undefined) ?? '/sys',
      devDir: '/dev',
      mountinfo: '/proc/self/mountinfo',
      swaps: '/proc/swaps',
      unitDir: '/etc/systemd/system',
      fstab: '/etc/fstab',
      systemd: existsSync('/run/systemd/system'),
      requireAzure: config.platform.check,
    });
    const summary = `${outcome.result}${outcome.device ? ` ${outcome.device}` : ''}: ${outcome.why}${outcome.swap ? `; swap ${outcome.swap}` : ''}`;
    // The warnings reached KVP through the log already; this is the one-line outcome.
    event('INFO', 'resource-disk', summary);
    return outcome.result === 'failed' ? EXIT_FAILURE : EXIT_OK;
  });
}
