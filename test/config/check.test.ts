/**
 * `bootstate config check`: the merged configuration with each value's origin, and exit 78 on anything a first
 * boot would ignore or refuse — unknown keys, wrong types, TOML syntax errors (with line and column).
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runConfigCheck } from '../../src/commands/config.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';

let root: string;
let systemFile: string;
let dropinDir: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'bootstate-check-'));
  systemFile = join(root, 'bootstate.toml');
  dropinDir = join(root, 'bootstate.toml.d');
  await mkdir(dropinDir);
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function check(args: string[], env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const at = args.indexOf('--config');
  const code = await runConfigCheck(at >= 0 ? { config: args[at + 1] } : {}, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s), systemFile, dropinDir, env });
  return { code, stdout, stderr };
}

describe('bootstate config check', () => {
  it('prints the defaults as TOML, each value marked "default", and exits 0', async () => {
    const { code, stdout, stderr } = await check(['check']);
    expect([code, stderr]).toEqual([0, '']);
    expect(parseToml(stdout)).toEqual(JSON.parse(JSON.stringify(DEFAULT_CONFIG)));
    expect(stdout).toMatch(/^retry_interval_secs = 2 {2}# default$/m);
  });

  it('names the file each value came from: system file, drop-in, then --config', async () => {
    await writeFile(systemFile, '[imds]\nretry_interval_secs = 1\nrequest_timeout_secs = 9\n');
    await writeFile(join(dropinDir, '10.toml'), '[imds]\nretry_interval_secs = 3\n');
    const override = join(root, 'override.toml');
    await writeFile(override, '[journal]\nkeep = 4\n');
    const { code, stdout } = await check(['check', '--config', override]);
    expect(code).toBe(0);
    expect(stdout).toContain(`request_timeout_secs = 9  # ${systemFile}`);
    expect(stdout).toContain(`retry_interval_secs = 3  # ${join(dropinDir, '10.toml')}`);
    expect(stdout).toContain(`keep = 4  # ${override}`);
    expect(stdout.split('\n')[0]).toBe(`# layers: defaults → ${systemFile} → ${join(dropinDir, '10.toml')} → ${override}`);
  });

  it('reads BOOTSTATE_CONFIG like --config', async () => {
    const override = join(root, 'env.toml');
    await writeFile(override, '[journal]\nkeep = 7\n');
    expect((await check(['check'], { BOOTSTATE_CONFIG: override })).stdout).toContain(`keep = 7  # ${override}`);
  });

  it('exits 78 on an unknown key, naming file, section and key, while a first boot only warns', async () => {
    await writeFile(systemFile, '[imds]\nretry_intervall_secs = 2\n');
    const { code, stdout, stderr } = await check(['check']);
    expect(code).toBe(78);
    expect(stdout).toContain('[imds]');
    expect(stderr).toContain(`warning: ${systemFile}: [imds] retry_intervall_secs: unknown key, ignored`);
  });

  it('exits 78 on a wrong type, naming file and key', async () => {
    await writeFile(systemFile, '[ssh]\nquery_sshd_config = "not_a_boolean"\n');
    const { code, stdout, stderr } = await check(['check']);
    expect([code, stdout]).toEqual([78, '']);
    expect(stderr).toBe(`error: ${systemFile}: [ssh] query_sshd_config: expected boolean, got string\n`);
  });

  it('exits 78 on a backend name no backend has, or an empty backend list, naming file and key', async () => {
    await writeFile(systemFile, '[hostname_provisioners]\nbackends = ["hostnamectl", "rm -rf"]\n');
    let run = await check(['check']);
    expect([run.code, run.stdout]).toEqual([78, '']);
    expect(run.stderr).toBe(`error: ${systemFile}: [hostname_provisioners] backends[1]: expected one of "hostnamectl" | "hostname", got "rm -rf"\n`);
    await writeFile(systemFile, '[user_provisioners]\nbackends = ["bogus"]\n');
    run = await check(['check']);
    expect(run.code).toBe(78);
    expect(run.stderr).toBe(`error: ${systemFile}: [user_provisioners] backends[0]: expected one of "useradd", got "bogus"\n`);
    await writeFile(systemFile, '[password_provisioners]\nbackends = []\n');
    run = await check(['check']);
    expect(run.code).toBe(78);
    expect(run.stderr).toBe(`error: ${systemFile}: [password_provisioners] backends: must name at least one backend (passwd, usermod)\n`);
    await writeFile(systemFile, '[hostname_publishing]\nbackends = ["pump"]\n');
    expect((await check(['check'])).stderr).toContain('[hostname_publishing] backends[0]: expected one of "networkd" | "networkmanager" | "dhclient", got "pump"');
    await writeFile(systemFile, '[hostname_publishing]\nbackends = []\n');
    expect((await check(['check'])).stderr).toContain('[hostname_publishing] backends: must name at least one backend (networkd, networkmanager, dhclient); enable = false turns publishing off');
  });

  it('accepts every known backend name, in any order', async () => {
    await writeFile(
      systemFile,
      '[hostname_provisioners]\nbackends = ["hostname", "hostnamectl"]\n[user_provisioners]\nbackends = ["useradd"]\n[password_provisioners]\nbackends = ["usermod", "passwd"]\n[hostname_publishing]\nbackends = ["dhclient"]\n',
    );
    expect(await check(['check'])).toMatchObject({ code: 0, stderr: '' });
  });

  it('exits 78 on a configuration path that is not a regular file (a FIFO is never opened), naming it, while a first boot only warns', async () => {
    const { execFileSync } = await import('node:child_process');
    execFileSync('mkfifo', [systemFile]);
    const { code, stdout, stderr } = await check(['check']);
    expect(code).toBe(78);
    expect(stdout).toMatch(/^# layers: defaults\n/);
    expect(stderr).toBe(
      `warning: ${systemFile}: not a regular file (fifo), ignored\nerror: 1 configuration path(s) that are not regular files; a first boot would ignore them\n`,
    );
  });

  it('exits 78 on a TOML syntax error with its line and column', async () => {
    await writeFile(join(dropinDir, '50.toml'), '[imds]\nretry_interval_secs = 2\nendpoint = "http://x\n');
    const { code, stderr } = await check(['check']);
    expect(code).toBe(78);
    expect(stderr).toMatch(new RegExp(`^error: ${join(dropinDir, '50.toml')}: not valid TOML at line 3, column \\d+: `));
  });

  it('accepts azure-init keys with their warnings and exits 0', async () => {
    await writeFile(systemFile, '[imds]\nread_timeout_secs = 30\n[azure_proxy_agent]\nenable = true\n');
    const { code, stderr } = await check(['check']);
    expect(code).toBe(0);
    expect(stderr).toContain('read_timeout_secs is accepted for azure-init compatibility and has no effect');
  });
});
