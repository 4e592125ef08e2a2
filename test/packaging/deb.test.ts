/**
 * The .deb an image builder installs: built by scripts/build/deb.mjs from the binary, then inspected as dpkg
 * sees it (`dpkg-deb -c`), extracted (`dpkg-deb -x`) and installed into a scratch root (`dpkg --root`).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseToml } from 'smol-toml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { loadConfig } from '../../src/config/load.js';
import { renderDefaultConfig, renderPackagedFirewall } from '../../packaging/default-config.js';
import { nftRuleset } from '../../src/firewall/firewall.js';
import { filesFor } from '../../packaging/installed-files.mjs';

const root = resolve(fileURLToPath(import.meta.url), '../../..');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
const deb = join(root, `dist/bootstate_${version}_amd64.deb`);
const WANTS_LINK = 'etc/systemd/system/multi-user.target.wants/bootstate.service';
const RESOURCE_DISK_WANTS_LINK = 'etc/systemd/system/multi-user.target.wants/bootstate-resource-disk.service';
const FIREWALL_WANTS_LINK = 'etc/systemd/system/multi-user.target.wants/bootstate-firewall.service';
const RECHECK_WANTS_LINK = 'etc/systemd/system/timers.target.wants/bootstate-firewall-recheck.timer';
const isRoot = process.getuid?.() === 0;
const hasSystemdAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;

let scratch: string;
let extracted: string;

beforeAll(() => {
  if (!existsSync(join(root, 'dist/bootstate'))) {
    execFileSync(process.execPath, [join(root, 'scripts/build/binary.mjs')], { cwd: root, stdio: 'inherit' });
  }
  execFileSync(process.execPath, [join(root, 'scripts/build/deb.mjs')], { cwd: root, stdio: 'inherit' });
  scratch = mkdtempSync(join(tmpdir(), 'bootstate-deb-'));
  extracted = join(scratch, 'extracted');
  execFileSync('dpkg-deb', ['-x', deb, extracted]);
}, 900_000);

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** `dpkg-deb -c` as path → { mode, owner }, the way dpkg will create them. */
function contents(): Map<string, { mode: string; owner: string }> {
  const listing = execFileSync('dpkg-deb', ['-c', deb], { encoding: 'utf8' });
  const entries = new Map<string, { mode: string; owner: string }>();
  for (const line of listing.trim().split('\n')) {
    const [mode, owner, , , , ...rest] = line.split(/\s+/);
    const path = rest.join(' ').replace(/^\.\//, '/').split(' -> ')[0];
    if (path !== '/') entries.set(path.replace(/\/$/, ''), { mode, owner });
  }
  return entries;
}

function field(name: string): string {
  return execFileSync('dpkg-deb', ['-f', deb, name], { encoding: 'utf8' }).trim();
}

/** A unit file's settings, each key's values split on whitespace and gathered across repeated lines. */
function unitSettings(path: string): Record<string, string[]> {
  const settings: Record<string, string[]> = {};
  let section = '';
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (/^\s*(#|;|$)/.test(line)) continue;
    const header = /^\[(.+)\]$/.exec(line.trim());
    if (header) {
      section = header[1];
      continue;
    }
    const [key, ...value] = line.split('=');
    (settings[`${section}.${key.trim()}`] ??= []).push(...value.join('=').trim().split(/\s+/));
  }
  return settings;
}

/** A dpkg database with nothing installed, inside a directory that stands for `/`. */
function emptyDpkgRoot(name: string): string {
  const dir = join(scratch, name);
  for (const sub of ['info', 'updates', 'triggers']) mkdirSync(join(dir, 'var/lib/dpkg', sub), { recursive: true });
  writeFileSync(join(dir, 'var/lib/dpkg/status'), '');
  writeFileSync(join(dir, 'var/lib/dpkg/available'), '');
  return dir;
}

/** Runs dpkg on a scratch root; maintainer scripts run on this host with DPKG_ROOT set, not chrooted. */
function dpkg(dir: string, ...args: string[]): void {
  execFileSync('dpkg', [`--root=${dir}`, '--force-script-chrootless', '--force-depends', ...args], { stdio: 'pipe' });
}

describe('the .deb', () => {
  it('is named and described as an admin package, depending on the shared libraries it links and the tools it runs', () => {
    expect(field('Package')).toBe('bootstate');
    expect(field('Version')).toBe(version);
    expect(field('Architecture')).toBe('amd64');
    expect(field('Section')).toBe('admin');
    expect(field('Priority')).toBe('optional');
    expect(field('Maintainer')).toMatch(/^[^<]+ <[^@\s]+@[^@\s]+\.[a-z]+>$/);
    expect(field('Maintainer')).not.toMatch(/\.invalid>|localhost/);
    expect(field('Description')).toMatch(/^first-boot provisioning agent/);
    const depends = field('Depends').split(/,\s*/);
    // dpkg-shlibdeps' answer for the executable: what `ldd dist/bootstate` lists, as packages with versions.
    for (const library of ['libc6', 'libstdc++6', 'libgcc-s1']) {
      expect(depends.find((d) => d.startsWith(`${library} `)), library).toMatch(/^\S+ \(>= [0-9.]+\)$/);
    }
    expect(depends).toEqual(expect.arrayContaining(['passwd', 'mount', 'nftables | iptables']));
    expect(depends.some((d) => d.startsWith('util-linux'))).toBe(false);
    expect(field('Recommends')).toContain('openssh-server');
  });

  it('installs exactly the binary, the units, the WALinuxAgent drop-ins, the udev rule, the default config and the copyright, owned by root with their modes', () => {
    const files = [...contents()].filter(([, entry]) => !entry.mode.startsWith('d'));
    expect(Object.fromEntries(files.map(([path, entry]) => [path, entry.mode]))).toEqual({
      '/etc/bootstate/bootstate.toml': '-rw-r--r--',
      '/usr/bin/bootstate': '-rwxr-xr-x',
      '/usr/lib/systemd/system/bootstate-firewall.service': '-rw-r--r--',
      '/usr/lib/systemd/system/bootstate-firewall-recheck.service': '-rw-r--r--',
      '/usr/lib/systemd/system/bootstate-firewall-recheck.timer': '-rw-r--r--',
      '/usr/lib/systemd/system/bootstate-monitor.service': '-rw-r--r--',
      '/usr/lib/systemd/system/bootstate-resource-disk.service': '-rw-r--r--',
      '/usr/lib/systemd/system/bootstate-network.service': '-rw-r--r--',
      '/usr/lib/systemd/system/bootstate-monitor.timer': '-rw-r--r--',
      '/usr/lib/systemd/system/bootstate.service': '-rw-r--r--',
      '/usr/lib/systemd/system/waagent.service.d/50-bootstate.conf': '-rw-r--r--',
      '/usr/lib/systemd/system/walinuxagent.service.d/50-bootstate.conf': '-rw-r--r--',
      '/usr/lib/systemd/system-preset/90-bootstate.preset': '-rw-r--r--',
      '/usr/lib/udev/rules.d/66-bootstate-resource-disk.rules': '-rw-r--r--',
      '/usr/libexec/bootstate/firewall-load': '-rwxr-xr-x',
      '/usr/libexec/bootstate/firewall-recheck': '-rwxr-xr-x',
      '/usr/share/bootstate/firewall.nft': '-rw-r--r--',
      '/usr/share/doc/bootstate/changelog.gz': '-rw-r--r--',
      '/usr/share/doc/bootstate/copyright': '-rw-r--r--',
      '/usr/share/lintian/overrides/bootstate': '-rw-r--r--',
    });
    for (const [path, entry] of contents()) {
      expect(entry.owner, path).toBe('root/root');
      if (entry.mode.startsWith('d')) expect(entry.mode, path).toBe('drwxr-xr-x');
    }
  });

  it('installs what packaging/installed-files.mjs lists for the .deb, the list the RPM is built from too', () => {
    const files = [...contents()].filter(([, entry]) => !entry.mode.startsWith('d'));
    const octal = (mode: string) => [...mode.slice(1)].reduce((bits, c) => bits * 2 + (c === '-' ? 0 : 1), 0);
    expect(Object.fromEntries(files.map(([path, entry]) => [path.slice(1), octal(entry.mode)]))).toEqual(
      Object.fromEntries(filesFor('deb').map((f) => [f.path, f.mode])),
    );
  });

  it('marks the default config a conffile so an admin\'s edits survive upgrades', () => {
    const control = join(scratch, 'control');
    execFileSync('dpkg-deb', ['-e', deb, control]);
    expect(readFileSync(join(control, 'conffiles'), 'utf8').trim().split('\n')).toEqual(['/etc/bootstate/bootstate.toml']);
    expect(readdirSync(control).sort()).toEqual(['conffiles', 'control', 'md5sums', 'postinst', 'postrm', 'prerm']);
  });

  it('ships the binary dist/bootstate, byte for byte', () => {
    expect(readFileSync(join(extracted, 'usr/bin/bootstate')).equals(readFileSync(join(root, 'dist/bootstate')))).toBe(true);
  });
});

describe('the first-boot unit', () => {
  const unit = () => unitSettings(join(extracted, 'usr/lib/systemd/system/bootstate.service'));

  it('runs once as /usr/bin/bootstate provision, and is active once the agent itself says READY=1', () => {
    expect(unit()['Service.Type']).toEqual(['notify']);
    expect(unit()['Service.NotifyAccess']).toEqual(['main']);
    expect(unit()['Service.RemainAfterExit']).toEqual(['yes']);
    expect(unit()['Service.ExecStart']).toEqual(['/usr/bin/bootstate', 'provision']);
  });

  it('bounds the start (the agent extends it while it waits within its budgets) and leaves the stop room for the failure report', () => {
    expect(unit()['Service.TimeoutStartSec']).toEqual(['90s']);
    expect(unit()['Service.TimeoutStopSec']).toEqual(['15s']);
  });

  it('waits for the network and finishes before sshd and logins start', () => {
    expect(unit()['Unit.After']).toContain('network-online.target');
    expect(unit()['Unit.Wants']).toContain('network-online.target');
    expect(unit()['Unit.Before']).toEqual(expect.arrayContaining(['sshd.service', 'ssh.service', 'systemd-user-sessions.service']));
  });

  it('is wanted by multi-user.target, which is where postinst links it', () => {
    expect(unit()['Install.WantedBy']).toEqual(['multi-user.target']);
  });
});

describe('the firewall unit', () => {
  const unit = () => unitSettings(join(extracted, 'usr/lib/systemd/system/bootstate-firewall.service'));

  it('is shipped as packaging/systemd has it, and the preset enables it with the first-boot unit', () => {
    expect(readFileSync(join(extracted, 'usr/lib/systemd/system/bootstate-firewall.service'), 'utf8')).toBe(
      readFileSync(join(root, 'packaging/systemd/bootstate-firewall.service'), 'utf8'),
    );
    expect(readFileSync(join(extracted, 'usr/lib/systemd/system-preset/90-bootstate.preset'), 'utf8').split('\n')).toEqual(
      expect.arrayContaining(['enable bootstate.service', 'enable bootstate-firewall.service', 'enable bootstate-firewall-recheck.timer', 'disable bootstate-monitor.timer']),
    );
  });

  it('applies the rules once per boot, before network-pre.target, early (no default dependencies), after nftables.service\'s flush', () => {
    expect(unit()['Service.Type']).toEqual(['oneshot']);
    expect(unit()['Service.RemainAfterExit']).toEqual(['yes']);
    expect(unit()['Service.ExecStart']).toEqual(['/usr/libexec/bootstate/firewall-load', '/run/bootstate/firewall.nft']);
    expect(lstatSync(join(extracted, 'usr/libexec/bootstate/firewall-load')).mode & 0o777).toBe(0o755);
    expect(unit()['Unit.DefaultDependencies']).toEqual(['no']);
    expect(unit()['Unit.Before']).toContain('network-pre.target');
    expect(unit()['Unit.Wants']).toContain('network-pre.target');
    expect(unit()['Unit.After']).toContain('nftables.service');
    expect(unit()['Unit.ConditionCapability']).toEqual(['CAP_NET_ADMIN']);
    expect(unit()['Install.WantedBy']).toEqual(['multi-user.target']);
  });

  it('ships the rules for the packaged configuration, which nft loads without Node: what packaging/default-config.ts renders', () => {
    const shipped = readFileSync(join(extracted, 'usr/share/bootstate/firewall.nft'), 'utf8');
    expect(shipped).toBe(renderPackagedFirewall());
    const sha256 = createHash('sha256').update(readFileSync(join(extracted, 'etc/bootstate/bootstate.toml'))).digest('hex');
    expect(shipped).toContain(`\n# default-config-sha256 ${sha256}\n`);
    expect(shipped.endsWith(nftRuleset('168.63.129.16'))).toBe(true);
  });

  it('is re-checked every 30 s by its own timer, enabled by the package, with the cheap nft and cmp re-check and the same sandbox', () => {
    const recheck = unitSettings(join(extracted, 'usr/lib/systemd/system/bootstate-firewall-recheck.service'));
    const timer = unitSettings(join(extracted, 'usr/lib/systemd/system/bootstate-firewall-recheck.timer'));
    expect(timer['Timer.OnActiveSec']).toEqual(['30s']);
    expect(timer['Timer.OnUnitActiveSec']).toEqual(['30s']);
    expect(timer['Timer.AccuracySec']).toEqual(['1s']);
    expect(timer['Install.WantedBy']).toEqual(['timers.target']);
    expect(recheck['Service.Type']).toEqual(['oneshot']);
    expect(recheck['Service.ExecStart']).toEqual(['/usr/libexec/bootstate/firewall-recheck', '/run/bootstate/firewall.nft']);
    expect(recheck['Service.LogLevelMax']).toEqual(['notice']);
    expect(recheck['Install.WantedBy']).toBeUndefined();
    expect(lstatSync(join(extracted, 'usr/libexec/bootstate/firewall-recheck')).mode & 0o777).toBe(0o755);
    for (const key of Object.keys(unit()).filter((k) => k.startsWith('Service.') && !['Service.ExecStart', 'Service.RemainAfterExit'].includes(k))) {
      expect(recheck[key], key).toEqual(unit()[key]);
    }
  });
});

describe('the monitor unit', () => {
  const unit = () => unitSettings(join(extracted, 'usr/lib/systemd/system/bootstate-monitor.service'));

  const timer = () => unitSettings(join(extracted, 'usr/lib/systemd/system/bootstate-monitor.timer'));

  it('is one cycle, `bootstate monitor --once`, after provisioning, started by its timer every minute', () => {
    expect(unit()['Service.Type']).toEqual(['oneshot']);
    expect(unit()['Service.ExecStart']).toEqual(['/usr/bin/bootstate', 'monitor', '--once']);
    expect(unit()['Unit.After']).toContain('bootstate.service');
    // The firewall re-check: outside the sandbox (+), never failing the cycle (-), against the firewall unit's snapshot.
    expect(unit()['Service.ExecStartPre']).toEqual(['-+/usr/libexec/bootstate/firewall-recheck', '/run/bootstate/firewall.nft']);
    expect(unit()['Install.WantedBy']).toBeUndefined();
    expect(timer()['Timer.OnUnitActiveSec']).toEqual(['1min']);
    expect(timer()['Timer.AccuracySec']).toEqual(['1s']);
    expect(timer()['Timer.Persistent']).toEqual(['false']);
    expect(timer()['Install.WantedBy']).toEqual(['timers.target']);
  });

  it('keeps its per-minute lines out of the journal, and is capped and sandboxed', () => {
    expect(unit()['Service.LogLevelMax']).toEqual(['notice']);
    expect(unit()['Service.CPUQuota']).toEqual(['50%']);
    expect(unit()['Service.MemoryMax']).toEqual(['96M']);
    expect(unit()['Service.RuntimeDirectory']).toEqual(['bootstate']);
    expect(unit()['Service.RuntimeDirectoryPreserve']).toEqual(['yes']);
    expect(unit()['Service.ProtectSystem']).toEqual(['strict']);
  });

  it.skipIf(!hasSystemdAnalyze)('rates 2.0 or better in systemd-analyze security --offline=true', () => {
    const result = spawnSync('systemd-analyze', ['security', '--offline=true', join(extracted, 'usr/lib/systemd/system/bootstate-monitor.service')], { encoding: 'utf8' });
    const level = /Overall exposure level for bootstate-monitor\.service: ([0-9.]+)/.exec(`${result.stdout}${result.stderr}`)?.[1];
    expect(level, `${result.stdout}${result.stderr}`).toBeDefined();
    expect(Number(level)).toBeLessThanOrEqual(2.0);
  });
});

describe('the WALinuxAgent drop-ins', () => {
  for (const unit of ['walinuxagent.service', 'waagent.service']) {
    it(`order ${unit} after the first-boot unit and start it only when bootstate gate opens, with no timeout of their own`, () => {
      const dropIn = unitSettings(join(extracted, `usr/lib/systemd/system/${unit}.d/50-bootstate.conf`));
      expect(dropIn).toEqual({
        'Unit.After': ['bootstate.service'],
        'Service.ExecCondition': ['/usr/bin/bootstate', 'gate'],
        'Service.TimeoutStartSec': ['infinity'],
      });
    });
  }
});

describe('the temporary disk unit', () => {
  const unit = () => unitSettings(join(extracted, 'usr/lib/systemd/system/bootstate-resource-disk.service'));

  it('runs bootstate resource-disk once per boot, after the first-boot unit is ready, and nothing waits for it', () => {
    expect(unit()['Service.Type']).toEqual(['oneshot']);
    expect(unit()['Service.ExecStart']).toEqual(['/usr/bin/bootstate', 'resource-disk']);
    expect(unit()['Unit.After']).toContain('bootstate.service');
    expect(unit()['Unit.Before']).toBeUndefined();
    expect(unit()['Install.WantedBy']).toEqual(['multi-user.target']);
  });

  it('is enabled by the preset, beside the first-boot unit', () => {
    expect(readFileSync(join(extracted, 'usr/lib/systemd/system-preset/90-bootstate.preset'), 'utf8')).toContain('enable bootstate-resource-disk.service\n');
  });

  it('ships the udev rule naming the resource disk /dev/disk/azure/resource by its VMBus id (Gen1) or LUN 1 of controller 0 (Gen2)', () => {
    const rule = readFileSync(join(extracted, 'usr/lib/udev/rules.d/66-bootstate-resource-disk.rules'), 'utf8');
    expect(rule).toContain('ATTRS{device_id}=="?00000000-0001-*"');
    expect(rule).toContain('ATTRS{device_id}=="{f8b3781a-1e82-4818-a1c3-63d806ec15bb}"');
    expect(rule).toContain('SYMLINK+="disk/azure/resource"');
    expect(rule).toContain('SYMLINK+="disk/azure/resource-part%n"');
  });
});

describe('the network unit', () => {
  const unit = () => unitSettings(join(extracted, 'usr/lib/systemd/system/bootstate-network.service'));

  it('runs bootstate network on every boot once the network is online and the first-boot unit is ready, and nothing waits for it', () => {
    expect(unit()['Service.Type']).toEqual(['oneshot']);
    expect(unit()['Service.ExecStart']).toEqual(['/usr/bin/bootstate', 'network']);
    expect(unit()['Unit.After']).toEqual(expect.arrayContaining(['bootstate.service', 'network-online.target']));
    expect(unit()['Unit.Wants']).toContain('network-online.target');
    expect(unit()['Unit.Before']).toBeUndefined();
    expect(unit()['Unit.ConditionCapability']).toEqual(['CAP_NET_ADMIN']);
    expect(unit()['Install.WantedBy']).toEqual(['multi-user.target']);
    expect(readFileSync(join(extracted, 'usr/lib/systemd/system-preset/90-bootstate.preset'), 'utf8')).toContain('enable bootstate-network.service\n');
  });
});

describe('the default /etc/bootstate/bootstate.toml', () => {
  const shipped = () => join(extracted, 'etc/bootstate/bootstate.toml');
  const isSetting = (line: string) => /^#[a-z_]+ = /.test(line);

  it('is what packaging/default-config.ts renders from DEFAULT_CONFIG', () => {
    expect(readFileSync(shipped(), 'utf8')).toBe(renderDefaultConfig());
  });

  it('changes nothing as shipped: every setting is commented out', async () => {
    const { config } = await loadConfig({ systemFile: '/nonexistent', dropinDir: '/nonexistent', override: shipped(), env: {} });
    expect(config).toEqual(DEFAULT_CONFIG);
    const lines = readFileSync(shipped(), 'utf8').split('\n');
    expect(lines.filter((line) => line !== '' && !line.startsWith('#') && !/^\[[a-z_]+\]$/.test(line))).toEqual([]);
  });

  it('spells out exactly DEFAULT_CONFIG when every setting is uncommented', async () => {
    const uncommented = join(scratch, 'uncommented.toml');
    const text = readFileSync(shipped(), 'utf8')
      .split('\n')
      .map((line) => (isSetting(line) ? line.slice(1) : line))
      .join('\n');
    writeFileSync(uncommented, text);
    expect(parseToml(text)).toEqual(DEFAULT_CONFIG);
    const { config } = await loadConfig({ systemFile: '/nonexistent', dropinDir: '/nonexistent', override: uncommented, env: {} });
    expect(config).toEqual(DEFAULT_CONFIG);
  });

  it('explains every setting on the line above it', () => {
    const lines = readFileSync(shipped(), 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (isSetting(line)) expect(lines[i - 1], line).toMatch(/^# \S/);
    });
  });
});

describe.skipIf(!isRoot)('installing with dpkg --root into a scratch root', () => {
  it('enables the first-boot and temporary disk units, and removing the package disables them and keeps the config until purge', () => {
    const target = emptyDpkgRoot('dpkg-root');
    dpkg(target, '-i', deb);
    expect(readlinkSync(join(target, WANTS_LINK))).toBe('/usr/lib/systemd/system/bootstate.service');
    expect(readlinkSync(join(target, RESOURCE_DISK_WANTS_LINK))).toBe('/usr/lib/systemd/system/bootstate-resource-disk.service');
    expect(readlinkSync(join(target, FIREWALL_WANTS_LINK))).toBe('/usr/lib/systemd/system/bootstate-firewall.service');
    expect(existsSync(join(target, 'usr/bin/bootstate'))).toBe(true);

    dpkg(target, '-r', 'bootstate');
    expect(existsSync(join(target, WANTS_LINK))).toBe(false);
    expect(existsSync(join(target, RESOURCE_DISK_WANTS_LINK))).toBe(false);
    expect(existsSync(join(target, FIREWALL_WANTS_LINK))).toBe(false);
    expect(existsSync(join(target, 'usr/bin/bootstate'))).toBe(false);
    expect(existsSync(join(target, 'etc/bootstate/bootstate.toml'))).toBe(true);

    mkdirSync(join(target, 'var/lib/bootstate/runs'), { recursive: true });
    writeFileSync(join(target, 'var/lib/bootstate/runs/run.jsonl'), '{}\n');
    mkdirSync(join(target, 'var/log'), { recursive: true });
    writeFileSync(join(target, 'var/log/bootstate.log'), '{}\n');
    dpkg(target, '--purge', 'bootstate');
    expect(existsSync(join(target, 'etc/bootstate/bootstate.toml'))).toBe(false);
    expect(existsSync(join(target, 'var/lib/bootstate'))).toBe(false);
    expect(existsSync(join(target, 'var/log/bootstate.log'))).toBe(false);
  });

  it('passes lintian without errors', () => {
    const result = spawnSync('lintian', ['--tag-display-limit', '0', deb], { encoding: 'utf8' });
    const errors = `${result.stdout}${result.stderr}`.split('\n').filter((line) => line.startsWith('E: '));
    expect(errors).toEqual([]);
    expect(result.error).toBeUndefined();
  }, 300_000);

  it.skipIf(!hasSystemdAnalyze)('has units systemd-analyze verify accepts, with /usr/bin/bootstate in place', () => {
    const target = emptyDpkgRoot('verify-root');
    dpkg(target, '-i', deb);
    // The units order themselves against the standard targets; give the scratch root the host's.
    const targets = '/usr/lib/systemd/system';
    for (const name of readdirSync(targets).filter((n) => n.endsWith('.target'))) {
      if (!existsSync(join(target, 'usr/lib/systemd/system', name))) copyFileSync(join(targets, name), join(target, 'usr/lib/systemd/system', name));
    }
    const result = spawnSync('systemd-analyze', ['verify', `--root=${target}`, 'bootstate.service', 'bootstate-monitor.service', 'bootstate-resource-disk.service', 'bootstate-network.service', 'bootstate-firewall.service', 'bootstate-monitor.timer', 'bootstate-firewall-recheck.service', 'bootstate-firewall-recheck.timer'], { encoding: 'utf8' });
    expect(`${result.stdout}${result.stderr}`.trim()).toBe('');
    expect(result.status).toBe(0);
  });

  it.skipIf(!hasSystemdAnalyze)('gates WALinuxAgent under either unit name as systemd loads it, and changes nothing where it is absent', () => {
    const target = emptyDpkgRoot('waagent-root');
    dpkg(target, '-i', deb);
    const units = join(target, 'usr/lib/systemd/system');
    for (const name of readdirSync('/usr/lib/systemd/system').filter((n) => n.endsWith('.target'))) {
      if (!existsSync(join(units, name))) copyFileSync(join('/usr/lib/systemd/system', name), join(units, name));
    }
    // No WALinuxAgent: the drop-in directories load nothing, and the package's own units stay clean.
    const without = spawnSync('systemd-analyze', ['verify', `--root=${target}`, 'bootstate.service'], { encoding: 'utf8' });
    expect(`${without.stdout}${without.stderr}`.trim()).toBe('');
    // WALinuxAgent's unit as Debian ships it (walinuxagent.service) and as RHEL does (waagent.service).
    mkdirSync(join(target, 'usr/sbin'), { recursive: true });
    writeFileSync(join(target, 'usr/sbin/waagent'), '#!/bin/sh\n', { mode: 0o755 });
    // Debian's is ordered after multi-user.target, which wants bootstate.service: no ordering cycle either way.
    const agentUnits: Record<string, string> = {
      'walinuxagent.service': '[Unit]\nDescription=Azure Linux Agent\nAfter=multi-user.target\nConditionVirtualization=microsoft\n\n[Service]\nExecStart=/usr/sbin/waagent -daemon\n\n[Install]\nWantedBy=multi-user.target\n',
      'waagent.service': '[Unit]\nDescription=Azure Linux Agent\nAfter=network-online.target cloud-init.service\nWants=network-online.target sshd.service\n\n[Service]\nType=simple\nExecStart=/usr/sbin/waagent -daemon\nRestart=always\n\n[Install]\nWantedBy=multi-user.target\n',
    };
    mkdirSync(join(target, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
    for (const [unit, agentUnit] of Object.entries(agentUnits)) {
      writeFileSync(join(units, unit), agentUnit);
      symlinkSync(`/usr/lib/systemd/system/${unit}`, join(target, 'etc/systemd/system/multi-user.target.wants', unit));
      const verify = spawnSync('systemd-analyze', ['verify', `--root=${target}`, unit, 'bootstate.service', 'multi-user.target'], { encoding: 'utf8' });
      expect(`${verify.stdout}${verify.stderr}`.trim()).toBe('');
      expect(verify.status).toBe(0);
      // At debug level systemd-analyze dumps each unit as loaded: the drop-in's settings merged into the agent's.
      const debug = spawnSync('systemd-analyze', ['verify', `--root=${target}`, unit], { encoding: 'utf8', env: { ...process.env, SYSTEMD_LOG_LEVEL: 'debug' } });
      const dump = `${debug.stdout}${debug.stderr}`;
      expect(dump).toContain(`DropIn Path: ${units}/${unit}.d/50-bootstate.conf`);
      expect(dump).toMatch(/-> ExecCondition:\s+Command Line: \/usr\/bin\/bootstate gate\s+-> ExecStart:\s+Command Line: \/usr\/sbin\/waagent -daemon/);
      expect(dump).toMatch(/After: bootstate\.service/);
      expect(dump).toMatch(/TimeoutStartSec: infinity/);
    }
  });
});

describe('prerm', () => {
  it('stops the monitor\'s timer on removal and a cycle in flight on removal and upgrade, through deb-systemd-invoke', () => {
    const control = join(scratch, 'control-prerm');
    execFileSync('dpkg-deb', ['-e', deb, control]);
    const prerm = readFileSync(join(control, 'prerm'), 'utf8');
    expect(prerm).toMatch(/remove\|upgrade\|deconfigure\)/);
    expect(prerm).toContain('deb-systemd-invoke stop bootstate-monitor.service bootstate-firewall-recheck.service');
    expect(prerm).toContain('deb-systemd-invoke stop bootstate-monitor.timer bootstate-firewall-recheck.timer');
  });

  it('removes the wireserver firewall\'s rules with the binary on removal of a live system, not on upgrade', () => {
    const control = join(scratch, 'control-prerm-firewall');
    execFileSync('dpkg-deb', ['-e', deb, control]);
    const prerm = readFileSync(join(control, 'prerm'), 'utf8');
    expect(prerm).toMatch(/if \[ "\$1" = remove \] && \[ -z "\$root" \] && \[ -x \/usr\/bin\/bootstate \]; then\n\s+\/usr\/bin\/bootstate firewall remove/);
  });
});

describe('postinst', () => {
  it('links the unit into multi-user.target.wants itself when there is no systemctl', () => {
    const target = join(scratch, 'no-systemctl-root');
    const bin = join(scratch, 'bin-without-systemctl');
    mkdirSync(bin, { recursive: true });
    for (const tool of ['sh', 'mkdir', 'ln']) symlinkSync(execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim(), join(bin, tool));
    const control = join(scratch, 'control-postinst');
    execFileSync('dpkg-deb', ['-e', deb, control]);
    execFileSync(join(bin, 'sh'), [join(control, 'postinst'), 'configure', ''], { env: { PATH: bin, DPKG_ROOT: target } });
    expect(readlinkSync(join(target, WANTS_LINK))).toBe('/usr/lib/systemd/system/bootstate.service');
    expect(readlinkSync(join(target, RESOURCE_DISK_WANTS_LINK))).toBe('/usr/lib/systemd/system/bootstate-resource-disk.service');
    expect(readlinkSync(join(target, FIREWALL_WANTS_LINK))).toBe('/usr/lib/systemd/system/bootstate-firewall.service');
    expect(readlinkSync(join(target, RECHECK_WANTS_LINK))).toBe('/usr/lib/systemd/system/bootstate-firewall-recheck.timer');
  });

  it('runs bootstate doctor on the target root and prints its findings without failing the install', () => {
    const target = join(scratch, 'doctor-root');
    execFileSync('dpkg-deb', ['-x', deb, target]);
    writeFileSync(join(target, 'etc/waagent.conf'), 'Provisioning.Agent=auto\n');
    const control = join(scratch, 'control-doctor');
    execFileSync('dpkg-deb', ['-e', deb, control]);
    const result = spawnSync('sh', [join(control, 'postinst'), 'configure', ''], { env: { PATH: process.env.PATH, DPKG_ROOT: target }, encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain('BREAKS FIRST BOOT [waagent-provisioning]');
    expect(result.stderr).toContain('fix the findings above');
  });

  it('says at install how to turn off cloud-init\'s Azure datasource, and leaves cloud-init\'s configuration alone', () => {
    const target = join(scratch, 'cloud-init-root');
    execFileSync('dpkg-deb', ['-x', deb, target]);
    mkdirSync(join(target, 'etc/cloud/cloud.cfg.d'), { recursive: true });
    writeFileSync(join(target, 'etc/cloud/cloud.cfg'), 'datasource_list: [ NoCloud, Azure ]\n');
    const control = join(scratch, 'control-cloud-init');
    execFileSync('dpkg-deb', ['-e', deb, control]);
    const result = spawnSync('sh', [join(control, 'postinst'), 'configure', ''], { env: { PATH: process.env.PATH, DPKG_ROOT: target }, encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain('BREAKS FIRST BOOT [cloud-init-azure]');
    expect(result.stdout).toContain('fix: touch /etc/cloud/cloud-init.disabled');
    expect(result.stdout).toContain('"datasource_list: [ None ]" in a file of /etc/cloud/cloud.cfg.d/');
    expect(readdirSync(join(target, 'etc/cloud')).sort()).toEqual(['cloud.cfg', 'cloud.cfg.d']);
    expect(readdirSync(join(target, 'etc/cloud/cloud.cfg.d'))).toEqual([]);
    expect(readFileSync(join(target, 'etc/cloud/cloud.cfg'), 'utf8')).toBe('datasource_list: [ NoCloud, Azure ]\n');
  });

  it('leaves an admin\'s disabled unit disabled on upgrade', () => {
    const target = join(scratch, 'upgrade-root');
    const control = join(scratch, 'control-upgrade');
    execFileSync('dpkg-deb', ['-e', deb, control]);
    execFileSync('sh', [join(control, 'postinst'), 'configure', '0.0.1'], { env: { PATH: process.env.PATH, DPKG_ROOT: target } });
    expect(existsSync(join(target, WANTS_LINK))).toBe(false);
    expect(existsSync(join(target, FIREWALL_WANTS_LINK))).toBe(false);
    expect(existsSync(join(target, RECHECK_WANTS_LINK))).toBe(false);
  });
});
