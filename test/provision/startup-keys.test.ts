/**
 * A provisioning run whose configuration fails to load reads again, alone, the keys saying where its state is and
 * where it reports (src/provision/provision.ts STARTUP_KEYS), so the marker is looked for where the image keeps it; when
 * even those fail it has the defaults.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { loadRunConfig } from '../../src/provision/provision.js';

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'bootstate-startup-keys-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** Loads `text` as the only config file, as a run would. */
async function load(text: string) {
  const file = join(root, 'bootstate.toml');
  writeFileSync(file, text);
  const loaded = await loadRunConfig({ systemConfigFile: join(root, 'none.toml'), dropinDir: join(root, 'none.d'), configPath: file }, (c) => c);
  if (loaded.ok) throw new Error('the config loaded');
  return loaded;
}

const BROKEN = '[resource_disk]\nswap_size_mb = "2048"\n';

describe('a run whose configuration fails to load', () => {
  it('keeps the data directory, the fabric addresses, the log and KVP of the broken file, and the error', async () => {
    const loaded = await load(
      '[data_dir]\npath = "/srv/state"\n[wireserver]\nhealth_endpoint = "http://127.0.0.1:9/health"\naddress = "127.0.0.1"\nretry_interval_secs = 7\n' +
        '[imds]\nendpoint = "http://127.0.0.1:9/imds"\n[telemetry]\nkvp_dir = "/srv/kvp"\n[log_path]\npath = "/srv/log"\n' + BROKEN,
    );
    expect(loaded.fallback).toBe('keys');
    expect(String((loaded.error as Error).message)).toContain('[resource_disk] swap_size_mb');
    expect(loaded.config.data_dir.path).toBe('/srv/state');
    expect(loaded.config.wireserver).toEqual({ ...DEFAULT_CONFIG.wireserver, health_endpoint: 'http://127.0.0.1:9/health', address: '127.0.0.1' });
    expect(loaded.config.imds.endpoint).toBe('http://127.0.0.1:9/imds');
    expect(loaded.config.telemetry.kvp_dir).toBe('/srv/kvp');
    expect(loaded.config.log_path.path).toBe('/srv/log');
    // Nothing else of the file is read: how to retry is not where to report.
    expect(loaded.config.resource_disk).toEqual(DEFAULT_CONFIG.resource_disk);
  });

  it('reads them under azure-init\'s names too', async () => {
    const loaded = await load('[azure_init_data_dir]\npath = "/srv/azure-init"\n[telemetry]\nkvp_diagnostics = false\n' + BROKEN);
    expect(loaded.fallback).toBe('keys');
    expect(loaded.config.data_dir.path).toBe('/srv/azure-init');
    expect(loaded.config.telemetry.kvp).toBe(false);
  });

  it('has the defaults when those keys are broken too, or the file is not TOML', async () => {
    for (const text of ['[data_dir]\npath = 5\n' + BROKEN, '[data_dir\npath = "/srv/state"\n']) {
      const loaded = await load(text);
      expect(loaded.fallback).toBe('defaults');
      expect(loaded.config).toEqual(DEFAULT_CONFIG);
    }
  });
});
