/**
 * One pass over the temporary disk, as `bootstate resource-disk` runs it on every boot: find it, read it, decide
 * (decide.ts), format it only when that is safe, mount it through its unit and give it the configured swap file.
 * Nothing here fails a provisioning: every problem ends the pass with a warning naming the device and why.
 */
import { existsSync, realpathSync } from 'node:fs';
import { chmod, mkdir, open, readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ResourceDiskConfig } from '../config/defaults.js';
import type { Logger } from '../logging/log.js';
import { writeFileAtomic } from '../system/atomic.js';
import { stderrOf } from '../system/exec.js';
import { AZURE_CHASSIS_ASSET_TAG } from '../azure/platform.js';
import { decide, ntfsCandidate, zerosCandidate, type Decision } from './decide.js';
import { findResourceDisk } from './find.js';
import { blkid, devNumber, ensurePartitionNodes, listNtfsRoot, mountedAt, probeDisk, proveKernelSees, readTable, readZeros, type ProbeEnv, type SfdiskTable } from './probe.js';
import { mountUnit, mountUnitName, SWAP_FILE_NAME, swapUnit, swapUnitName, UNIT_MARK } from './units.js';
import { zeroSamples } from './zeros.js';

export interface ResourceDiskEnv extends ProbeEnv {
  log: Logger;
  /** Where device nodes are (`/dev`). */
  devDir: string;
  /** Where the units are written (`/etc/systemd/system`). */
  unitDir: string;
  /** systemd runs this system (`/run/systemd/system` exists): units are started through it, else mounted directly. */
  systemd: boolean;
  /** `[platform] check`: act only on a machine with Azure's chassis asset tag. */
  requireAzure: boolean;
}

export interface ResourceDiskOutcome {
  result: 'no-disk' | 'left-alone' | 'formatted' | 'mounted' | 'failed';
  device?: string;
  why: string;
  swap?: 'off' | 'made' | 'kept' | 'not-started' | 'failed';
}

const TIMEOUT = 10 * 60 * 1000;

/** Runs one pass; never throws: a failure is the outcome `failed`, logged as a warning. */
export async function prepareResourceDisk(config: ResourceDiskConfig, env: ResourceDiskEnv): Promise<ResourceDiskOutcome> {
  if (!(await onAzure(env))) {
    env.log.info({ step: 'resource-disk' }, 'not an Azure VM (no Azure chassis asset tag): no disk is looked at');
    return { result: 'no-disk', why: 'not an Azure VM' };
  }
  const found = findResourceDisk(env.sysRoot);
  if (!found.disk) {
    env.log.info({ step: 'resource-disk' }, 'no temporary disk on this VM (no Azure resource disk, no local NVMe disk)');
    return { result: 'no-disk', why: 'no temporary disk' };
  }
  const disk = found.disk;
  const device = path.join(env.devDir, disk.name);
  env.log.info({ step: 'resource-disk', device, kind: disk.kind }, `temporary disk ${device}: ${disk.why}`);
  let decision: Decision;
  try {
    decision = await inspect(config, env, device);
  } catch (error) {
    return failed(env, device, `could not be read: ${stderrOf(error)}`);
  }
  if (decision.action === 'leave') {
    env.log.warn({ step: 'resource-disk', device }, `temporary disk ${device} left alone: ${decision.why}`);
    return { result: 'left-alone', device, why: decision.why };
  }
  return actOn(config, env, device, decision);
}

/** Carries out a decision other than `leave` for `device` at `config.mount_point`: the part a disk goes through once it may be used. */
export async function actOn(config: ResourceDiskConfig, env: ResourceDiskEnv, device: string, decision: Exclude<Decision, { action: 'leave' }>): Promise<ResourceDiskOutcome> {
  try {
    const problem = await mountPointProblem(config.mount_point, env, decision.action === 'mount' ? devNumber(decision.partition) : null);
    if (problem) return failed(env, device, `not ${decision.action === 'format' ? 'formatted' : 'mounted'}: ${problem}`);
  } catch (error) {
    return failed(env, device, `mount point ${config.mount_point}: ${stderrOf(error)}`);
  }
  env.log.info({ step: 'resource-disk', device }, `temporary disk ${device}: ${decision.why}`);
  let partition: string;
  try {
    partition = decision.action === 'format' ? await partition1(env, device, config.label) : decision.partition;
    if (decision.action === 'make-filesystem') await provePartition(env, device);
    if (decision.action !== 'mount') await makeFilesystem(env, partition, config.label);
  } catch (error) {
    return failed(env, device, `formatting failed: ${reasonOf(error)}`);
  }
  try {
    await mountIt(config, env, partition);
  } catch (error) {
    return failed(env, device, `mounting ${partition} at ${config.mount_point} failed: ${stderrOf(error)}`);
  }
  const swap = await swapOn(config, env);
  const result = decision.action === 'mount' ? 'mounted' : 'formatted';
  env.log.info({ step: 'resource-disk', device, result, swap }, `temporary disk ${device} ${result === 'formatted' ? 'formatted and ' : ''}mounted at ${config.mount_point}`);
  return { result, device, why: decision.why, swap };
}

