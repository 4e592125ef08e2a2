/**
 * What one `bootstate monitor --once` cycle leaves for the next (machines/monitor-types.ts `MonitorState`), in a
 * small JSON file under /run: written whole to a temporary file and renamed over the old one, so a cycle killed
 * mid-write leaves the previous state, and stamped with the boot it belongs to, so a reboot starts afresh (the
 * streaks are readings of a clock that restarts with the kernel, and /run is emptied anyway).
 *
 * Only a regular file with one name is read: a FIFO is never waited on, a symlink never followed. The rename
 * replaces such a name (nothing is lost: a FIFO or a link holds no data of its own) and an empty directory is
 * removed first; a directory with entries is left alone, and then no state is kept (docs/monitor.md).
 */
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, readFileSync, renameSync, rmdirSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { MonitorState } from '../../machines/monitor-types.js';
import { openRegularSync } from '../system/open-regular.js';

const FORMAT = 1;
const BOOT_ID = '/proc/sys/kernel/random/boot_id';

/**
 * Milliseconds of CLOCK_MONOTONIC, which every process of one boot shares: a streak one cycle began is compared
 * with a measurement the next one made.
 */
export const bootClockMs = (): number => Number(process.hrtime.bigint() / 1_000_000n);

export function currentBootId(file = BOOT_ID): string {
  return readFileSync(file, 'utf8').trim();
}

export interface LoadedState {
  state: MonitorState | null;
  /** Why a file that was there was not used (unreadable, another format, another boot). */
  discarded?: string;
  /** Whether the reason is worth a warning: a corrupt file is, a reboot is not. */
  warn?: boolean;
}

const isStreak = (value: unknown): value is number | null => value === null || (typeof value === 'number' && Number.isFinite(value));

/** Reads the state `file` holds for boot `bootId`; a missing file is a first cycle, anything unusable a clean start. */
export function loadMonitorState(file: string, bootId: string): LoadedState {
  let text: string;
  try {
    text = readRegular(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { state: null };
    return { state: null, discarded: `unreadable: ${(error as Error).message}`, warn: true };
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return { state: null, discarded: 'not JSON', warn: true };
  }
  const record = (typeof doc === 'object' && doc !== null ? doc : {}) as Record<string, unknown>;
  const state = (typeof record.state === 'object' && record.state !== null ? record.state : {}) as Record<string, unknown>;
  if (record.format !== FORMAT || !isStreak(state.heartbeatStreak) || !isStreak(state.imdsStreak) || typeof state.versionsAvailable !== 'boolean') {
    return { state: null, discarded: 'not a monitor state this version writes', warn: true };
  }
  if (record.bootId !== bootId) return { state: null, discarded: 'written before the last reboot' };
  return { state: { heartbeatStreak: state.heartbeatStreak, imdsStreak: state.imdsStreak, versionsAvailable: state.versionsAvailable } };
}

/** A state is a few dozen bytes: anything much larger is not one, and is not read into memory. */
const MAX_BYTES = 64 * 1024;

function readRegular(file: string): string {
  const fd = openRegularSync(file, { flags: constants.O_RDONLY });
  try {
    if (fstatSync(fd).size > MAX_BYTES) throw new Error(`${file} is larger than ${MAX_BYTES} bytes`);
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}

/**
 * Replaces `file` with `state` atomically (a temporary file beside it, then rename). Returns what had to be cleared
 * out of the way first (an empty directory), for a warning; throws, leaving it alone, on a directory with entries.
 */
export function saveMonitorState(file: string, bootId: string, state: MonitorState): string | null {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o755 });
  const cleared = clearDirectoryAt(file);
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    writeTemporary(temporary, `${JSON.stringify({ format: FORMAT, bootId, state })}\n`);
    renameSync(temporary, file);
  } catch (error) {
    removeQuietly(temporary);
    throw error;
  }
  return cleared;
}

/** rename(2) cannot replace a directory: an empty one (nothing to lose) is removed; one with entries is not ours to empty. */
function clearDirectoryAt(file: string): string | null {
  let isDirectory: boolean;
  try {
    isDirectory = lstatSync(file).isDirectory();
  } catch {
    return null;
  }
  if (!isDirectory) return null;
  try {
    rmdirSync(file);
  } catch (error) {
    const why = (error as NodeJS.ErrnoException).code === 'ENOTEMPTY' ? 'a directory with entries' : `a directory (${(error as Error).message})`;
    throw new Error(`${file} is ${why}; left alone, so no state is kept across cycles`, { cause: error });
  }
  return `removed the empty directory at ${file}`;
}

/** Creates `temporary` as a new regular file (O_EXCL: nothing planted under the name is followed or waited on). */
function writeTemporary(temporary: string, text: string): void {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL;
  let fd: number;
  try {
    fd = openRegularSync(temporary, { flags, mode: 0o644 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    // Left by an earlier cycle that had this pid and was killed: the name is ours.
    unlinkSync(temporary);
    fd = openRegularSync(temporary, { flags, mode: 0o644 });
  }
  try {
    writeFileSync(fd, text);
  } finally {
    closeSync(fd);
  }
}

function removeQuietly(temporary: string): void {
  try {
    unlinkSync(temporary);
  } catch {
    // not there, or not ours to remove (a directory someone made): nothing was written to it
  }
}
