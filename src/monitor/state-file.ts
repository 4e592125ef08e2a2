/**
 * What one `bootstate monitor --once` cycle leaves for the next (machines/monitor-types.ts `MonitorState`), in a
 * small JSON file under /run: written whole to a temporary file and renamed over the old one, so a cycle killed
 * mid-write leaves the previous state, and stamped with the boot it belongs to, so a reboot starts afresh (the
 * streaks are readings of a clock that restarts with the kernel, and /run is emptied anyway).
 */
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { MonitorState } from '../../machines/monitor-types.js';

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
    text = readFileSync(file, 'utf8');
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

/** Replaces `file` with `state` atomically (a temporary file beside it, then rename). */
export function saveMonitorState(file: string, bootId: string, state: MonitorState): void {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o755 });
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(temporary, `${JSON.stringify({ format: FORMAT, bootId, state })}\n`, { mode: 0o644 });
    renameSync(temporary, file);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}
