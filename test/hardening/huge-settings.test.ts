/**
 * Settings are bounded where they are read: a duration the runtime cannot honour (a Node timer above 2^31−1 ms
 * fires after 1 ms) is refused naming file, section and key, and the monitor never sends more than one request
 * per signal per period whatever period it is handed.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, type Config } from '../../src/config/defaults.js';
import { loadConfig } from '../../src/config/load.js';
import { MAX_DURATION_SECS } from '../../src/config/schema.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { runMonitor } from '../../src/monitor/run.js';
import { recordingLog } from '../monitor/helpers.js';

const DURATIONS: Array<[string, string]> = [
  ['imds', 'connection_timeout_secs'],
  ['imds', 'request_timeout_secs'],
  ['imds', 'retry_interval_secs'],
  ['imds', 'total_retry_timeout_secs'],
  ['wireserver', 'connection_timeout_secs'],
  ['wireserver', 'read_timeout_secs'],
  ['wireserver', 'retry_interval_secs'],
  ['wireserver', 'total_retry_timeout_secs'],
  ['os', 'timeout_secs'],
  ['hostname_publishing', 'timeout_secs'],
  ['monitor', 'heartbeat_period_secs'],
  ['monitor', 'heartbeat_rollup_secs'],
  ['monitor', 'imds_period_secs'],
  ['monitor', 'imds_rollup_secs'],
  ['monitor', 'versions_period_secs'],
  ['monitor', 'request_timeout_secs'],
];

const dir = mkdtempSync(join(tmpdir(), 'bootstate-huge-'));
const load = (file: string) => loadConfig({ systemFile: '/nonexistent', dropinDir: '/nonexistent', override: file, env: {} });

describe('durations the runtime cannot honour', () => {
  it.each(DURATIONS)('[%s] %s above 2,147,483 s is refused naming the file, the section and the key', async (section, key) => {
    const file = join(dir, `${section}-${key}.toml`);
    writeFileSync(file, `[${section}]\n${key} = 3000000\n`);
    const error = await load(file).then(() => null, (e: Error) => e);
    expect(error?.message).toBe(`${file}: [${section}] ${key}: must be at most ${MAX_DURATION_SECS} seconds (2^31-1 ms, the longest timer the runtime honours)`);
  });

  it.each(DURATIONS)('[%s] %s of exactly 2,147,483 s is accepted', async (section, key) => {
    const file = join(dir, `max-${section}-${key}.toml`);
    writeFileSync(file, `[${section}]\n${key} = ${MAX_DURATION_SECS}\n`);
    const { config } = await load(file);
    expect((config as unknown as Record<string, Record<string, number>>)[section]![key]).toBe(MAX_DURATION_SECS);
  });

  it('refuses a zero retry interval and warns when a total is shorter than one attempt', async () => {
    const zero = join(dir, 'zero.toml');
    writeFileSync(zero, '[imds]\nretry_interval_secs = 0\n');
    expect((await load(zero).then(() => null, (e: Error) => e))?.message).toBe(`${zero}: [imds] retry_interval_secs: must be a number of seconds > 0`);
    const short = join(dir, 'short.toml');
    writeFileSync(short, '[wireserver]\ntotal_retry_timeout_secs = 5\nread_timeout_secs = 60\n');
    expect((await load(short)).warnings).toEqual([
      '[wireserver] total_retry_timeout_secs (5 s) is shorter than read_timeout_secs (60 s): the total deadline ends the first attempt',
    ]);
  });

  it('warns when publishing the hostname could outlast the OS deadline, unless publishing is off', async () => {
    const long = join(dir, 'publish-long.toml');
    writeFileSync(long, '[os]\ntimeout_secs = 30\n');
    expect((await load(long)).warnings).toEqual([
      '[os] timeout_secs (30 s) is not longer than [hostname_publishing] timeout_secs (30 s): a DHCP client that does not answer fails the run instead of leaving a warning',
    ]);
    const off = join(dir, 'publish-off.toml');
    writeFileSync(off, '[os]\ntimeout_secs = 30\n\n[hostname_publishing]\nenable = false\n');
    expect((await load(off)).warnings).toEqual([]);
  });
});

describe('the monitor with a huge period', () => {
  let fabric: FakeFabric;
  beforeEach(async () => {
    fabric = await startFakeFabric();
  });
  afterEach(async () => {
    await fabric.close();
  });

  // Handed straight to runMonitor, past the config loader: the chart itself must not loop on a clamped timer.
  it.each([MAX_DURATION_SECS, 3_000_000, 1e12])('sends one request per signal in 3 s with periods of %d s', async (period) => {
    const config: Config = {
      ...DEFAULT_CONFIG,
      monitor: { ...DEFAULT_CONFIG.monitor, heartbeat_period_secs: period, versions_period_secs: period, imds_period_secs: period, request_timeout_secs: 2 },
    };
    const stop = new AbortController();
    const done = runMonitor({
      config,
      once: false,
      log: recordingLog(),
      onUnhealthy: () => undefined,
      handleSignals: false,
      signal: stop.signal,
      endpoints: { healthService: fabric.healthServiceUrl, hostPlugin: fabric.hostPluginUrl, imds: new URL(fabric.imdsUrl).origin },
    });
    await new Promise((resolve) => setTimeout(resolve, 3000));
    stop.abort();
    expect(await done).toMatchObject({ exitCode: 0 });
    expect({
      hostPluginHealth: fabric.requestsTo('hostPluginHealth').length,
      hostPluginVersions: fabric.requestsTo('hostPluginVersions').length,
      imds: fabric.requestsTo('imds').length,
    }).toEqual({ hostPluginHealth: 1, hostPluginVersions: 1, imds: 1 });
    expect(fabric.requestsTo('healthService').length).toBeLessThanOrEqual(3);
  });
});
