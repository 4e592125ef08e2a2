/**
 * Run inside the mount namespace where test/provision/instance-lock.test.ts mounted a btrfs: for each lock file given, what
 * lockHolder says while nobody holds it, while the instance lock's own code holds it through flock(1) (the child that
 * took it has exited: the fallback where the native addon cannot load) and through the native addon, and once it is
 * let go; with the device stat(2) gives and the one /proc/locks names. Prints one JSON object.
 */
import { closeSync, openSync, readFileSync, statSync } from 'node:fs';
import { lockFd } from '../../src/system/flock.js';
import { nativeAddon } from '../../src/system/native-addon.js';
import { lockHolder } from '../../src/provision/instance-lock.js';

const hex = (n: number) => n.toString(16).padStart(2, '0');

function heldBy(file: string, flockPath?: string): { holder: number | null; procLocks: string } {
  const fd = openSync(file, 'r+');
  try {
    lockFd(fd, 'exclusive', { timeoutMs: 0, subject: file, flockPath });
    const ino = statSync(file).ino;
    const procLocks = readFileSync('/proc/locks', 'utf8').split('\n').find((line) => line.includes(`:${ino} `) && !line.includes('->')) ?? '';
    return { holder: lockHolder(file), procLocks };
  } finally {
    closeSync(fd);
  }
}

const report: Record<string, unknown> = { addon: nativeAddon() !== null, pid: process.pid };
for (const file of process.argv.slice(2)) {
  const { dev } = statSync(file);
  report[file] = {
    statDevice: `${hex(Math.floor(dev / 256) & 0xfff)}:${hex(dev & 0xff)}`,
    free: lockHolder(file),
    flock1: heldBy(file, 'flock'),
    addon: heldBy(file),
    after: lockHolder(file),
  };
}
console.log(JSON.stringify(report));
