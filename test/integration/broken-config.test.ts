/**
 * The built agent with a configuration that fails to load, against a fake fabric on loopback: an outcome once known
 * is never reported as its opposite (docs/configuration.md#a-configuration-that-fails-to-load). The run reads again,
 * alone, the keys saying where its state is and where it reports — here a data directory and fabric addresses that
 * are not the defaults — so a provisioned VM id finds its marker and the fabric hears nothing; a pending Ready is
 * reported; only a boot that would provision reports the failure.
 */
import { copyFileSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { decodeRecords } from '../../src/kvp/codec.js';
import { cli, lastFailureDescription, markers, reportKinds, runAgent, writeConfig } from './agent.js';

/** A type error in a section the startup reads nothing of. */
const UNRELATED_TYPE_ERROR = '[resource_disk]\nswap_size_mb = "2048"\n';

let fabric: FakeFabric;
beforeEach(async () => {
  fabric = await startFakeFabric();
});
afterEach(async () => {
  await fabric.close();
});

/** A root whose VM id this run provisioned: the fabric's record of it is then cleared. */
async function provisionedRoot(): Promise<string> {
  const first = await runAgent(fabric);
  expect(first.code, first.stderr).toBe(0);
  expect(markers(first.root)).toEqual([expect.stringMatching(/\.provisioned$/)]);
  fabric.requests.length = 0;
  fabric.reports.length = 0;
  return first.root;
}

describe('a later boot with a configuration that fails to load', () => {
  it('of a provisioned VM, with the error in the file that moves the data directory: exit 0, nothing sent, a warning naming it', async () => {
    const root = await provisionedRoot();
    const run = await runAgent(fabric, { root, extraToml: UNRELATED_TYPE_ERROR });
    expect(run.code, run.stderr).toBe(0);
    expect(fabric.requests).toEqual([]);
    expect(run.stderr).toMatch(/failed to load config \(file [^)]*bootstate\.toml, error \[resource_disk\] swap_size_mb[^)]*\); already provisioned: nothing is reported/);
    expect(markers(root)).toEqual([expect.stringMatching(/\.provisioned$/)]);
    // Where the run's other warnings go: the KVP pool and the log file of the broken file's paths.
    const pool = decodeRecords(readFileSync(join(root, 'var/lib/hyperv/.kvp_pool_1'))).map((r) => r.value).join('\n');
    expect(pool).toContain('already provisioned: nothing is reported');
    expect(readFileSync(join(root, 'var/log/bootstate.log'), 'utf8')).toContain('already provisioned: nothing is reported');
  });

  it('of a provisioned VM, with the error in a drop-in beside the file that moves the data directory: exit 0, nothing sent', async () => {
    const root = await provisionedRoot();
    const dir = join(root, 'bootstate.toml.d');
    mkdirSync(dir);
    copyFileSync(writeConfig(fabric, root, {}), join(dir, '10-base.toml'));
    writeFileSync(join(dir, '50-disk.toml'), UNRELATED_TYPE_ERROR);
    const run = await cli(['provision', '--scratch', root, '--config', dir]);
    expect(run.code, run.stderr).toBe(0);
    expect(fabric.requests).toEqual([]);
    expect(run.stderr).toContain('50-disk.toml');
    expect(run.stderr).toContain('already provisioned: nothing is reported');
  });

  it('with Ready pending: reports Ready, never ProvisioningFailed', async () => {
    const root = await provisionedRoot();
    const data = join(root, 'var/lib/bootstate');
    const [marker] = readdirSync(data).filter((n) => n.endsWith('.provisioned'));
    renameSync(join(data, marker!), join(data, marker!.replace(/\.provisioned$/, '.report-pending')));
    const run = await runAgent(fabric, { root, extraToml: UNRELATED_TYPE_ERROR });
    expect(run.code, run.stderr).toBe(0);
    expect(reportKinds(fabric)).toEqual(['Ready']);
    expect(run.stderr).toContain('the OS was configured on an earlier boot: Ready is reported');
    expect(markers(root)).toEqual([expect.stringMatching(/\.provisioned$/)]);
  });

  it('of a VM id never provisioned: ProvisioningFailed naming the file and key, to the configured fabric, exit 78', async () => {
    const run = await runAgent(fabric, { extraToml: UNRELATED_TYPE_ERROR });
    expect(run.code, run.stderr).toBe(78);
    expect(reportKinds(fabric)).toEqual(['NotReady/ProvisioningFailed']);
    expect(lastFailureDescription(fabric)).toContain('swap_size_mb');
    expect(markers(run.root)).toEqual([]);
  });
});
