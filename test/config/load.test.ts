import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { loadConfig } from '../../src/config/load.js';
import { BootstateError } from '../../src/core/errors.js';

let root: string;
let systemFile: string;
let dropinDir: string;
const noEnv = {};

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'bootstate-config-'));
  systemFile = join(root, 'bootstate.toml');
  dropinDir = join(root, 'bootstate.toml.d');
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function write(path: string, text: string): Promise<string> {
  await mkdir(join(path, '..'), { recursive: true });
  await writeFile(path, text);
  return path;
}

async function errorOf(promise: Promise<unknown>): Promise<BootstateError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(BootstateError);
    expect((error as BootstateError).code).toBe('CONFIG_INVALID');
    return error as BootstateError;
  }
  throw new Error('expected a config error');
}

describe('loadConfig', () => {
  it('returns the defaults when no file exists', async () => {
    const loaded = await loadConfig({ systemFile, dropinDir, env: noEnv });
    expect(loaded).toEqual({ config: DEFAULT_CONFIG, sources: [], warnings: [], unknown: [], refused: [], origins: {} });
  });

  it('merges system file, sorted drop-ins, then the override, later keys winning', async () => {
    await write(systemFile, '[imds]\nretry_interval_secs = 5\nrequest_timeout_secs = 10\n');
    const b = await write(join(dropinDir, '20-b.toml'), '[imds]\nrequest_timeout_secs = 20\n');
    const a = await write(join(dropinDir, '10-a.toml'), '[imds]\nrequest_timeout_secs = 15\ntotal_retry_timeout_secs = 100\n');
    await write(join(dropinDir, 'README'), 'not toml');
    const override = await write(join(root, 'cli.toml'), '[imds]\ntotal_retry_timeout_secs = 50\n');
    const { config, sources } = await loadConfig({ systemFile, dropinDir, override, env: noEnv });
    expect(sources).toEqual([systemFile, a, b, override]);
    expect(config.imds).toEqual({
      ...DEFAULT_CONFIG.imds,
      retry_interval_secs: 5,
      request_timeout_secs: 20,
      total_retry_timeout_secs: 50,
    });
  });

  it('with only, reads those keys of every layer and leaves the rest unread: a broken value elsewhere neither fails nor shows', async () => {
    await write(systemFile, '[firewall]\nenable = false\n[resource_disk]\nswap_size_mb = "2048"\nbogus = 1\n[nonsense]\nx = 1\n');
    await write(join(dropinDir, '50.toml'), '[wireserver]\naddress = "10.0.0.1"\nread_timeout_secs = -1\n');
    const only = { firewall: ['enable'], wireserver: ['address'] } as const;
    const loaded = await loadConfig({ systemFile, dropinDir, env: noEnv, only });
    expect(loaded.config).toEqual({ ...DEFAULT_CONFIG, firewall: { enable: false }, wireserver: { ...DEFAULT_CONFIG.wireserver, address: '10.0.0.1' } });
    expect([loaded.warnings, loaded.unknown]).toEqual([[], []]);
    expect((await errorOf(loadConfig({ systemFile, dropinDir, env: noEnv }))).message).toContain('[resource_disk] swap_size_mb: expected number, got string');

    await write(join(dropinDir, '60.toml'), 'firewall = 1\n');
    expect((await errorOf(loadConfig({ systemFile, dropinDir, env: noEnv, only }))).message).toContain('60.toml: [firewall]: expected a table, got integer');
    await write(join(dropinDir, '60.toml'), '[firewall\n');
    expect((await errorOf(loadConfig({ systemFile, dropinDir, env: noEnv, only }))).message).toContain('60.toml: not valid TOML');
  });

  it('replaces arrays instead of concatenating them', async () => {
    await write(systemFile, '[user_provisioners]\ngroups = ["adm", "wheel"]\n');
    await write(join(dropinDir, '50.toml'), '[user_provisioners]\ngroups = ["docker"]\n');
    const { config } = await loadConfig({ systemFile, dropinDir, env: noEnv });
    expect(config.user_provisioners.groups).toEqual(['docker']);
    expect(config.user_provisioners.backends).toEqual(DEFAULT_CONFIG.user_provisioners.backends);
  });

  it('merges the sorted *.toml files of an override directory', async () => {
    const dir = join(root, 'override');
    const second = await write(join(dir, 'b.toml'), '[journal]\nkeep = 2\n');
    const first = await write(join(dir, 'a.toml'), '[journal]\nkeep = 1\nenable = false\n');
    const { config, sources } = await loadConfig({ systemFile, dropinDir, override: dir, env: noEnv });
    expect(sources).toEqual([first, second]);
    expect(config.journal).toEqual({ enable: false, keep: 2 });
  });

  it('reads BOOTSTATE_CONFIG like --config, and --config wins over it', async () => {
    const fromEnv = await write(join(root, 'env.toml'), '[journal]\nkeep = 7\n');
    const fromCli = await write(join(root, 'cli.toml'), '[journal]\nkeep = 9\n');
    const env = { BOOTSTATE_CONFIG: fromEnv };
    expect((await loadConfig({ systemFile, dropinDir, env })).config.journal.keep).toBe(7);
    expect((await loadConfig({ systemFile, dropinDir, env, override: fromCli })).config.journal.keep).toBe(9);
  });

  it('accepts integers for fractional-second settings and floats where they are whole', async () => {
    await write(systemFile, '[imds]\nconnection_timeout_secs = 3\nrequest_timeout_secs = 2.5\n[wireserver]\nretry_interval_secs = 0.25\n');
    const { config } = await loadConfig({ systemFile, dropinDir, env: noEnv });
    expect(config.imds.connection_timeout_secs).toBe(3);
    expect(config.imds.request_timeout_secs).toBe(2.5);
    expect(config.wireserver.retry_interval_secs).toBe(0.25);
  });

  it.each([
    ['[imds]\nretry_interval_secs = "2"\n', '[imds] retry_interval_secs: expected number, got string'],
    ['imds = 3\n', '[imds]: expected a table, got integer'],
    ['[imds]\nrequest_timeout_secs = 0\n', '[imds] request_timeout_secs: must be a number of seconds > 0'],
    ['[imds]\nrequest_timeout_secs = -1.5\n', '[imds] request_timeout_secs: must be a number of seconds > 0'],
    ['[imds]\nrequest_timeout_secs = inf\n', '[imds] request_timeout_secs: must be a number of seconds > 0'],
    ['[imds]\nendpoint = "https://169.254.169.254/x"\n', '[imds] endpoint: must be an http:// URL'],
    ['[telemetry]\nkvp_pool = 5\n', '[telemetry] kvp_pool: must be an integer from 0 to 4'],
    ['[telemetry]\nkvp_pool = 1.5\n', '[telemetry] kvp_pool: must be an integer from 0 to 4'],
    ['[telemetry]\nkvp_level = "loud"\n', '[telemetry] kvp_level: expected one of "trace" | "debug" | "info" | "warn" | "error", got "loud"'],
    ['[user_provisioners]\ngroups = ["adm", 3]\n', '[user_provisioners] groups[1]: expected string, got integer'],
    ['[ssh]\nquery_sshd_config = "yes"\n', '[ssh] query_sshd_config: expected boolean, got string'],
    ['[monitor]\nhost_plugin_port = 70000\n', '[monitor] host_plugin_port: must be an integer from 1 to 65535'],
    ['[custom_data]\ncustom_data_path = "data/cd"\n', '[custom_data] custom_data_path: must be an absolute path or empty'],
    ['[custom_data]\nrequire = "yes"\n', '[custom_data] require: expected boolean, got string'],
    ['[steps]\nskip = ["sudo"]\n', '[steps] skip[0]: expected one of "hostname" | "user" | "password" | "ssh-keys" | "sshd" | "host-keys" | "custom-data" | "resource-disk", got "sudo"'],
    ['[preprovisioning]\npoll_interval_secs = 0\n', '[preprovisioning] poll_interval_secs: must be a number of seconds > 0'],
    ['[resource_disk]\nlocal_nvme = "mdadm"\n', '[resource_disk] local_nvme: expected one of "leave" | "raid0" | "each", got "mdadm"'],
  ])('rejects %j naming the file and key', async (text, problem) => {
    const file = await write(join(dropinDir, '50-x.toml'), text);
    const error = await errorOf(loadConfig({ systemFile, dropinDir, env: noEnv }));
    expect(error.message).toBe(`${file}: ${problem}`);
    expect(error.data).toEqual([
      ['file', file],
      ['error', problem],
    ]);
  });

  it('reports the problems of several keys of a file at once', async () => {
    const file = await write(systemFile, '[imds]\nretry_interval_secs = "2"\n[journal]\nkeep = "x"\n');
    const error = await errorOf(loadConfig({ systemFile, dropinDir, env: noEnv }));
    expect(error.message).toBe(
      `${file}: [imds] retry_interval_secs: expected number, got string; [journal] keep: expected number, got string`,
    );
  });

  it('rejects a file that is not TOML, naming it with the line and column', async () => {
    const file = await write(systemFile, 'a = 1\n[imds\n');
    const error = await errorOf(loadConfig({ systemFile, dropinDir, env: noEnv }));
    expect(error.message.startsWith(`${file}: not valid TOML at line 2, column 6`)).toBe(true);
  });

  it('sets unknown sections and keys aside with a warning naming file, section and key, keeping the rest', async () => {
    const file = await write(join(dropinDir, '50-x.toml'), 'stray = 1\n[imds]\nretry_interval = 2\nretry_interval_secs = 3\n[imdz]\nendpoint = "http://x"\n');
    const { config, warnings, unknown } = await loadConfig({ systemFile, dropinDir, env: noEnv });
    expect(config.imds.retry_interval_secs).toBe(3);
    expect(unknown).toEqual([
      `${file}: stray: unknown top-level key, ignored`,
      `${file}: [imds] retry_interval: unknown key, ignored`,
      `${file}: [imdz]: unknown section, ignored`,
    ]);
    expect(warnings).toEqual(unknown);
  });

  it('names an unknown key under an azure-init section as written', async () => {
    const file = await write(systemFile, '[azure_init_data_dir]\npath = "/x"\nmode = 1\n');
    const { unknown } = await loadConfig({ systemFile, dropinDir, env: noEnv });
    expect(unknown).toEqual([`${file}: [azure_init_data_dir] mode: unknown key, ignored`]);
  });

  it('records the file each value came from, the last one winning', async () => {
    const base = await write(systemFile, '[imds]\nretry_interval_secs = 1\nrequest_timeout_secs = 9\n');
    const later = await write(join(dropinDir, '20.toml'), '[imds]\nretry_interval_secs = 3\n[azure_init_log_path]\npath = "/var/log/x.log"\n');
    const { origins } = await loadConfig({ systemFile, dropinDir, env: noEnv });
    // A file with an azure-init section is an azure-init file: it also says sudo = "nopasswd" (test/config/sudo.test.ts).
    expect(origins).toEqual({ 'imds.retry_interval_secs': later, 'imds.request_timeout_secs': base, 'log_path.path': later, 'user_provisioners.sudo': later });
  });

  it('rejects an override that does not exist', async () => {
    const missing = join(root, 'missing.toml');
    const error = await errorOf(loadConfig({ systemFile, dropinDir, override: missing, env: noEnv }));
    expect(error.message).toBe(`${missing}: cannot read: ENOENT`);
  });

  it('does not let a later valid file excuse an earlier invalid one', async () => {
    const bad = await write(join(dropinDir, '10.toml'), '[journal]\nkeep = "x"\n');
    await write(join(dropinDir, '20.toml'), '[journal]\nkeep = 3\n');
    const error = await errorOf(loadConfig({ systemFile, dropinDir, env: noEnv }));
    expect(error.message.startsWith(bad)).toBe(true);
  });

  it('carries an azure-init configuration file over unchanged', async () => {
    const azureInit = `
[ssh]
authorized_keys_path = ".ssh/authorized_keys"
query_sshd_config = false
configure_sshd_password_authentication = true

[hostname_provisioners]
backends = ["hostnamectl"]

[user_provisioners]
backends = ["useradd"]

[password_provisioners]
backends = ["passwd"]

[imds]
connection_timeout_secs = 2.0
request_timeout_secs = 60
retry_interval_secs = 2.0
total_retry_timeout_secs = 300

[provisioning_media]
enable = true

[azure_proxy_agent]
enable = true

[wireserver]
connection_timeout_secs = 30
read_timeout_secs = 60.0
total_retry_timeout_secs = 1200.0
health_endpoint = "http://168.63.129.16/provisioning/health"

[telemetry]
kvp_diagnostics = false
kvp_filter = "info"

[azure_init_data_dir]
path = "/var/lib/azure-init/"

[azure_init_log_path]
path = "/var/log/azure-init.log"
`;
    await write(systemFile, azureInit);
    const { config, warnings } = await loadConfig({ systemFile, dropinDir, env: noEnv });
    expect(config.ssh.query_sshd_config).toBe(false);
    expect(config.hostname_provisioners.backends).toEqual(['hostnamectl']);
    expect(config.imds.connection_timeout_secs).toBe(2);
    expect(config.wireserver.connection_timeout_secs).toBe(30);
    expect(config.telemetry.kvp).toBe(false);
    expect(config.data_dir.path).toBe('/var/lib/azure-init/');
    expect(config.log_path.path).toBe('/var/log/azure-init.log');
    // azure-init's [azure_proxy_agent] enable means ours: wait for the agent when the media asks for it.
    expect(warnings).toEqual([]);
    expect(config.azure_proxy_agent).toEqual({ enable: true, require: false, wait_secs: 120 });
    expect(config.telemetry.kvp_level).toBe('info');
  });

  it('names the azure-init section as written when its value is wrong', async () => {
    const file = await write(systemFile, '[azure_init_data_dir]\npath = 5\n');
    const error = await errorOf(loadConfig({ systemFile, dropinDir, env: noEnv }));
    expect(error.message).toBe(`${file}: [azure_init_data_dir] path: expected string, got integer`);
  });

  it('prefers our own names when a file sets both spellings', async () => {
    await write(systemFile, '[data_dir]\npath = "/ours"\n[azure_init_data_dir]\npath = "/theirs"\n[telemetry]\nkvp = true\nkvp_diagnostics = false\n');
    const { config, warnings } = await loadConfig({ systemFile, dropinDir, env: noEnv });
    expect(config.data_dir.path).toBe('/ours');
    expect(config.telemetry.kvp).toBe(true);
    expect(warnings).toHaveLength(2);
  });

  it('does not share state with DEFAULT_CONFIG', async () => {
    const { config } = await loadConfig({ systemFile, dropinDir, env: noEnv });
    config.user_provisioners.groups.push('mutated');
    expect(DEFAULT_CONFIG.user_provisioners.groups).toEqual([]);
  });
});