/** A command's stderr, or the sentence of a check that failed. */
function reasonOf(error: unknown): string {
  return error instanceof Error && error.constructor === Error ? error.message : stderrOf(error);
}

function failed(env: ResourceDiskEnv, device: string, why: string): ResourceDiskOutcome {
  env.log.warn({ step: 'resource-disk', device }, `temporary disk ${device}: ${why}`);
  return { result: 'failed', device, why };
}

async function inspect(config: ResourceDiskConfig, env: ResourceDiskEnv, device: string): Promise<Decision> {
  if (!existsSync(device)) throw new Error(`${device} does not exist`);
  const probe = await probeDisk(env, device);
  const candidate = ntfsCandidate(probe, config.label);
  const listing = candidate ? await listNtfsRoot(env.run, candidate.node) : null;
  const blank = zerosCandidate(probe, config.label);
  const zeros = blank ? await readZeros(env.run, blank) : null;
  return decide(probe, { label: config.label, mountPoint: config.mount_point }, listing, zeros);
}

/**
 * A new GPT with one Linux partition over the whole disk, named `label`; resolves to its node once the kernel is
 * proved to use it. Zeros go over the new partition's sampled ranges (through the disk) before that proof, so a pass
 * cut short or stopped from here on leaves bootstate's partition reading as zeros, which the next pass formats.
 */
async function partition1(env: ResourceDiskEnv, device: string, label: string): Promise<string> {
  await env.run(['sfdisk', '--quiet', '--wipe', 'always', '--wipe-partitions', 'always', device], {
    stdin: Buffer.from(`label: gpt\nname="${label}", type=linux\n`),
    timeoutMs: TIMEOUT,
  });
  const table = await readTable(env.run, device);
  const made = table?.partitions?.[0];
  if (table?.label !== 'gpt' || table.partitions?.length !== 1 || !made) throw new Error(`${device}: the new partition table did not read back`);
  const sector = table.sectorsize ?? 512;
  await zeroSamples(device, made.start * sector, made.size * sector);
  await provePartition(env, device, table);
  return made.node;
}

/** Makes the kernel's partitions follow the table where it can, then proves they do (probe.ts): else mkfs would miss. */
async function provePartition(env: ResourceDiskEnv, device: string, read?: SfdiskTable): Promise<void> {
  const table = read ?? (await readTable(env.run, device));
  if (!table) throw new Error(`${device}: the partition table did not read back`);
  const nodes = (table.partitions ?? []).map((p) => p.node);
  // A re-read that failed (EBUSY, or a loop device without partition scanning) leaves the old partitions: partx
  // updates them, or else drops and adds them again, which the kernel refuses for any held open.
  for (const commands of [[['--update']], [['--delete'], ['--add']]]) {
    for (const args of commands) await env.run(['partx', ...args, device], { allowFailure: true, timeoutMs: TIMEOUT });
    try {
      await ensurePartitionNodes(env, device, nodes);
      proveKernelSees(env, device, table);
      return;
    } catch (error) {
      if (commands.length > 1) throw error;
    }
  }
}

async function makeFilesystem(env: ResourceDiskEnv, partition: string, label: string): Promise<void> {
  await env.run(['mkfs.ext4', '-F', '-q', '-L', label, partition], { timeoutMs: TIMEOUT });
}

/** Writes `file` when its content differs; true when it changed. */
async function writeUnit(file: string, content: string): Promise<boolean> {
  const old = await readFile(file, 'utf8').catch(() => null);
  if (old === content) return false;
  await writeFileAtomic(file, content, { mode: 0o644 });
  return true;
}

/**
 * Why the disk cannot be mounted at the mount point, found before anything is written: another filesystem is mounted
 * there, or it holds files (say `/var` set by mistake) the temporary disk would hide. Null when it can.
 */
async function mountPointProblem(where: string, env: ResourceDiskEnv, ours: string | null): Promise<string | null> {
  const mounted = mountedAt(env, where);
  if (mounted.length > 0) return mounted.at(-1) === ours ? null : `another filesystem is mounted at ${where}`;
  await mkdir(where, { recursive: true, mode: 0o755 });
  const present = await readdir(where);
  return present.length > 0 ? `${where} is not empty (${present.length} ${present.length === 1 ? 'entry' : 'entries'}): mounting over it would hide them` : null;
}

async function mountIt(config: ResourceDiskConfig, env: ResourceDiskEnv, partition: string): Promise<void> {
  const where = config.mount_point;
  const ours = devNumber(partition);
  const before = mountedAt(env, where);
  await mkdir(env.unitDir, { recursive: true });
  const unit = mountUnitName(config.mount_point);
  const changed = await writeUnit(path.join(env.unitDir, unit), mountUnit(stableName(env, partition), config.mount_point, config.mount_options));
  if (env.systemd) {
    if (changed) await env.run(['systemctl', 'daemon-reload'], { timeoutMs: TIMEOUT });
    await env.run(['systemctl', 'start', unit], { timeoutMs: TIMEOUT });
  } else if (before.length === 0) {
    await env.run(['mount', '-t', 'ext4', '-o', config.mount_options, partition, where], { timeoutMs: TIMEOUT });
  }
  if (mountedAt(env, where).at(-1) !== ours) throw new Error(`${partition} is not what is mounted at ${where} afterwards`);
}

