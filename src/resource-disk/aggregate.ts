/**
 * What becomes of several local NVMe disks when `[resource_disk] local_nvme` asks for it: one md RAID0 array over all
 * of them with ext4 on it (`raid0`, as azure-vm-utils' opt-in setup does), or ext4 on each (`each`, at
 * `<mount_point>/<index>`). Every disk goes through the same per-disk rule as the SCSI temporary disk (decide.ts), and
 * nothing is written unless every one of them may be: one disk holding anything leaves them all alone, with a warning
 * naming it. A single local disk under `raid0` is used on its own, as the SCSI disk is.
 */
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import type { ResourceDiskConfig } from '../config/defaults.js';
import { stderrOf } from '../system/exec.js';
import type { Decision } from './decide.js';
import type { LocalDisk, LocalDisks } from './local-nvme.js';
import { actOn, failed, inspect, makeFilesystem, mountIt, mountPointProblem, swapOn, type ResourceDiskEnv, type ResourceDiskOutcome } from './prepare.js';
import { blkid, devNumber } from './probe.js';

const TIMEOUT = 10 * 60 * 1000;
const STEP = { step: 'resource-disk' } as const;

type Usable = Exclude<Decision, { action: 'leave' }>;

/**
 * Reads every disk, each against its own target (`configFor`: its mount point); their decisions when every one may be
 * used, else the warning naming those that may not.
 */
async function decideAll(configFor: (d: LocalDisk) => ResourceDiskConfig, env: ResourceDiskEnv, disks: LocalDisk[], usable: (d: Usable) => boolean): Promise<Usable[] | string> {
  const decisions: Usable[] = [];
  const refused: string[] = [];
  for (const disk of disks) {
    const config = configFor(disk);
    let decision: Decision;
    try {
      decision = await inspect(config, env, disk.device);
    } catch (error) {
      refused.push(`${disk.shown}: it could not be read: ${stderrOf(error)}`);
      continue;
    }
    if (decision.action !== 'leave' && usable(decision)) decisions.push(decision);
    else refused.push(`${disk.shown}: ${decision.action === 'leave' ? decision.why : `${decision.why} (not a blank disk, which local_nvme = "${config.local_nvme}" needs)`}`);
  }
  return refused.length === 0 ? decisions : refused.join('; ');
}

/** Formats, mounts or leaves the local NVMe disks as `config.local_nvme` (raid0 or each) says; never throws. */
export async function prepareLocalNvme(config: ResourceDiskConfig, env: ResourceDiskEnv, local: LocalDisks): Promise<ResourceDiskOutcome> {
  const { disks } = local;
  env.log.info(STEP, `local NVMe disks (${local.orderedBy}): ${disks.map((d) => `${d.index} = ${d.shown}`).join(', ')}; local_nvme = "${config.local_nvme}"`);
  if (config.local_nvme === 'each') return each(config, env, disks);
  if (disks.length === 1) {
    const decisions = await decideAll(() => config, env, disks, () => true);
    return typeof decisions === 'string' ? leftAlone(env, disks, decisions) : actOn(config, env, disks[0]!.device, decisions[0]!);
  }
  return raid0(config, env, disks);
}

function leftAlone(env: ResourceDiskEnv, disks: LocalDisk[], why: string): ResourceDiskOutcome {
  const device = disks.map((d) => d.device).join(' ');
  env.log.warn(STEP, `local NVMe disks left alone, all ${disks.length} of them: ${why}`);
  return { result: 'left-alone', device, why };
}

/** `each`: ext4 on every disk at `<mount_point>/<index>`; the swap file, if any, on the first. */
async function each(config: ResourceDiskConfig, env: ResourceDiskEnv, disks: LocalDisk[]): Promise<ResourceDiskOutcome> {
  const own = (disk: LocalDisk) => ({ ...config, mount_point: path.posix.join(config.mount_point, String(disk.index)), swap_size_mb: disk === disks[0] ? config.swap_size_mb : 0 });
  const decisions = await decideAll(own, env, disks, () => true);
  if (typeof decisions === 'string') return leftAlone(env, disks, decisions);
  const outcomes: ResourceDiskOutcome[] = [];
  for (const [i, disk] of disks.entries()) outcomes.push(await actOn(own(disk), env, disk.device, decisions[i]!));
  const bad = outcomes.find((o) => o.result === 'failed');
  const device = disks.map((d) => d.device).join(' ');
  if (bad) return { result: 'failed', device, why: `${bad.device}: ${bad.why}` };
  const result = outcomes.some((o) => o.result === 'formatted') ? 'formatted' : 'mounted';
  return { result, device, why: `each local NVMe disk at ${config.mount_point}/<index>`, swap: outcomes[0]!.swap };
}

/** An assembled md array over exactly `disks` at RAID level 0: its kernel name, or null. */
export function arrayOver(sysRoot: string, disks: LocalDisk[]): string | null {
  const names = disks.map((d) => d.name).sort();
  let block: string[];
  try {
    block = readdirSync(path.join(sysRoot, 'class/block')).filter((n) => /^md\d+$/.test(n));
  } catch {
    return null;
  }
  for (const md of block) {
    const dir = path.join(sysRoot, 'class/block', md);
    try {
      const slaves = readdirSync(path.join(dir, 'slaves')).sort();
      const level = readFileSync(path.join(dir, 'md/level'), 'utf8').trim();
      if (level === 'raid0' && slaves.join(' ') === names.join(' ')) return md;
    } catch {
      // not an md array the kernel describes fully: not ours
    }
  }
  return null;
}

