/**
 * azure-init's documented configurations (doc/configuration.md, reproduced as files in ./azure-init) load in
 * bootstate without error: every documented key is honoured, mapped, or accepted with a warning saying it has
 * no effect — never an unknown key.
 */
import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { loadConfig } from '../../src/config/load.js';

const EXAMPLES = join(import.meta.dirname, 'azure-init');
let root: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'bootstate-azinit-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const load = (override: string, systemFile = join(root, 'absent.toml'), dropinDir = join(root, 'absent.d')) =>
  loadConfig({ systemFile, dropinDir, override, env: {} });

describe("azure-init's documented example configurations", () => {
  it('the complete example loads, maps every key it can and warns about the rest', async () => {
    const file = join(EXAMPLES, 'complete.toml');
    const { config, warnings, unknown } = await load(file);
    expect(unknown).toEqual([]);
    expect(config.imds.connection_timeout_secs).toBe(30);
    expect(config.imds.total_retry_timeout_secs).toBe(300);
    expect(config.wireserver.read_timeout_secs).toBe(60);
    expect(config.wireserver.health_endpoint).toBe('http://168.63.129.16/provisioning/health');
    expect(config.hostname_provisioners.backends).toEqual(['hostnamectl']);
    expect(config.data_dir.path).toBe('/var/lib/azure-init/');
    expect(config.log_path.path).toBe('/var/log/azure-init.log');
    expect(config.telemetry).toMatchObject({ kvp: true, kvp_level: 'info' });
    expect(warnings).toEqual([
      `${file}: [imds] read_timeout_secs is accepted for azure-init compatibility and has no effect (use request_timeout_secs)`,
    ]);
  });

  it('the modular example (azure-init.toml.d/01-timeouts.toml) loads as a drop-in, read_timeout_secs with a warning', async () => {
    const dropinDir = join(root, 'bootstate.toml.d');
    await mkdir(dropinDir);
    await cp(join(EXAMPLES, '01-timeouts.toml'), join(dropinDir, '01-timeouts.toml'));
    const { config, warnings, unknown } = await loadConfig({ systemFile: join(root, 'absent.toml'), dropinDir, env: {} });
    expect(unknown).toEqual([]);
    expect(config.imds.connection_timeout_secs).toBe(5);
    expect(config.imds.request_timeout_secs).toBe(DEFAULT_CONFIG.imds.request_timeout_secs);
    expect(warnings).toEqual([expect.stringMatching(/\[imds\] read_timeout_secs .* has no effect/)]);
  });

  it('the basic SSH example and the options reference load with no unknown key', async () => {
    const basic = await load(join(EXAMPLES, 'basic-ssh.toml'));
    expect(basic.unknown).toEqual([]);
    expect(basic.config.ssh).toMatchObject({ query_sshd_config: true, authorized_keys_path: '/etc/ssh/authorized_keys' });
    const reference = await load(join(EXAMPLES, 'options-reference.toml'));
    expect(reference.unknown).toEqual([]);
    expect(reference.config.wireserver.connection_timeout_secs).toBe(2);
  });

  it('a kvp_filter that is a tracing directive, not a bare level, is accepted with a no-effect warning', async () => {
    const { writeFile } = await import('node:fs/promises');
    const file = join(root, 'filter.toml');
    await writeFile(file, '[telemetry]\nkvp_filter = "warn,libazureinit=debug"\n');
    const { config, warnings } = await load(file);
    expect(config.telemetry.kvp_level).toBe(DEFAULT_CONFIG.telemetry.kvp_level);
    expect(warnings).toEqual([expect.stringContaining('[telemetry] kvp_filter is accepted for azure-init compatibility and has no effect')]);
  });
});