/** The udev rule's name for the partition when it leads to it (packaging/udev), else the kernel's. */
function stableName(env: ResourceDiskEnv, partition: string): string {
  const link = path.join(env.devDir, 'disk/azure/resource-part1');
  try {
    return realpathSync(link) === realpathSync(partition) ? link : partition;
  } catch {
    return partition;
  }
}

/** Makes (or keeps) the swap file and starts its unit; with `swap_size_mb = 0` removes what an earlier pass made. */
async function swapOn(config: ResourceDiskConfig, env: ResourceDiskEnv): Promise<ResourceDiskOutcome['swap']> {
  const file = path.join(config.mount_point, SWAP_FILE_NAME);
  const unit = swapUnitName(file);
  const unitFile = path.join(env.unitDir, unit);
  const active = (await readFile(env.swaps, 'utf8').catch(() => '')).split('\n').slice(1).some((line) => line.split(/\s+/)[0] === file);
  try {
    if (config.swap_size_mb === 0) {
      if ((await readFile(unitFile, 'utf8').catch(() => '')).startsWith(UNIT_MARK)) {
        if (env.systemd) await env.run(['systemctl', 'stop', unit], { timeoutMs: TIMEOUT, allowFailure: true });
        await rm(unitFile, { force: true });
        if (env.systemd) await env.run(['systemctl', 'daemon-reload'], { timeoutMs: TIMEOUT });
        if (!active || env.systemd) await rm(file, { force: true });
      }
      return 'off';
    }
    const bytes = config.swap_size_mb * 1024 * 1024;
    const kept = await usableSwapFile(env, file, bytes);
    if (!kept) {
      if (active && env.systemd) await env.run(['systemctl', 'stop', unit], { timeoutMs: TIMEOUT });
      await makeSwapFile(env, file, bytes);
    }
    const changed = await writeUnit(unitFile, swapUnit(file, mountUnitName(config.mount_point)));
    if (!env.systemd) {
      env.log.info({ step: 'resource-disk' }, `swap file ${file} ready; not enabled: systemd does not run this system`);
      return 'not-started';
    }
    if (changed) await env.run(['systemctl', 'daemon-reload'], { timeoutMs: TIMEOUT });
    await env.run(['systemctl', 'start', unit], { timeoutMs: TIMEOUT });
    return kept ? 'kept' : 'made';
  } catch (error) {
    env.log.warn({ step: 'resource-disk', file }, `swap file ${file}: ${stderrOf(error)}`);
    return 'failed';
  }
}

/** The swap file is there, of the size asked, readable by root alone and with a swap signature. */
async function usableSwapFile(env: ResourceDiskEnv, file: string, bytes: number): Promise<boolean> {
  const info = await stat(file).catch(() => null);
  if (!info?.isFile() || info.size !== bytes || (info.mode & 0o077) !== 0) return false;
  return (await blkid(env.run, file)).TYPE === 'swap';
}

async function makeSwapFile(env: ResourceDiskEnv, file: string, bytes: number): Promise<void> {
  await rm(file, { force: true });
  const handle = await open(file, 'wx', 0o600);
  await handle.close();
  await chmod(file, 0o600);
  // fallocate leaves no holes on ext4, which swapon requires; writing zeros is the fallback where it is refused.
  const allocated = await env.run(['fallocate', '--length', String(bytes), file], { timeoutMs: TIMEOUT, allowFailure: true });
  if (allocated.exitCode !== 0) await writeZeros(file, bytes);
  await env.run(['mkswap', file], { timeoutMs: TIMEOUT });
}

async function writeZeros(file: string, bytes: number): Promise<void> {
  const handle = await open(file, 'w', 0o600);
  try {
    const chunk = Buffer.alloc(1024 * 1024);
    for (let done = 0; done < bytes; done += chunk.length) await handle.write(chunk, 0, Math.min(chunk.length, bytes - done));
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Off Azure the same VMBus ids name a Hyper-V VM's own disks (the second IDE disk of every Gen1 VM): never touch them. */
export async function onAzure(env: Pick<ResourceDiskEnv, 'sysRoot' | 'requireAzure'>): Promise<boolean> {
  const tag = await readFile(path.join(env.sysRoot, 'class/dmi/id/chassis_asset_tag'), 'utf8').catch(() => '');
  return !env.requireAzure || tag.trim() === AZURE_CHASSIS_ASSET_TAG;
}

// The steps local-nvme disks go through too (aggregate.ts), one disk at a time.
export { failed, inspect, makeFilesystem, mountIt, mountPointProblem, partition1, swapOn };