describe('a configuration path that is not a regular file', () => {
  it('is refused at once, naming the file, instead of blocking on a FIFO nobody writes', async () => {
    const { execFileSync } = await import('node:child_process');
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const fifo = `${mkdtempSync(`${tmpdir()}/bootstate-fifo-`)}/held.toml`;
    execFileSync('mkfifo', [fifo]);
    const error = await loadConfig({ systemFile: '/nonexistent', dropinDir: '/nonexistent', override: fifo }).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toContain(fifo);
    expect(error?.message).toContain('not a regular file');
  });

  it('refuses a system file or drop-in that exists but is not a regular file with a warning naming it, and loads the rest', async () => {
    const { execFileSync } = await import('node:child_process');
    const { symlink } = await import('node:fs/promises');
    execFileSync('mkfifo', [systemFile]);
    await mkdir(dropinDir);
    await mkdir(join(dropinDir, '10-dir.toml'));
    await symlink(join(root, 'nowhere.toml'), join(dropinDir, '20-dangling.toml'));
    execFileSync('mkfifo', [join(dropinDir, '30-fifo.toml')]);
    await write(join(dropinDir, '40-good.toml'), '[journal]\nkeep = 5\n');
    await symlink(join(dropinDir, '40-good.toml'), join(dropinDir, '50-link.toml'));
    const loaded = await loadConfig({ systemFile, dropinDir, env: noEnv });
    expect(loaded.config.journal.keep).toBe(5);
    expect(loaded.sources).toEqual([join(dropinDir, '40-good.toml'), join(dropinDir, '50-link.toml')]);
    expect(loaded.refused).toEqual([
      `${systemFile}: not a regular file (fifo), ignored`,
      `${join(dropinDir, '10-dir.toml')}: not a regular file (directory), ignored`,
      `${join(dropinDir, '20-dangling.toml')}: dangling symlink (to ${join(root, 'nowhere.toml')}), ignored`,
      `${join(dropinDir, '30-fifo.toml')}: not a regular file (fifo), ignored`,
    ]);
    expect(loaded.warnings).toEqual(loaded.refused);
  });

  it('refuses a drop-in directory that is a file or a dangling symlink, with a warning', async () => {
    const { symlink } = await import('node:fs/promises');
    await write(dropinDir, '[journal]\nkeep = 5\n');
    expect((await loadConfig({ systemFile, dropinDir, env: noEnv })).refused).toEqual([`${dropinDir}: not a directory (file), ignored`]);
    await rm(dropinDir);
    await symlink(join(root, 'gone.d'), dropinDir);
    expect((await loadConfig({ systemFile, dropinDir, env: noEnv })).refused).toEqual([`${dropinDir}: not a directory (dangling symlink), ignored`]);
  });
});

