/**
 * npm test's pretest step (scripts/test-prerequisites.mjs): which packages it finds missing, and what it tells a
 * user who is not root. Installing as root is proven on a fresh Debian root by scripts/fresh-machine-check.sh.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error a plain .mjs script without type declarations
import { missingPackages, readList } from '../../scripts/test-prerequisites.mjs';

describe('the pretest step', () => {
  it('reads command/package pairs, skipping comments and blank lines', () => {
    expect(readList('# tools\nsshd openssh-server\n\nflock util-linux\nblkid util-linux\npython3\n')).toEqual([
      ['sshd', 'openssh-server'], ['flock', 'util-linux'], ['blkid', 'util-linux'], ['python3', 'python3'],
    ]);
  });

  it('names each missing package once, in list order', () => {
    const list = readList(readFileSync('scripts/test-packages.txt', 'utf8')) as Array<[string, string]>;
    expect(list.length).toBeGreaterThan(5);
    expect(missingPackages(list, () => true)).toEqual([]);
    const absent = new Set(['flock', 'blkid', 'sshd']);
    expect(missingPackages(list, (command: string) => !absent.has(command))).toEqual(['openssh-server', 'util-linux']);
  });

  it('as a user who is not root, stops with exit 1 and the one command to run', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bootstate-pretest-'));
    chmodSync(dir, 0o755);
    copyFileSync('scripts/test-prerequisites.mjs', join(dir, 'test-prerequisites.mjs'));
    writeFileSync(join(dir, 'test-packages.txt'), 'sh dash\nbootstate-no-such-tool bootstate-no-such-package\n');
    const run = spawnSync(process.execPath, [join(dir, 'test-prerequisites.mjs')], { encoding: 'utf8', uid: 65534, gid: 65534 });
    expect(run.status).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('not installed: bootstate-no-such-package\n');
    expect(run.stderr).toContain("sudo sh -c 'apt-get update && apt-get install -y --no-install-recommends bootstate-no-such-package'");
  });

  it('says nothing and exits 0 when everything is installed', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bootstate-pretest-'));
    chmodSync(dir, 0o755);
    copyFileSync('scripts/test-prerequisites.mjs', join(dir, 'test-prerequisites.mjs'));
    writeFileSync(join(dir, 'test-packages.txt'), 'sh dash\n');
    const run = spawnSync(process.execPath, [join(dir, 'test-prerequisites.mjs')], { encoding: 'utf8', uid: 65534, gid: 65534 });
    expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({ status: 0, stdout: '', stderr: '' });
  });
});
