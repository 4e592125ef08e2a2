import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RunOptions, RunResult, Runner } from '../../src/system/exec.js';
import { findMediaCandidates, readProvisioningMedia } from '../../src/azure/media.js';
import { SecretStore } from '../../src/core/secrets.js';
import { canSandbox, createSandbox, runTsInSandbox, type Sandbox } from '../e2e/ns.js';
import { specExample } from '../os/fixtures/ovf.js';

const roots: string[] = [];
async function fakeRoot(mounts = ''): Promise<string> {
  const root = await mkdtemp(path.join(tmpdir(), 'media-'));
  roots.push(root);
  await mkdir(path.join(root, 'proc/self'), { recursive: true });
  await writeFile(path.join(root, 'proc/self/mounts'), mounts);
  return root;
}
afterEach(async () => {
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

function runner(blkid: Record<string, string>, calls: string[][] = []): Runner {
  return async (argv: string[], _options?: RunOptions): Promise<RunResult> => {
    calls.push(argv);
    const type = argv.find((a) => a.startsWith('TYPE='))?.slice(5) ?? '';
    const stdout = argv[0] === 'blkid' ? (blkid[type] ?? '') : '';
    return { argv, exitCode: argv[0] === 'blkid' && !stdout ? 2 : 0, signal: null, stdout, stderr: '', endedBy: 'exit' };
  };
}

describe('provisioning media discovery', () => {
  it('returns null, not an error, when there is no media at all', async () => {
    const calls: string[][] = [];
    expect(await readProvisioningMedia({ secrets: new SecretStore(), root: await fakeRoot(), run: runner({}, calls) })).toBeNull();
    expect(calls.map((c) => c[0])).toEqual(['blkid', 'blkid']);
  });

  it('lists blkid UDF, then ISO 9660, then /dev/sr0, then mounted copies, once each', async () => {
    const root = await fakeRoot('/dev/sr1 /media/cd\\040rom iso9660 ro 0 0\n/dev/sda1 / ext4 rw 0 0\n/dev/sr0 /mnt udf ro 0 0\n');
    await mkdir(path.join(root, 'dev'));
    await writeFile(path.join(root, 'dev/sr0'), '');
    const candidates = await findMediaCandidates({ root, run: runner({ udf: '/dev/sr0\n', iso9660: '/dev/sdb\n' }) });
    expect(candidates).toEqual([
      { device: '/dev/sr0', mountedAt: '/mnt' },
      { device: '/dev/sdb' },
      { device: '/dev/sr1', mountedAt: '/media/cd rom' },
    ]);
  });

  it('reads ovf-env.xml from media that is already mounted without mounting it again', async () => {
    const root = await fakeRoot('/dev/sr0 /mnt/cdrom udf ro 0 0\n');
    await mkdir(path.join(root, 'mnt/cdrom'), { recursive: true });
    await writeFile(path.join(root, 'mnt/cdrom/ovf-env.xml'), specExample({ password: 'pw' }));
    const calls: string[][] = [];
    const secrets = new SecretStore();
    const media = await readProvisioningMedia({ secrets, root, run: runner({}, calls) });
    expect(media).toMatchObject({ username: 'azureuser', device: '/dev/sr0', passwordProvided: true });
    expect(secrets.hasPassword()).toBe(true);
    expect(calls.some((c) => c[0] === 'mount')).toBe(false);
  });

  it('reports invalid ovf-env.xml on the media as OVF_INVALID', async () => {
    const root = await fakeRoot('/dev/sr0 /mnt/cdrom udf ro 0 0\n');
    await mkdir(path.join(root, 'mnt/cdrom'), { recursive: true });
    await writeFile(path.join(root, 'mnt/cdrom/ovf-env.xml'), '<!DOCTYPE x [<!ENTITY a "b">]><x/>');
    await expect(readProvisioningMedia({ secrets: new SecretStore(), root, run: runner({}) })).rejects.toMatchObject({ code: 'OVF_INVALID' });
  });
});

describe.skipIf(!canSandbox)('provisioning media on a real ISO image, mounted inside the sandbox', () => {
  let sandbox: Sandbox;
  let iso: string;
  beforeAll(async () => {
    sandbox = await createSandbox();
    const content = path.join(sandbox.root, 'iso-content');
    await mkdir(content);
    await writeFile(path.join(content, 'ovf-env.xml'), specExample({ password: 'from-the-iso' }));
    iso = path.join(sandbox.root, 'ovf.iso');
    execFileSync('xorriso', ['-as', 'mkisofs', '-quiet', '-V', 'rd_rdfe_stable', '-o', iso, content], { stdio: 'pipe' });
  });
  afterAll(async () => sandbox?.cleanup());

  // Without iso9660 in the kernel the fixture extracts the image instead of mounting it (see the fixture).
  it('mounts read-only in a private directory, reads the document, unmounts and removes the directory', async () => {
    const result = await runTsInSandbox(sandbox, path.join(import.meta.dirname, '../os/fixtures/read-media.ts'), [iso]);
    expect(result.exitCode, result.stderr).toBe(0);
    const out = JSON.parse(result.stdout) as { ok: Record<string, unknown>; password: string; mounts: string };
    expect(out.ok).toMatchObject({ username: 'azureuser', hostname: 'web-01', passwordProvided: true, customDataPresent: true, device: iso });
    expect(out.password).toBe('from-the-iso');
    expect(out.mounts).toBe('');
    expect(await readdir(sandbox.hostPath('/run/bootstate'))).toEqual([]);
  });
});
