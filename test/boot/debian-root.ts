/**
 * The Debian 12 root (or another suite's) the boot tests and the boot benchmark boot: built once with mmdebstrap from the mirror this
 * machine's apt sources name, cached under /var/cache/bootstate-test keyed by everything that shapes it (suite,
 * variant, package list, mirror, this recipe's version), and never written to again: every boot stacks its own
 * overlay layers on it. `installDeb` puts the project's .deb into one such layer with `dpkg --root`.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../src/system/exec.js';

export const SUITE = 'bookworm';
/** What a cloud image of Debian has that the agent and the test touch: systemd as PID 1, D-Bus for hostnamectl, sshd, nft. */
export const PACKAGES = ['systemd', 'systemd-sysv', 'dbus', 'openssh-server', 'nftables'];
/** Bump when the recipe below changes in a way the key does not see. */
const RECIPE = 1;
export const CACHE = process.env.BOOTSTATE_TEST_CACHE ?? '/var/cache/bootstate-test';
/** This machine's Debian architecture; another one's roots (arm64 on amd64) are built by mmdebstrap and run under qemu-user. */
export const NATIVE_ARCH = process.arch === 'arm64' ? 'arm64' : 'amd64';

/** The first Debian (not security, not third-party) URI in this machine's apt sources. */
export function debianMirror(): string {
  const files = ['/etc/apt/sources.list', ...listDir('/etc/apt/sources.list.d').map((f) => `/etc/apt/sources.list.d/${f}`)];
  for (const file of files.filter((f) => /\.(list|sources)$/.test(f) && existsSync(f))) {
    const text = readFileSync(file, 'utf8');
    const uris = [
      ...text.matchAll(/^URIs:\s*(\S+)/gm),
      ...text.matchAll(/^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\S+/gm),
    ].map((m) => m[1]!);
    const debian = uris.find((uri) => /\/debian\/?$/.test(uri));
    if (debian) return debian.replace(/\/$/, '');
  }
  throw new Error('no Debian mirror in /etc/apt/sources.list or /etc/apt/sources.list.d: the boot tests build their root from it');
}

/**
 * The cache directory of the root for these packages (PACKAGES, plus `extra` in a root of their own), suite, mirror
 * and architecture (named in the key only when it is not this machine's, so the amd64 roots keep their keys).
 */
export function rootKey(mirror = debianMirror(), extra: string[] = [], suite = SUITE, arch = NATIVE_ARCH): string {
  const packages = extra.length ? [...PACKAGES, ...extra] : PACKAGES;
  const shape = { SUITE: suite, variant: 'minbase', PACKAGES: packages, mirror, RECIPE, ...(arch === NATIVE_ARCH ? {} : { arch }) };
  return createHash('sha256').update(JSON.stringify(shape)).digest('hex').slice(0, 16);
}

/**
 * Returns the cached root, building it first when absent; `extra` packages (e.g. network-manager) make a root of
 * their own, and so does another `suite` (e.g. trixie, Debian 13, from the same mirror). Concurrent callers (test files, the benchmark) wait on one lock; the tree appears under its final name
 * only once complete, so a killed build leaves no half root. Another `arch` (arm64) is built by mmdebstrap
 * --arch, which runs the root's maintainer scripts under qemu-user: it needs arch-test and a qemu binfmt_misc handler
 * (test/boot/emulation.ts), and takes minutes (~4 on 2 cores).
 */
export async function debianRoot(extra: string[] = [], suite = SUITE, arch = NATIVE_ARCH): Promise<string> {
  requireTools(arch === NATIVE_ARCH ? ['mmdebstrap', 'flock', 'tar'] : ['mmdebstrap', 'flock', 'tar', 'arch-test']);
  const mirror = debianMirror();
  const final = path.join(CACHE, `debian-${suite}-${arch === NATIVE_ARCH ? '' : `${arch}-`}${rootKey(mirror, extra, suite, arch)}`);
  if (existsSync(path.join(final, 'usr/lib/systemd/systemd'))) return final;
  await mkdir(CACHE, { recursive: true });
  // flock(1) holds the lock while a node script rechecks, then builds.
  // Another architecture's build (minutes) has a lock of its own: the amd64 roots do not wait for it.
  const lock = path.join(CACHE, arch === NATIVE_ARCH ? '.build.lock' : `.build-${arch}.lock`);
  const building = await mkdtemp(path.join(CACHE, '.building-'));
  try {
    await run(['flock', '-w', '900', lock, process.execPath, '-e', BUILD, building, final, mirror, suite, [...PACKAGES, ...extra].join(','), arch], {
      timeoutMs: 1_200_000,
    });
  } finally {
    await rm(building, { recursive: true, force: true });
  }
  if (!existsSync(path.join(final, 'usr/lib/systemd/system/ssh.service'))) throw new Error(`building ${final} left no root behind`);
  return final;
}

