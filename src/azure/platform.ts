/**
 * Whether this machine is an Azure VM, decided before anything is sent to Azure's addresses. An image booted off
 * Azure (QEMU, a local Packer build, a CI VM) has no IMDS: without this check the run would retry IMDS for its
 * whole budget while logins wait, then report to a wireserver that is not there.
 *
 * Azure VMs carry the DMI chassis asset tag `7783-7084-3265-9085-8269-3286-77` (cloud-init decides the same way).
 * A machine without it still counts as Azure when it has a UDF or ISO 9660 device that may be the provisioning
 * media, or when the configuration says so: `[platform] check = false`, or endpoints of its own for IMDS or the
 * wireserver (a configuration that names the fabric's addresses has said where the fabric is).
 */
import { readFileSync } from 'node:fs';
import { DEFAULT_CONFIG, type Config } from '../config/defaults.js';
import { under } from '../system/paths.js';
import type { probeMediaDevices } from './volume-probe.js';

export const AZURE_CHASSIS_ASSET_TAG = '7783-7084-3265-9085-8269-3286-77';
export const CHASSIS_ASSET_TAG_PATH = '/sys/class/dmi/id/chassis_asset_tag';

export interface PlatformCheck {
  onAzure: boolean;
  /** Why, in one phrase for the log. */
  why: string;
}

/** Decides from `sysRoot`'s sysfs (default `/`); reads the block devices only when the asset tag is not Azure's. */
export async function checkPlatform(config: Config, sysRoot = '/', probe?: typeof probeMediaDevices): Promise<PlatformCheck> {
  if (!config.platform.check) return { onAzure: true, why: '[platform] check = false' };
  if (config.imds.endpoint !== DEFAULT_CONFIG.imds.endpoint || config.wireserver.address !== DEFAULT_CONFIG.wireserver.address) {
    return { onAzure: true, why: 'the configuration names the fabric\'s endpoints' };
  }
  let tag: string | null;
  try {
    tag = readFileSync(under(sysRoot, CHASSIS_ASSET_TAG_PATH), 'utf8').trim();
  } catch {
    tag = null;
  }
  if (tag === AZURE_CHASSIS_ASSET_TAG) return { onAzure: true, why: 'the DMI chassis asset tag is Azure\'s' };
  const seen = tag === null ? `no DMI chassis asset tag (${CHASSIS_ASSET_TAG_PATH} unreadable)` : `the DMI chassis asset tag is ${JSON.stringify(tag)}, not Azure's ${AZURE_CHASSIS_ASSET_TAG}`;
  if (config.provisioning_media.enable) {
    // Loaded only here: on Azure the tag decides, and the probe stays off the start of the run.
    const list = probe ?? (await import('./volume-probe.js')).probeMediaDevices;
    const devices = await list(sysRoot).catch(() => null);
    const first = devices?.udf[0] ?? devices?.iso9660[0];
    if (first) return { onAzure: true, why: `${seen}, but ${first} may be Azure's provisioning media` };
  }
  return { onAzure: false, why: seen };
}
