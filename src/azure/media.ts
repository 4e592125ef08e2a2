/**
 * Finds and reads the Azure provisioning media (docs/protocol.md#finding-the-media): UDF/ISO 9660 devices (volume-probe.ts), /dev/sr0, and
 * copies already mounted somewhere; each is mounted read-only (nosuid, nodev, noexec) into a private 0700
 * directory under /run/bootstate, `ovf-env.xml` is read with a size cap, and the mount is always undone.
 * No media is normal: the result is null.
 */
import { constants } from 'node:fs';
import { mkdir, mkdtemp, open, readFile, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { MAX_OVF_BYTES, type MediaMetadata } from '../core/metadata.js';
import { BootstateError } from '../core/errors.js';
import type { SecretStore } from '../core/secrets.js';
import { run as defaultRun, type Runner } from '../system/exec.js';
import { IsoError, readFileFromIso } from './iso9660.js';
import { probeMediaDevices } from './volume-probe.js';
import { exists, under } from '../system/paths.js';

export interface MediaOptions {
  secrets: SecretStore;
  run?: Runner;
  /** Where the system's `/` is (for /dev/sr0, /proc/self/mounts and the mount base); default `/`. */
  root?: string;
  /** Parent of the private mount directories; default `/run/bootstate`. */
  mountBase?: string;
  signal?: AbortSignal;
  /** Lists the UDF and ISO 9660 devices; default probeMediaDevices (null: ask blkid). */
  listDevices?: (root: string) => Promise<{ udf: string[]; iso9660: string[] } | null>;
  /** Receives one line per candidate that was skipped, for the log. */
  onNote?: (message: string) => void;
}

export interface MediaCandidate {
  device: string;
  /** Set when the device is already mounted: read it there instead of mounting again. */
  mountedAt?: string;
}

/**
 * Lists candidate devices: UDF, then ISO 9660 (read from their volume descriptors, or from blkid where sysfs is
 * missing), /dev/sr0, then media already mounted (deduplicated).
 */
export async function findMediaCandidates(options: Omit<MediaOptions, 'secrets'> = {}): Promise<MediaCandidate[]> {
  const run = options.run ?? defaultRun;
  const root = options.root ?? '/';
  const mounted = await mountedMedia(under(root, '/proc/self/mounts'));
  const devices: string[] = [];
  const probed = await (options.listDevices ?? probeMediaDevices)(root);
  if (probed) devices.push(...probed.udf, ...probed.iso9660);
  // blkid only where /sys/class/block cannot be read.
  for (const type of probed ? [] : ['udf', 'iso9660']) {
    try {
      const result = await run(['blkid', '-c', '/dev/null', '-t', `TYPE=${type}`, '-o', 'device'], { signal: options.signal, timeoutMs: 30_000, allowFailure: true });
      devices.push(...result.stdout.split('\n').map((l) => l.trim()).filter(Boolean));
    } catch (error) {
      options.onNote?.(`blkid: ${(error as Error).message}`);
    }
  }
  if (await exists(under(root, '/dev/sr0'))) devices.push('/dev/sr0');
  devices.push(...mounted.keys());
  const seen = new Set<string>();
  const out: MediaCandidate[] = [];
  for (const device of devices) {
    if (seen.has(device)) continue;
    seen.add(device);
    const mountedAt = mounted.get(device);
    out.push(mountedAt ? { device, mountedAt } : { device });
  }
  return out;
}

/** Reads ovf-env.xml from the first candidate that has one; null when there is no provisioning media. */
export async function readProvisioningMedia(options: MediaOptions): Promise<MediaMetadata | null> {
  const candidates = await findMediaCandidates(options);
  let invalid: BootstateError | null = null;
  for (const candidate of candidates) {
    let xml: string | null;
    try {
      xml = candidate.mountedAt
        ? await readOvfFile(under(options.root ?? '/', candidate.mountedAt))
        : await withMountedMedia(candidate.device, options, readOvfFile).catch((error) => readOvfFromIso(candidate.device, error));
    } catch (error) {
      if (error instanceof BootstateError && error.code === 'OVF_INVALID') throw error;
      options.onNote?.(`${candidate.device}: ${(error as Error).message}`);
      continue;
    }
    if (xml === null) {
      options.onNote?.(`${candidate.device}: no ovf-env.xml`);
      continue;
    }
    // The XML parser loads only when there is a document to parse, not with the rest of the program at start-up.
    const { parseOvfEnv } = await import('./ovf.js');
    // The chart stops waiting for the media at its deadline or when the run is terminated; a read that
    // finishes after that must not put a password into the store.
    options.signal?.throwIfAborted();
    try {
      return parseOvfEnv(xml, { secrets: options.secrets, device: candidate.device });
    } catch (error) {
      if (!(error instanceof BootstateError) || error.code !== 'OVF_INVALID') throw error;
      invalid = error;
      options.onNote?.(`${candidate.device}: ${error.message}`);
    }
  }
  if (invalid) throw invalid;
  return null;
}

/** Mounts `device` read-only into a fresh private directory, runs `use` on it, and always unmounts. */
export async function withMountedMedia<T>(device: string, options: Omit<MediaOptions, 'secrets'>, use: (dir: string) => Promise<T>): Promise<T> {
  const run = options.run ?? defaultRun;
  const base = under(options.root ?? '/', options.mountBase ?? '/run/bootstate');
  await mkdir(base, { recursive: true, mode: 0o700 });
  const dir = await mkdtemp(path.join(base, 'media-'));
  try {
    try {
      await run(['mount', '-o', 'ro,nosuid,nodev,noexec', '-t', 'udf,iso9660', device, dir], { signal: options.signal, timeoutMs: 60_000 });
    } catch (error) {
      throw new BootstateError('MEDIA_FAILED', `cannot mount ${device}: ${(error as Error).message}`, {
        data: [['device', device], ['error', (error as Error).message]],
        cause: error,
      });
    }
    try {
      return await use(dir);
    } finally {
      // Not tied to the caller's signal: a mount must never be left behind, even after an abort.
      await run(['umount', dir], { timeoutMs: 60_000 }).catch(async () => {
        await run(['umount', '-l', dir], { timeoutMs: 60_000, allowFailure: true }).catch(() => undefined);
      });
    }
  } finally {
    await rmdir(dir).catch(() => undefined);
  }
}

/**
 * Hardened images ship without the iso9660/udf kernel modules and cannot mount the media at all, so when the
 * mount fails the device is read as ISO 9660 in userspace instead. UDF media are not covered by this fallback.
 */
async function readOvfFromIso(device: string, mountError: unknown): Promise<string | null> {
  if (!(mountError instanceof BootstateError) || mountError.code !== 'MEDIA_FAILED') throw mountError;
  try {
    return (await readFileFromIso(device, 'ovf-env.xml', MAX_OVF_BYTES))?.toString('utf8') ?? null;
  } catch (error) {
    if (error instanceof IsoError && error.code === 'TOO_LARGE') {
      throw new BootstateError('OVF_INVALID', `ovf-env.xml is larger than ${MAX_OVF_BYTES} bytes`, { data: [['problem', 'too large']] });
    }
    throw new Error(`${mountError.message}; reading it as ISO 9660 failed too: ${(error as Error).message}`, { cause: error });
  }
}

/** Reads `<dir>/ovf-env.xml` without following a symlink, capped at MAX_OVF_BYTES; null when absent. */
async function readOvfFile(dir: string): Promise<string | null> {
  let handle;
  try {
    handle = await open(path.join(dir, 'ovf-env.xml'), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new Error('ovf-env.xml is not a regular file');
    const buffer = Buffer.alloc(MAX_OVF_BYTES + 1);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    if (bytesRead > MAX_OVF_BYTES) {
      throw new BootstateError('OVF_INVALID', `ovf-env.xml is larger than ${MAX_OVF_BYTES} bytes`, { data: [['problem', 'too large']] });
    }
    return buffer.subarray(0, bytesRead).toString('utf8');
  } finally {
    await handle.close();
  }
}

/** Devices with an iso9660 or udf filesystem mounted somewhere, from a mounts(5) file. */
async function mountedMedia(mountsFile: string): Promise<Map<string, string>> {
  const text = await readFile(mountsFile, 'utf8').catch(() => '');
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    const [device, mountPoint, type] = line.split(' ');
    if (device && mountPoint && (type === 'iso9660' || type === 'udf') && !out.has(device)) {
      out.set(device, mountPoint.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8))));
    }
  }
  return out;
}
