/**
 * `[user_provisioners] sudo` as the files say it: the default gives what WALinuxAgent gives, the older
 * `passwordless_sudo` keeps meaning what it meant in the file that sets it, and a file written for azure-init keeps
 * azure-init's NOPASSWD rule. Each mapping is per file: a later file's `sudo` still wins.
 */
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { loadConfig } from '../../src/config/load.js';
import { BootstateError } from '../../src/core/errors.js';

let root: string;
let systemFile: string;
let dropinDir: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'bootstate-sudo-config-'));
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

const load = () => loadConfig({ systemFile, dropinDir, env: {} });
const sudoOf = async (system: string, ...dropins: string[]) => {
  await rm(dropinDir, { recursive: true, force: true });
  await write(systemFile, system);
  for (const [i, text] of dropins.entries()) await write(join(dropinDir, `${10 + i}.toml`), text);
  const { config, warnings, origins } = await load();
  return { sudo: config.user_provisioners.sudo, warnings, origin: origins['user_provisioners.sudo'] };
};

describe('[user_provisioners] sudo', () => {
  it('is "auto" by default, with no file setting it', async () => {
    expect(DEFAULT_CONFIG.user_provisioners.sudo).toBe('auto');
    expect(await sudoOf('')).toEqual({ sudo: 'auto', warnings: [], origin: undefined });
  });

  it('takes each of auto, nopasswd, password and none', async () => {
    for (const value of ['auto', 'nopasswd', 'password', 'none']) {
      expect((await sudoOf(`[user_provisioners]\nsudo = "${value}"\n`)).sudo).toBe(value);
    }
  });

  it('refuses any other value, naming the choices', async () => {
    const error = await sudoOf('[user_provisioners]\nsudo = "yes"\n').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BootstateError);
    expect((error as BootstateError).message).toBe(
      `${systemFile}: [user_provisioners] sudo: expected one of "auto" | "nopasswd" | "password" | "none", got "yes"`,
    );
  });
});

describe('the older passwordless_sudo', () => {
  it('true means "nopasswd" and false means "none", recorded as set by that file, with no warning', async () => {
    expect(await sudoOf('[user_provisioners]\npasswordless_sudo = true\n')).toEqual({ sudo: 'nopasswd', warnings: [], origin: systemFile });
    expect(await sudoOf('[user_provisioners]\npasswordless_sudo = false\n')).toEqual({ sudo: 'none', warnings: [], origin: systemFile });
  });

  it('gives way to sudo in the same file, with a warning naming both', async () => {
    const { sudo, warnings } = await sudoOf('[user_provisioners]\npasswordless_sudo = true\nsudo = "password"\n');
    expect(sudo).toBe('password');
    expect(warnings).toEqual([`${systemFile}: [user_provisioners] passwordless_sudo is ignored because sudo is also set`]);
  });

  it('counts per file: a later file with sudo wins over it, and it wins over an earlier file with sudo', async () => {
    expect((await sudoOf('[user_provisioners]\npasswordless_sudo = true\n', '[user_provisioners]\nsudo = "auto"\n')).sudo).toBe('auto');
    const later = await sudoOf('[user_provisioners]\nsudo = "password"\n', '[user_provisioners]\npasswordless_sudo = false\n');
    expect(later).toMatchObject({ sudo: 'none', origin: join(dropinDir, '10.toml') });
  });

  it('of the wrong type makes the file invalid, naming the key as written', async () => {
    const error = await sudoOf('[user_provisioners]\npasswordless_sudo = "yes"\n').catch((e: unknown) => e);
    expect((error as BootstateError).code).toBe('CONFIG_INVALID');
    expect((error as BootstateError).message).toBe(`${systemFile}: [user_provisioners] passwordless_sudo: expected boolean, got string`);
  });
});

describe('a file written for azure-init', () => {
  const AZURE_INIT_ONLY = {
    '[azure_init_data_dir]': '[azure_init_data_dir]\npath = "/var/lib/azure-init"\n',
    '[azure_init_log_path]': '[azure_init_log_path]\npath = "/var/log/azure-init.log"\n',
    '[imds] read_timeout_secs': '[imds]\nread_timeout_secs = 30\n',
    '[telemetry] kvp_diagnostics': '[telemetry]\nkvp_diagnostics = true\n',
    '[telemetry] kvp_filter': '[telemetry]\nkvp_filter = "info"\n',
  };

  for (const [name, text] of Object.entries(AZURE_INIT_ONLY)) {
    it(`(it has ${name}) keeps azure-init's NOPASSWD sudo unless it says otherwise`, async () => {
      expect(await sudoOf(text)).toMatchObject({ sudo: 'nopasswd', origin: systemFile });
      expect((await sudoOf(`${text}[user_provisioners]\nsudo = "password"\n`)).sudo).toBe('password');
      expect((await sudoOf(`${text}[user_provisioners]\npasswordless_sudo = false\n`)).sudo).toBe('none');
    });
  }

  it('is only one whose names are azure-init\'s own: names both agents share leave the default', async () => {
    expect((await sudoOf('[ssh]\nquery_sshd_config = true\n[hostname_provisioners]\nbackends = ["hostnamectl"]\n')).sudo).toBe('auto');
    expect((await sudoOf('[imds]\nconnection_timeout_secs = 5\n[telemetry]\nkvp = true\n')).sudo).toBe('auto');
    // bootstate reads [azure_proxy_agent] too (the Guest Proxy Agent wait), so it says nothing about who wrote the file.
    expect((await sudoOf('[azure_proxy_agent]\nenable = true\n')).sudo).toBe('auto');
  });

  it('counts per file: a later bootstate file with sudo still wins', async () => {
    const merged = await sudoOf('[azure_init_data_dir]\npath = "/var/lib/azure-init"\n', '[user_provisioners]\nsudo = "auto"\n');
    expect(merged).toMatchObject({ sudo: 'auto', origin: join(dropinDir, '10.toml') });
  });

  it("azure-init's complete documented example keeps NOPASSWD sudo", async () => {
    await cp(join(import.meta.dirname, 'azure-init', 'complete.toml'), systemFile);
    expect((await load()).config.user_provisioners.sudo).toBe('nopasswd');
  });
});
