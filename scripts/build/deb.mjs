#!/usr/bin/env node
// Builds dist/bootstate_<version>_<arch>.deb from dist/bootstate (built first when missing), the systemd units,
// the commented default configuration rendered from DEFAULT_CONFIG, and the maintainer scripts in packaging/debian.
// `--arch arm64` packages the arm64 executable (built into dist/arm64/, scripts/build/target.mjs); `--build-binary`
// rebuilds the executable first even when one is there (npm run build:deb). `--node` builds bootstate-node instead:
// architecture-independent, the plain program (dist/'s scripts, no executable, no native addon: flock(1) and
// systemd-notify(1) stand in) in /usr/lib/bootstate, run by the distribution's nodejs.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { filesFor, NODE_PROGRAM_DIR } from '../../packaging/installed-files.mjs';
import { SCRIPTS, scriptFile, VIZ_FILE } from './bundle.mjs';
import { contentOf } from './package-files.mjs';
import { DEBIAN_ARCH, distFor, isCross, targetArch } from './target.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const nodeArch = targetArch();
// BOOTSTATE_DIST: another output directory, for a build that must not race other users of dist/ (the boot tests).
const dist = distFor(root, nodeArch);
const debian = join(root, 'packaging/debian');
const units = join(root, 'packaging/systemd');
const stage = join(dist, 'deb-root');
const binary = join(dist, 'bootstate');
/** The plain program's files (scripts/build/program.mjs), as bootstate-node installs them. */
const PROGRAM_FILES = ['bootstate.cjs', ...SCRIPTS.map(scriptFile), VIZ_FILE, 'llhttp.wasm', 'llhttp_simd.wasm'];

const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const arch = DEBIAN_ARCH[nodeArch];
if (!arch) throw new Error(`no Debian architecture for ${nodeArch}`);
const nodePackage = process.argv.includes('--node');
const name = nodePackage ? 'bootstate-node' : 'bootstate';
const debArch = nodePackage ? 'all' : arch;
const output = join(dist, `${name}_${version}_${debArch}.deb`);
const changelogVersion = /^bootstate \(([^)]+)\)/.exec(readFileSync(join(debian, 'changelog'), 'utf8'))?.[1];
if (changelogVersion !== version) throw new Error(`packaging/debian/changelog's latest entry is ${changelogVersion}, package.json says ${version}: add an entry`);

if (nodePackage) {
  if (!existsSync(join(dist, 'bootstate.cjs')) || process.argv.includes('--build-binary')) {
    execFileSync(process.execPath, [join(root, 'scripts/build/program.mjs')], { stdio: 'inherit', env: { ...process.env, BOOTSTATE_DIST: dist } });
  }
} else if (!existsSync(binary) || process.argv.includes('--build-binary')) {
  execFileSync(process.execPath, [join(root, 'scripts/build/binary.mjs'), '--arch', nodeArch], { stdio: 'inherit' });
}
checkUnitsMatchPostinst();

rmSync(stage, { recursive: true, force: true });
const made = {
  executable: () => readFileSync(binary),
  'default-config': renderDefaultConfig,
  'packaged-firewall': renderPackagedFirewall,
  'changelog-gz': () => gzipSync(readFileSync(join(debian, 'changelog')), { level: 9 }).fill(0, 4, 8),
};
for (const file of nodePackage ? nodePackageFiles() : filesFor('deb')) write(file.path, await contentOf(file, root, made), file.mode);
if (nodePackage) {
  for (const script of PROGRAM_FILES) place(join(dist, script), `${NODE_PROGRAM_DIR}/${script}`, script === 'bootstate.cjs' ? 0o755 : 0o644);
  mkdirSync(join(stage, 'usr/bin'), { recursive: true, mode: 0o755 });
  symlinkSync(`../lib/bootstate/bootstate.cjs`, join(stage, 'usr/bin/bootstate'));
}

const payload = filesUnder(stage);
const installedKiB = payload.reduce((sum, file) => sum + Math.ceil(statSync(join(stage, file)).size / 1024), 0);
write('DEBIAN/md5sums', payload.map((file) => `${md5(join(stage, file))}  ${file}\n`).join(''), 0o644);
const control = readFileSync(join(debian, 'control'), 'utf8')
  .replace('@VERSION@', version)
  .replace('@ARCH@', debArch)
  .replace('@INSTALLED_SIZE@', String(installedKiB))
  .replace('@MAINTAINER@', maintainer());
write(
  'DEBIAN/control',
  nodePackage
    ? control
        .replace('Package: bootstate', 'Package: bootstate-node')
        .replace('@SHLIBS_DEPENDS@', 'nodejs (>= 20.18)')
        .replace(/^(Depends: .*)$/m, '$1\nConflicts: bootstate\nReplaces: bootstate')
        .replace(/control flow is one statechart; it ships as a single executable with no\n runtime dependencies\./, "control flow is one statechart. This package holds the program alone,\n run by the distribution's Node.js, not the single executable.")
    : control.replace('@SHLIBS_DEPENDS@', sharedLibraryDepends(join(stage, 'usr/bin/bootstate'))),
  0o644,
);
write('DEBIAN/conffiles', filesFor('deb').filter((file) => file.config).map((file) => `/${file.path}\n`).join(''), 0o644);
for (const script of ['postinst', 'prerm', 'postrm']) place(join(debian, script), `DEBIAN/${script}`, 0o755);

