/**
 * The RPM (scripts/build/rpm.mjs): the same files as the .deb, both from packaging/installed-files.mjs, with the
 * same modes and the same executable; Requires from rpm's ELF dependency generator; rpmlint clean but for the
 * findings packaging/rpm/bootstate.rpmlintrc argues; and installed with `rpm --root` into a prepared root (a shell,
 * mkdir/ln/rm and the executable's shared libraries copied from this machine, no network), where rpm runs the
 * scriptlets chrooted: the first-boot unit enabled, the image check run, and an erase that disables the units and
 * keeps the data (RPM has no purge).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filesFor, INSTALLED_FILES } from '../../packaging/installed-files.mjs';

const root = resolve(fileURLToPath(import.meta.url), '../../..');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
const rpmFile = join(root, `dist/bootstate-${version}-1.x86_64.rpm`);
const isRoot = process.getuid?.() === 0;
const WANTS = 'etc/systemd/system/multi-user.target.wants';

let scratch: string;

beforeAll(() => {
  if (!existsSync(join(root, 'dist/bootstate'))) execFileSync(process.execPath, [join(root, 'scripts/build/binary.mjs')], { cwd: root, stdio: 'inherit' });
  execFileSync(process.execPath, [join(root, 'scripts/build/rpm.mjs')], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  scratch = mkdtempSync(join(tmpdir(), 'bootstate-rpm-'));
}, 900_000);

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

const query = (...args: string[]) => execFileSync('rpm', ['-qp', ...args, rpmFile], { encoding: 'utf8' }).trim();

/** `rpm -qlvp`'s regular files as path → mode (octal, permission bits). */
function listedFiles(): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of query('--qf', '[%{FILEMODES:octal} %{FILENAMES}\\n]').split('\n')) {
    const [mode, path] = line.split(' ');
    if (mode!.startsWith('100')) out.set(path!.slice(1), Number.parseInt(mode!, 8) & 0o7777);
  }
  return out;
}

describe('the RPM', () => {
  it('holds exactly the files of packaging/installed-files.mjs for rpm, with their modes, owned by root', () => {
    expect(Object.fromEntries(listedFiles())).toEqual(Object.fromEntries(filesFor('rpm').map((f) => [f.path, f.mode])));
    expect(new Set(query('--qf', '[%{FILEUSERNAME}:%{FILEGROUPNAME}\\n]').split('\n'))).toEqual(new Set(['root:root']));
  });

  it('shares every file with the .deb but the formats\' own (Debian changelog and lintian overrides, the RPM license directory)', () => {
    const both = INSTALLED_FILES.filter((f) => f.only === undefined).map((f) => f.path);
    expect(filesFor('rpm').map((f) => f.path).filter((p) => !both.includes(p))).toEqual(['usr/share/licenses/bootstate/copyright']);
    expect(filesFor('deb').map((f) => f.path).filter((p) => !both.includes(p))).toEqual([
      'usr/share/doc/bootstate/copyright', 'usr/share/doc/bootstate/changelog.gz', 'usr/share/lintian/overrides/bootstate',
    ]);
  });

  it('marks the configuration %config(noreplace), as the .deb makes it a conffile', () => {
    expect(query('--configfiles')).toBe('/etc/bootstate/bootstate.toml');
    expect(query('--qf', '[%{FILENAMES} %{FILEFLAGS:fflags}\\n]')).toMatch(/^\/etc\/bootstate\/bootstate\.toml cn$/m);
  });

  it('requires the C and C++ libraries by ELF symbol version, useradd and mount by path, and is for x86_64', () => {
    const requires = query('--requires').split('\n');
    expect(requires).toEqual(expect.arrayContaining(['/usr/sbin/useradd', '/usr/bin/mount', 'libc.so.6()(64bit)', 'libstdc++.so.6()(64bit)']));
    expect(query('--qf', '%{ARCH} %{VERSION}-%{RELEASE}')).toBe(`x86_64 ${version}-1`);
  });

  it('passes rpmlint with only the findings packaging/rpm/bootstate.rpmlintrc argues', () => {
    const result = spawnSync('rpmlint', ['-r', join(root, 'packaging/rpm/bootstate.rpmlintrc'), rpmFile], { encoding: 'utf8' });
    expect(result.stdout).toMatch(/0 errors, 0 warnings/);
    expect(result.status).toBe(0);
  }, 300_000);
});

