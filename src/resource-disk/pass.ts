/**
 * One `bootstate resource-disk` pass: which disks it may look at, and who does the work. azure-vm-utils' setup, when
 * enabled or when its fstab line is there, owns the temporary disks: nothing is touched. Local NVMe disks are left
 * alone unless `[resource_disk] local_nvme` says `raid0` or `each` (aggregate.ts), and then they are the temporary
 * disk and a SCSI resource disk beside them (Lsv3) is left alone; otherwise the SCSI resource disk is the temporary
 * disk (prepare.ts).
 */
import { prepareLocalNvme } from './aggregate.js';
import { azureVmUtilsClaim } from './azure-vm-utils.js';
import type { ResourceDiskConfig } from '../config/defaults.js';
import { findResourceDisk } from './find.js';
import { localDisks } from './local-nvme.js';
import { onAzure, prepareResourceDisk, type ResourceDiskEnv, type ResourceDiskOutcome } from './prepare.js';

export interface PassEnv extends ResourceDiskEnv {
  /** `/etc/fstab`, read for azure-vm-utils' line. */
  fstab: string;
}

const STEP = { step: 'resource-disk' } as const;

/** Runs one pass; never throws. */
export async function resourceDiskPass(config: ResourceDiskConfig, env: PassEnv): Promise<ResourceDiskOutcome> {
  if (!(await onAzure(env))) return prepareResourceDisk(config, env);
  const claim = await azureVmUtilsClaim(env, config.mount_point);
  if (claim) {
    const why = `${claim}: it formats and mounts the temporary disks itself; disable it or set [resource_disk] enable = false`;
    env.log.warn(STEP, `no disk is touched: ${why}`);
    return { result: 'left-alone', why };
  }
  const found = findResourceDisk(env.sysRoot);
  const local = localDisks(found.localNvme, env.devDir);
  if (local.disks.length > 0 && config.local_nvme !== 'leave') {
    if (found.disk) env.log.info(STEP, `SCSI resource disk /dev/${found.disk.name} left alone: the local NVMe disks are the temporary disk (local_nvme = "${config.local_nvme}")`);
    return prepareLocalNvme(config, env, local);
  }
  if (local.disks.length > 0) {
    const names = local.disks.map((d) => d.shown).join(', ');
    env.log.info(STEP, `local NVMe disks left alone: ${names} ([resource_disk] local_nvme = "leave"; "raid0" or "each" would use them when blank)`);
    if (!found.disk) return { result: 'left-alone', device: local.disks.map((d) => d.device).join(' '), why: 'local NVMe disks are left alone (local_nvme = "leave")' };
  }
  return prepareResourceDisk(config, env);
}