// Runs under the lock: another process may have built the root while this one waited.
const BUILD = `
const { execFileSync } = require('node:child_process');
const { existsSync, mkdirSync, renameSync, writeFileSync, rmSync } = require('node:fs');
const [building, final, mirror, suite, packages, arch] = process.argv.slice(1);
if (existsSync(final)) process.exit(0);
const tar = building + '/root.tar';
execFileSync('mmdebstrap', ['--quiet', '--variant=minbase', '--arch=' + arch, '--include=' + packages, suite, tar, mirror], { stdio: ['ignore', 'inherit', 'inherit'] });
const root = building + '/root';
mkdirSync(root);
execFileSync('tar', ['-C', root, '--numeric-owner', '-xpf', tar]);
rmSync(tar);
// An empty machine-id is a never-booted image: systemd makes one on the first boot, as on a fresh VM.
writeFileSync(root + '/etc/machine-id', '');
mkdirSync(root + '/var/log/journal', { recursive: true });
renameSync(root, final);
`;

/** Fails loudly (never skips) when a tool the boot tests need is missing. */
export function requireTools(tools: string[]): void {
  const missing = tools.filter((tool) => !onPath(tool));
  if (missing.length > 0) {
    throw new Error(
      `the boot tests need ${missing.join(', ')}; install them (scripts/test-packages.txt: systemd-container, mmdebstrap, openssh-client, util-linux)`,
    );
  }
}

function onPath(tool: string): boolean {
  const dirs = [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/sbin'];
  return dirs.some((dir) => dir && existsSync(path.join(dir, tool)));
}

/**
 * Installs `deb` into a new overlay layer over `root` with `dpkg --root` (its maintainer scripts run chrooted, as
 * in an image build) and returns the layer's directory, to stack between a boot's own layer and the root.
 */
export async function installDeb(root: string, deb: string, layer: string): Promise<{ dpkgOutput: string }> {
  const upper = path.join(layer, 'upper');
  const work = path.join(layer, 'work');
  const merged = path.join(layer, 'merged');
  for (const dir of [upper, work, merged]) await mkdir(dir, { recursive: true });
  const result = await run(
    [
      'unshare', '--mount', '--propagation', 'private', 'sh', '-c',
      'mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4" && dpkg --root="$4" --force-unsafe-io -i "$5" 2>&1',
      'install-deb', root, upper, work, merged, deb,
    ],
    { timeoutMs: 120_000, allowFailure: true },
  );
  if (result.exitCode !== 0) throw new Error(`dpkg --root -i ${deb} failed (${result.exitCode}): ${result.stdout}${result.stderr}`);
  await rm(work, { recursive: true, force: true });
  return { dpkgOutput: result.stdout };
}

/**
 * Builds the project's .deb from the current sources as `npm run build:deb` does (single executable, then the
 * package), into `outDir` rather than dist/, which other test files build and read at the same time.
 */
export async function buildDeb(repo: string, outDir: string, args: string[] = []): Promise<string> {
  const result = await run([process.execPath, path.join(repo, 'scripts/build/deb.mjs'), ...args], {
    cwd: repo,
    env: { ...process.env, BOOTSTATE_DIST: outDir },
    timeoutMs: 600_000,
    allowFailure: true,
  });
  if (result.exitCode !== 0) throw new Error(`building the .deb failed (${result.exitCode}): ${result.stderr}`);
  const deb = readdirSync(outDir).find((f) => (args.includes('--node') ? /^bootstate-node_.*_all\.deb$/ : /^bootstate_.*\.deb$/).test(f));
  if (!deb) throw new Error(`scripts/build/deb.mjs left no .deb in ${outDir}`);
  return path.join(outDir, deb);
}

/** Writes `text` to `p`, creating its directory. */
export async function writeInto(p: string, text: string | Buffer, mode = 0o644): Promise<void> {
  await mkdir(path.dirname(p), { recursive: true });
  await writeFile(p, text, { mode });
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}