/** Copies an executable and the shared libraries ldd lists for it into `target`, at the same paths. */
function copyWithLibraries(target: string, executable: string): void {
  const libs = execFileSync('ldd', [executable], { encoding: 'utf8' }).match(/\/\S+/g) ?? [];
  for (const file of [executable, ...libs]) {
    const to = join(target, file);
    if (existsSync(to)) continue;
    mkdirSync(dirname(to), { recursive: true });
    copyFileSync(file, to);
    execFileSync('chmod', ['--reference', file, to]);
  }
}

describe.skipIf(!isRoot)('installing with rpm --root into a prepared root', () => {
  it('runs the scriptlets there: the first-boot unit enabled, doctor run; an erase disables it and keeps the data', () => {
    const target = join(scratch, 'root');
    for (const dir of ['usr/bin', 'etc', 'var/lib', 'tmp']) mkdirSync(join(target, dir), { recursive: true });
    for (const tool of ['/bin/sh', '/usr/bin/mkdir', '/usr/bin/ln', '/usr/bin/rm']) copyWithLibraries(target, tool);
    copyWithLibraries(target, join(root, 'dist/bootstate'));
    execFileSync('rpm', ['--root', target, '--initdb']);

    // --nodeps: the prepared root has no RPM database entry for the C library or useradd, only their files.
    const install = spawnSync('rpm', ['--root', target, '-i', '--nodeps', rpmFile], { encoding: 'utf8' });
    expect(install.status, install.stderr).toBe(0);
    // %post ran the executable in the root: its image check found no sshd_config there.
    expect(`${install.stdout}${install.stderr}`).toMatch(/sshd-config-missing/);
    for (const file of filesFor('rpm')) {
      const info = statSync(join(target, file.path));
      expect([file.path, info.mode & 0o7777, info.uid]).toEqual([file.path, file.mode, 0]);
    }
    expect(readlinkSync(join(target, WANTS, 'bootstate.service'))).toBe('/usr/lib/systemd/system/bootstate.service');
    expect(existsSync(join(target, WANTS, 'bootstate-monitor.service'))).toBe(false);
    expect(readlinkSync(join(target, 'etc/systemd/system/timers.target.wants/bootstate-firewall-recheck.timer'))).toBe('/usr/lib/systemd/system/bootstate-firewall-recheck.timer');
    expect(readFileSync(join(target, 'usr/bin/bootstate')).equals(readFileSync(join(root, 'dist/bootstate')))).toBe(true);

    mkdirSync(join(target, 'var/lib/bootstate'), { recursive: true });
    writeFileSync(join(target, 'var/lib/bootstate/00000000-0000-0000-0000-000000000000.provisioned'), '');
    writeFileSync(join(target, 'etc/bootstate/bootstate.toml'), '[ssh]\nreload_sshd = false\n');
    const erase = spawnSync('rpm', ['--root', target, '-e', 'bootstate'], { encoding: 'utf8' });
    expect(erase.status, erase.stderr).toBe(0);
    expect(() => lstatSync(join(target, WANTS, 'bootstate.service'))).toThrow(/ENOENT/);
    expect(() => lstatSync(join(target, 'etc/systemd/system/timers.target.wants/bootstate-firewall-recheck.timer'))).toThrow(/ENOENT/);
    expect(existsSync(join(target, 'usr/lib/systemd/system/bootstate.service'))).toBe(false);
    expect(existsSync(join(target, 'var/lib/bootstate/00000000-0000-0000-0000-000000000000.provisioned'))).toBe(true);
    expect(readFileSync(join(target, 'etc/bootstate/bootstate.toml.rpmsave'), 'utf8')).toBe('[ssh]\nreload_sshd = false\n');
  }, 300_000);
});
