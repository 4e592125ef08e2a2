/**
 * The native addon (src/system/native.c: flock(2), and the sd_notify datagram), shipped beside the built program's scripts (or in the SEA's assets) and
 * loaded once per process. The shared object is written into a fresh directory that mkdtemp creates 0700 for us
 * alone, checked to be ours, dlopen'ed and unlinked at once with its directory, so no path to it outlives the load
 * and no other user can swap it in between. When it cannot load (no build for this architecture, every candidate
 * directory noexec, an old kernel), the callers fall back to flock(1) and systemd-notify(1); `nativeAddonStatus()`
 * says why.
 */
import { closeSync, constants, lstatSync, mkdtempSync, openSync, readFileSync, rmdirSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundled, bundledAsset } from '../core/bundled-asset.js';

export interface NativeAddon {
  /** flock(2) on `fd`; op 1 shared, 2 exclusive, 8 unlock; waits up to `timeoutMs`. Returns 0 or an errno. */
  flock(fd: number, op: number, timeoutMs: number): number;
  /** One datagram holding `message` to the AF_UNIX socket `socketPath` (`@name`: abstract). Returns 0 or an errno. */
  notify(socketPath: string, message: string): number;
}

export const LOCK_SH = 1;
export const LOCK_EX = 2;
export const LOCK_UN = 8;

let loaded: { addon: NativeAddon | null; status: string } | undefined;

/** The addon, loading it on first use; null when it cannot be loaded here (see nativeAddonStatus). */
export function nativeAddon(): NativeAddon | null {
  loaded ??= load();
  return loaded.addon;
}

/** 'loaded', or why the addon is not in use. */
export function nativeAddonStatus(): string {
  loaded ??= load();
  return loaded.status;
}

function addonBytes(): Buffer | null {
  if (bundled) return bundledAsset(`native-${process.arch}.node`);
  // Unbundled (tsx, vitest): what `npm run build` compiled.
  try {
    return readFileSync(fileURLToPath(new URL(`../../build/native/native-${process.arch}.node`, import.meta.url)));
  } catch {
    return null;
  }
}

function load(): { addon: NativeAddon | null; status: string } {
  // For tests of the fallbacks (flock(1), systemd-notify(1)) on a machine where the addon loads.
  if (process.env.BOOTSTATE_NATIVE === 'off') return { addon: null, status: 'disabled by BOOTSTATE_NATIVE=off' };
  const bytes = addonBytes();
  if (!bytes) return { addon: null, status: `no native addon built for ${process.arch}` };
  const failures: string[] = [];
  // /run is a root-only tmpfs on systemd machines and rarely noexec; /tmp and $TMPDIR come next.
  for (const base of [...new Set([process.env.RUNTIME_DIRECTORY, '/run', tmpdir()])]) {
    if (!base) continue;
    try {
      return { addon: loadFrom(base, bytes), status: 'loaded' };
    } catch (error) {
      failures.push(`${base}: ${(error as Error).message}`);
    }
  }
  return { addon: null, status: `native addon not loadable (${failures.join('; ')})` };
}

function loadFrom(base: string, bytes: Buffer): NativeAddon {
  const dir = mkdtempSync(join(base, 'bootstate-native-'));
  const file = join(dir, 'native.node');
  try {
    // A sticky or root-only parent keeps anyone else from replacing the directory after this check.
    const dirStat = lstatSync(dir);
    if (!dirStat.isDirectory() || dirStat.uid !== process.geteuid?.() || (dirStat.mode & 0o777) !== 0o700) {
      throw new Error(`${dir} is not a directory of ours alone`);
    }
    const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o500);
    try {
      let done = 0;
      while (done < bytes.length) done += writeSync(fd, bytes, done);
    } finally {
      closeSync(fd);
    }
    const module = { exports: {} as Partial<NativeAddon> };
    process.dlopen(module, file);
    if (typeof module.exports.flock !== 'function' || typeof module.exports.notify !== 'function') {
      throw new Error('the addon does not export flock and notify');
    }
    return module.exports as NativeAddon;
  } finally {
    try {
      unlinkSync(file);
    } catch {
      // never written
    }
    rmdirSync(dir);
  }
}
