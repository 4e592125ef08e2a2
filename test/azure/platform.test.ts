/** Whether this is an Azure VM (src/azure/platform.ts), from a sysfs tree written for each case. */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, type Config } from '../../src/config/defaults.js';
import { AZURE_CHASSIS_ASSET_TAG, checkPlatform } from '../../src/azure/platform.js';

const roots: string[] = [];
async function sysRoot(tag: string | null): Promise<string> {
  const root = await mkdtemp(path.join(tmpdir(), 'bootstate-platform-'));
  roots.push(root);
  await mkdir(path.join(root, 'sys/class/dmi/id'), { recursive: true });
  await mkdir(path.join(root, 'sys/class/block'), { recursive: true });
  if (tag !== null) await writeFile(path.join(root, 'sys/class/dmi/id/chassis_asset_tag'), `${tag}\n`);
  return root;
}
const noMedia = async () => ({ udf: [], iso9660: [] });
const withConfig = (patch: Partial<Config>): Config => ({ ...DEFAULT_CONFIG, ...patch });

afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
});

describe('checkPlatform', () => {
  it("is on Azure with Azure's chassis asset tag, without looking at the block devices", async () => {
    const probe = () => Promise.reject(new Error('must not be asked'));
    expect(await checkPlatform(DEFAULT_CONFIG, await sysRoot(AZURE_CHASSIS_ASSET_TAG), probe)).toEqual({ onAzure: true, why: "the DMI chassis asset tag is Azure's" });
  });

  it('is not on Azure with another tag or none, and says which', async () => {
    expect(await checkPlatform(DEFAULT_CONFIG, await sysRoot('Default string'), noMedia)).toEqual({
      onAzure: false,
      why: `the DMI chassis asset tag is "Default string", not Azure's ${AZURE_CHASSIS_ASSET_TAG}`,
    });
    expect(await checkPlatform(DEFAULT_CONFIG, await sysRoot(null), noMedia)).toEqual({
      onAzure: false,
      why: 'no DMI chassis asset tag (/sys/class/dmi/id/chassis_asset_tag unreadable)',
    });
  });

  it('a UDF or ISO 9660 device may be the provisioning media: then the run goes on (unless media reading is off)', async () => {
    const media = async () => ({ udf: [], iso9660: ['/dev/sr0'] });
    const root = await sysRoot('');
    expect(await checkPlatform(DEFAULT_CONFIG, root, media)).toMatchObject({ onAzure: true, why: expect.stringContaining("/dev/sr0 may be Azure's provisioning media") });
    const off = withConfig({ provisioning_media: { ...DEFAULT_CONFIG.provisioning_media, enable: false } });
    expect(await checkPlatform(off, root, media)).toMatchObject({ onAzure: false });
  });

  it('the configuration can say otherwise: check = false, or endpoints of its own', async () => {
    const root = await sysRoot('');
    expect(await checkPlatform(withConfig({ platform: { check: false } }), root, noMedia)).toMatchObject({ onAzure: true });
    expect(await checkPlatform(withConfig({ imds: { ...DEFAULT_CONFIG.imds, endpoint: 'http://127.0.0.1:8080/metadata/instance' } }), root, noMedia)).toMatchObject({ onAzure: true });
    expect(await checkPlatform(withConfig({ wireserver: { ...DEFAULT_CONFIG.wireserver, address: '127.0.0.1' } }), root, noMedia)).toMatchObject({ onAzure: true });
  });

  it('reads the real block devices of the root when not told how', async () => {
    // An empty /sys/class/block: no media, so no Azure.
    expect(await checkPlatform(DEFAULT_CONFIG, await sysRoot('none'))).toMatchObject({ onAzure: false });
  });
});
