#!/usr/bin/env node
// Builds dist/bootstate_<version>_<arch>.deb from dist/bootstate (built first when missing), the systemd units,
// the commented default configuration rendered from DEFAULT_CONFIG, and the maintainer scripts in packaging/debian.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
// BOOTSTATE_DIST: another output directory, for a build that must not race other users of dist/ (the boot tests).
const dist = process.env.BOOTSTATE_DIST ? resolve(process.env.BOOTSTATE_DIST) : join(root, 'dist');
const debian = join(root, 'packaging/debian');
const units = join(root, 'packaging/systemd');
const stage = join(dist, 'deb-root');
const binary = join(dist, 'bootstate');

const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const arch = { x64: 'amd64', arm64: 'arm64' }[process.arch];
if (!arch) throw new Error(`no Debian architecture for ${process.arch}`);
const output = join(dist, `bootstate_${version}_${arch}.deb`);
const changelogVersion = /^bootstate \(([^)]+)\)/.exec(readFileSync(join(debian, 'changelog'), 'utf8'))?.[1];
if (changelogVersion !== version) throw new Error(`packaging/debian/changelog's latest entry is ${changelogVersion}, package.json says ${version}: add an entry`);

if (!existsSync(binary)) execFileSync(process.execPath, [join(root, 'scripts/build/binary.mjs')], { stdio: 'inherit' });
checkUnitsMatchPostinst();

rmSync(stage, { recursive: true, force: true });
place(binary, 'usr/bin/bootstate', 0o755);
place(join(units, 'bootstate.service'), 'usr/lib/systemd/system/bootstate.service', 0o644);
place(join(units, 'bootstate-monitor.service'), 'usr/lib/systemd/system/bootstate-monitor.service', 0o644);
// WALinuxAgent's unit is walinuxagent.service on Debian and Ubuntu, waagent.service on RHEL, SUSE and upstream.
for (const unit of ['walinuxagent.service', 'waagent.service']) place(join(units, 'waagent-gate.conf'), `usr/lib/systemd/system/${unit}.d/50-bootstate.conf`, 0o644);
write('etc/bootstate/bootstate.toml', await renderDefaultConfig(), 0o644);
place(join(debian, 'copyright'), 'usr/share/doc/bootstate/copyright', 0o644);
write('usr/share/doc/bootstate/changelog.gz', gzipSync(readFileSync(join(debian, 'changelog')), { level: 9 }).fill(0, 4, 8), 0o644);
place(join(debian, 'lintian-overrides'), 'usr/share/lintian/overrides/bootstate', 0o644);
write('usr/lib/systemd/system-preset/90-bootstate.preset', 'enable bootstate.service\ndisable bootstate-monitor.service\n', 0o644);

const payload = filesUnder(stage);
const installedKiB = payload.reduce((sum, file) => sum + Math.ceil(statSync(join(stage, file)).size / 1024), 0);
write('DEBIAN/md5sums', payload.map((file) => `${md5(join(stage, file))}  ${file}\n`).join(''), 0o644);
write(
  'DEBIAN/control',
  readFileSync(join(debian, 'control'), 'utf8')
    .replace('@VERSION@', version)
    .replace('@ARCH@', arch)
    .replace('@INSTALLED_SIZE@', String(installedKiB))
    .replace('@MAINTAINER@', maintainer())
    .replace('@SHLIBS_DEPENDS@', sharedLibraryDepends(join(stage, 'usr/bin/bootstate'))),
  0o644,
);
place(join(debian, 'conffiles'), 'DEBIAN/conffiles', 0o644);
for (const script of ['postinst', 'prerm', 'postrm']) place(join(debian, script), `DEBIAN/${script}`, 0o755);

rmSync(output, { force: true });
// xz level 1: the package is a little larger than at the default level 6, for a fraction of the CPU time.
execFileSync('dpkg-deb', ['--root-owner-group', '-Zxz', '-z1', '--build', stage, output], {
  stdio: ['ignore', 'ignore', 'inherit'],
  env: { ...process.env, SOURCE_DATE_EPOCH: process.env.SOURCE_DATE_EPOCH ?? sourceDateEpoch() },
});
process.stdout.write(`${relative(root, output)}\n`);

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
      if (rel === 'DEBIAN') return [];
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

/** postinst's fallback (no systemctl) links the unit into multi-user.target.wants; the unit must agree. */
function checkUnitsMatchPostinst() {
  const unit = readFileSync(join(units, 'bootstate.service'), 'utf8');
  if (!/^WantedBy=multi-user\.target\s*$/m.test(unit)) {
    throw new Error('packaging/systemd/bootstate.service: [Install] WantedBy=multi-user.target is what postinst enables; update both together');
  }
}

/** Renders packaging/default-config.ts (TypeScript, importing src/) through esbuild and runs it in-process. */
async function renderDefaultConfig() {
  const result = await build({
    entryPoints: [join(root, 'packaging/default-config.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    write: false,
    logLevel: 'warning',
  });
  const module = await import(`data:text/javascript;base64,${Buffer.from(result.outputFiles[0].text).toString('base64')}`);
  return module.renderDefaultConfig();
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
    const out = execFileSync('dpkg-shlibdeps', ['-O', '-e', executable], { cwd: work, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    const depends = /^shlibs:Depends=(.+)$/m.exec(out)?.[1];
    if (!depends) throw new Error(`dpkg-shlibdeps found no shared libraries in ${executable}`);
    return depends;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