/** `/dev/md/<label>` when it leads to the array, else the array's kernel node. */
function arrayNode(env: ResourceDiskEnv, md: string, label: string): string {
  const named = path.join(env.devDir, 'md', label);
  try {
    return realpathSync(named) === realpathSync(path.join(env.devDir, md)) ? named : path.join(env.devDir, md);
  } catch {
    return path.join(env.devDir, md);
  }
}

/**
 * `raid0` over several disks. An array the kernel assembled over exactly these disks is mounted when it holds
 * bootstate's ext4, or given one when its md name says bootstate made it and it holds nothing yet; otherwise every
 * disk is read, and only when every one is blank is the array made.
 */
async function raid0(config: ResourceDiskConfig, env: ResourceDiskEnv, disks: LocalDisk[]): Promise<ResourceDiskOutcome> {
  const md = arrayOver(env.sysRoot, disks);
  if (md) return existingArray(config, env, disks, arrayNode(env, md, config.label));
  const decisions = await decideAll(() => config, env, disks, (d) => d.action === 'format');
  if (typeof decisions === 'string') return leftAlone(env, disks, decisions);
  const array = path.join(env.devDir, 'md', config.label);
  try {
    const problem = await mountPointProblem(config.mount_point, env, null);
    if (problem) return failed(env, array, `not made: ${problem}`);
  } catch (error) {
    return failed(env, array, `mount point ${config.mount_point}: ${stderrOf(error)}`);
  }
  env.log.info(STEP, `local NVMe disks: every one of the ${disks.length} is blank (${decisions.map((d) => d.why).filter((w, i, all) => all.indexOf(w) === i).join('; ')}): making RAID0 array ${array}`);
  try {
    // No --run and an empty stdin: should mdadm find anything on a disk after all, its question is answered "no".
    await env.run(['mdadm', '--create', array, '--level=0', `--raid-devices=${disks.length}`, '--metadata=1.2', '--homehost=any', `--name=${config.label}`, ...disks.map((d) => d.device)], {
      stdin: Buffer.alloc(0),
      timeoutMs: TIMEOUT,
    });
  } catch (error) {
    return failed(env, array, `making the RAID0 array failed: ${stderrOf(error)}`);
  }
  let node: string;
  try {
    node = await madeArray(env, array, disks);
    await makeFilesystem(env, node, config.label);
  } catch (error) {
    return failed(env, array, `formatting the new RAID0 array failed: ${stderrOf(error)}`);
  }
  return mountArray(config, env, node, 'formatted', `a RAID0 array over ${disks.length} blank local NVMe disks`);
}

/**
 * The node of the array mdadm just made: `/dev/md/<label>` once udev has made it (mdadm may return before), else the
 * kernel's `mdN` over exactly these disks.
 */
async function madeArray(env: ResourceDiskEnv, array: string, disks: LocalDisk[]): Promise<string> {
  await env.run(['udevadm', 'settle', '--timeout=60'], { timeoutMs: 90_000, allowFailure: true }).catch(() => undefined);
  if (existsSync(array)) return array;
  const md = arrayOver(env.sysRoot, disks);
  if (md && existsSync(path.join(env.devDir, md))) return path.join(env.devDir, md);
  throw new Error(`mdadm made no ${array}, and no md array over the disks is to be seen`);
}

/** The array the kernel assembled: mounted when it holds our ext4, given it when it is ours and empty, else left. */
async function existingArray(config: ResourceDiskConfig, env: ResourceDiskEnv, disks: LocalDisk[], array: string): Promise<ResourceDiskOutcome> {
  let tags: Record<string, string>;
  let members: Array<Record<string, string>>;
  try {
    tags = await blkid(env.run, array);
    members = await Promise.all(disks.map((d) => blkid(env.run, d.device)));
  } catch (error) {
    return failed(env, array, `could not be read: ${stderrOf(error)}`);
  }
  const ours = members.every((m) => m.TYPE === 'linux_raid_member' && m.LABEL === `any:${config.label}`);
  if (tags.TYPE === 'ext4' && tags.LABEL === config.label) return mountArray(config, env, array, 'mounted', `RAID0 array ${array} holds ext4 labelled ${config.label}, made by bootstate`);
  if (ours && tags.TYPE === undefined) {
    try {
      const problem = await mountPointProblem(config.mount_point, env, null);
      if (problem) return failed(env, array, `not formatted: ${problem}`);
      await makeFilesystem(env, array, config.label);
    } catch (error) {
      return failed(env, array, `formatting failed: ${stderrOf(error)}`);
    }
    return mountArray(config, env, array, 'formatted', `RAID0 array ${array} is bootstate's (md name any:${config.label}) and has no filesystem yet`);
  }
  const why = `RAID0 array ${array} over the local NVMe disks holds ${tags.TYPE ?? 'no filesystem'}${ours ? '' : ', and its md name is not bootstate\'s'}`;
  env.log.warn({ ...STEP, device: array }, `local NVMe disks left alone: ${why}`);
  return { result: 'left-alone', device: array, why };
}

async function mountArray(config: ResourceDiskConfig, env: ResourceDiskEnv, array: string, result: 'formatted' | 'mounted', why: string): Promise<ResourceDiskOutcome> {
  try {
    const problem = await mountPointProblem(config.mount_point, env, result === 'mounted' ? devNumber(array) : null);
    if (problem) return failed(env, array, `not mounted: ${problem}`);
    await mountIt(config, env, array);
  } catch (error) {
    return failed(env, array, `mounting ${array} at ${config.mount_point} failed: ${stderrOf(error)}`);
  }
  const swap = await swapOn(config, env);
  env.log.info({ ...STEP, device: array, result, swap }, `local NVMe RAID0 array ${array} ${result === 'formatted' ? 'formatted and ' : ''}mounted at ${config.mount_point}: ${why}`);
  return { result, device: array, why, swap };
}
