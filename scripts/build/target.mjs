// The architecture a build is for: this machine's unless `--arch <x64|arm64>` (Debian's amd64/arm64 also accepted)
// is on the command line. A build for another architecture writes into dist/<debian arch>/ (BOOTSTATE_DIST still
// wins), takes Node's official binary for that architecture from npm (node-linux-<arch>, the version of the Node
// running the build, so the blob matches it), and runs what it built under qemu-user when that is installed.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';

const NODE_ARCH = { x64: 'x64', amd64: 'x64', arm64: 'arm64', aarch64: 'arm64' };
export const DEBIAN_ARCH = { x64: 'amd64', arm64: 'arm64' };
export const RPM_ARCH = { x64: 'x86_64', arm64: 'aarch64' };
const TRIPLE = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };
const QEMU = { x64: 'qemu-x86_64-static', arm64: 'qemu-aarch64-static' };

/** The Node architecture named by `--arch` in `argv`, or this machine's. */
export function targetArch(argv = process.argv) {
  const at = argv.indexOf('--arch');
  const named = at >= 0 ? argv[at + 1] : argv.find((a) => a.startsWith('--arch='))?.slice('--arch='.length);
  if (named === undefined) return process.arch;
  const arch = NODE_ARCH[named];
  if (!arch) throw new Error(`--arch ${named}: one of x64 (amd64) or arm64`);
  return arch;
}

export const isCross = (arch) => arch !== process.arch;

/** The output directory for `arch`: BOOTSTATE_DIST, else dist/ for this machine and dist/<debian arch>/ for another. */
export function distFor(root, arch) {
  if (process.env.BOOTSTATE_DIST) return resolve(process.env.BOOTSTATE_DIST);
  return isCross(arch) ? join(root, 'dist', DEBIAN_ARCH[arch]) : join(root, 'dist');
}

/** The node binary to put the blob into: this one, or node-linux-<arch> at this version, fetched once by npm. */
export function nodeBinaryFor(root, arch) {
  if (!isCross(arch)) return process.execPath;
  const version = process.versions.node;
  const cache = join(root, 'build', `node-linux-${arch}`, version);
  const node = join(cache, 'node');
  if (existsSync(node)) return node;
  mkdirSync(cache, { recursive: true });
  // npm checks the tarball against the registry's integrity hash as it fetches it.
  execFileSync('npm', ['pack', '--silent', `node-linux-${arch}@${version}`, '--pack-destination', cache], { stdio: ['ignore', 'ignore', 'inherit'] });
  const tarball = readdirSync(cache).find((name) => name.endsWith('.tgz'));
  if (!tarball) throw new Error(`npm pack node-linux-${arch}@${version} left no tarball in ${cache}`);
  execFileSync('tar', ['-xzf', join(cache, tarball), '-C', cache, 'package/bin/node']);
  renameSync(join(cache, 'package/bin/node'), node);
  chmodSync(node, 0o755);
  rmSync(join(cache, 'package'), { recursive: true, force: true });
  rmSync(join(cache, tarball), { force: true });
  return node;
}

/** `strip` for `arch`'s ELF files: binutils for the build machine reads only its own. */
export function stripFor(arch) {
  return isCross(arch) ? `${TRIPLE[arch]}-strip` : 'strip';
}

/**
 * The argv prefix that runs an executable of `arch` here: none, or qemu-user with the cross C library (Debian's
 * libc6-<arch>-cross, under /usr/<triple>) as the root it loads shared libraries from; null without qemu.
 */
export function runnerFor(arch) {
  if (!isCross(arch)) return [];
  // By absolute path: the executable runs with a PATH that leads nowhere, to prove it needs nothing from it.
  const qemu = (process.env.PATH ?? '/usr/bin').split(':').map((dir) => join(dir, QEMU[arch])).find((file) => existsSync(file));
  if (!qemu || spawnSync(qemu, ['--version'], { stdio: 'ignore' }).status !== 0) return null;
  return [qemu, '-L', `/usr/${TRIPLE[arch]}`];
}

export const qemuFor = (arch) => QEMU[arch];