rmSync(output, { force: true });
// xz level 1: the package is a little larger than at the default level 6, for a fraction of the CPU time.
execFileSync('dpkg-deb', ['--root-owner-group', '-Zxz', '-z1', '--build', stage, output], {
  stdio: ['ignore', 'ignore', 'inherit'],
  env: { ...process.env, SOURCE_DATE_EPOCH: process.env.SOURCE_DATE_EPOCH ?? sourceDateEpoch() },
});
process.stdout.write(`${relative(root, output)}\n`);

/**
 * bootstate-node's files: the list's, without the executable and with this package's own doc and lintian paths.
 * Not the native addons: an architecture-independent package holds no machine code.
 */
function nodePackageFiles() {
  return filesFor('deb')
    .filter((file) => file.made !== 'executable' && !file.path.startsWith('usr/share/lintian/'))
    .map((file) => ({ ...file, path: file.path.replace('usr/share/doc/bootstate/', 'usr/share/doc/bootstate-node/') }));
}

/** Copies a file into the staging root with an exact mode (the umask does not get a say). */
function place(from, to, mode) {
  write(to, readFileSync(from), mode);
}

function write(to, content, mode) {
  const target = join(stage, to);
  mkdirSync(dirname(target), { recursive: true, mode: 0o755 });
  writeFileSync(target, content);
  chmodSync(target, mode);
}

/** Every regular file under the staging root except DEBIAN/, relative and sorted. */
function filesUnder(dir, prefix = '') {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
      if (rel === 'DEBIAN' || entry.isSymbolicLink()) return [];
      return entry.isDirectory() ? filesUnder(join(dir, entry.name), rel) : [rel];
    })
    .sort();
}

function md5(file) {
  return createHash('md5').update(readFileSync(file)).digest('hex');
}

/** The last commit's time, so two builds of one commit give the same package; now when not in a git checkout. */
function sourceDateEpoch() {
  try {
    return execFileSync('git', ['-C', root, 'log', '-1', '--format=%ct'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return String(Math.floor(Date.now() / 1000));
  }
}

/** postinst's fallback (no systemctl) links the units into multi-user.target.wants; the units must agree. */
function checkUnitsMatchPostinst() {
  for (const name of ['bootstate.service', 'bootstate-firewall.service', 'bootstate-resource-disk.service', 'bootstate-network.service']) {
    const unit = readFileSync(join(units, name), 'utf8');
    if (!/^WantedBy=multi-user\.target\s*$/m.test(unit)) {
      throw new Error(`packaging/systemd/${name}: [Install] WantedBy=multi-user.target is what postinst enables; update both together`);
    }
  }
}

/** packaging/default-config.ts (TypeScript, importing src/), bundled through esbuild and loaded in-process once. */
function defaultConfigRenderer() {
  defaultConfigRenderer.module ??= build({
    entryPoints: [join(root, 'packaging/default-config.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    write: false,
    logLevel: 'warning',
  }).then((result) => import(`data:text/javascript;base64,${Buffer.from(result.outputFiles[0].text).toString('base64')}`));
  return defaultConfigRenderer.module;
}

/** The commented /etc/bootstate/bootstate.toml. */
async function renderDefaultConfig() {
  return (await defaultConfigRenderer()).renderDefaultConfig();
}

/** The wireserver firewall's rules for that file, loaded by nft at boot (packaging/libexec/firewall-load). */
async function renderPackagedFirewall() {
  return (await defaultConfigRenderer()).renderPackagedFirewall();
}

/** The Maintainer field: the signer of the latest changelog entry, as Debian tools read it. */
function maintainer() {
  return /^ -- (.+?) {2}/m.exec(readFileSync(join(debian, 'changelog'), 'utf8'))[1];
}

/**
 * The packages providing the shared libraries the executable links (libc6, libstdc++6, libgcc-s1), with the
 * versions its symbols need, from dpkg-shlibdeps as a Debian build would compute `${shlibs:Depends}`.
 */
function sharedLibraryDepends(executable) {
  const work = mkdtempSync(join(tmpdir(), 'bootstate-shlibs-'));
  try {
    mkdirSync(join(work, 'debian'));
    writeFileSync(join(work, 'debian/control'), 'Source: bootstate\n\nPackage: bootstate\nArchitecture: any\n');
    // Another architecture's libraries are Debian's cross packages (libc6-arm64-cross, under /usr/aarch64-linux-gnu),
    // whose shlibs files name the packages as libc6:arm64 or libgcc-s1-arm64-cross, for the whole library version.
    const cross = isCross(nodeArch) ? { triple: { arm64: 'aarch64-linux-gnu', amd64: 'x86_64-linux-gnu' }[arch] } : null;
    const args = cross ? ['-O', `-l/usr/${cross.triple}/lib`, '-e', executable] : ['-O', '-e', executable];
    const env = cross ? { ...process.env, DEB_HOST_ARCH: arch, DEB_HOST_MULTIARCH: cross.triple } : process.env;
    const out = execFileSync('dpkg-shlibdeps', args, { cwd: work, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    const depends = /^shlibs:Depends=(.+)$/m.exec(out)?.[1];
    if (!depends) throw new Error(`dpkg-shlibdeps found no shared libraries in ${executable}`);
    return cross ? depends.replaceAll(`:${arch}`, '').replaceAll(`-${arch}-cross`, '') : depends;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