describe('loadConfig with a root (doctor --root)', () => {
  it('resolves every path inside the root, absolute symlinks and `..` included, and names them under it', async () => {
    const { symlink } = await import('node:fs/promises');
    await write(join(root, 'etc/passwd'), '[journal]\nkeep = 3\n');
    await mkdir(join(root, 'etc/bootstate/bootstate.toml.d'), { recursive: true });
    await symlink('/etc/passwd', join(root, 'etc/bootstate/bootstate.toml'));
    await write(join(root, 'srv/drop.toml'), '[journal]\nenable = false\n');
    await symlink('../../../../../../../../../../srv/drop.toml', join(root, 'etc/bootstate/bootstate.toml.d/50.toml'));
    await symlink('/dev/zero', join(root, 'etc/bootstate/bootstate.toml.d/60.toml'));
    const loaded = await loadConfig({ root, systemFile: '/etc/bootstate/bootstate.toml', dropinDir: '/etc/bootstate/bootstate.toml.d', override: '', env: noEnv });
    expect([loaded.config.journal.keep, loaded.config.journal.enable]).toEqual([3, false]);
    expect(loaded.sources).toEqual([join(root, 'etc/bootstate/bootstate.toml'), join(root, 'etc/bootstate/bootstate.toml.d/50.toml')]);
    expect(loaded.origins['journal.keep']).toBe(join(root, 'etc/bootstate/bootstate.toml'));
    // The image has no /dev/zero: the link dangles there, whatever the host has.
    expect(loaded.refused).toEqual([`${join(root, 'etc/bootstate/bootstate.toml.d/60.toml')}: dangling symlink (to /dev/zero), ignored`]);
  });
});
