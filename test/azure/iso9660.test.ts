import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import type { Runner } from '../../src/system/exec.js';
import { IsoError, readFileFromIso } from '../../src/azure/iso9660.js';
import { readProvisioningMedia } from '../../src/azure/media.js';
import { SecretStore } from '../../src/core/secrets.js';

const OVF = '<Environment>the provisioning document</Environment>\n';
const LONG_NAME = 'A-Rock-Ridge-name-longer-than-ISO-level-1-allows.Xml';

let dir: string;
const image = (name: string) => path.join(dir, `${name}.iso`);

/** Builds an image of `content` with `xorriso -as mkisofs` and the given options. */
function mkisofs(name: string, content: string, options: string[]): void {
  execFileSync('xorriso', ['-as', 'mkisofs', '-quiet', ...options, '-V', 'rd_rdfe_stable', '-o', image(name), content], { stdio: 'pipe' });
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'iso9660-'));
  const content = path.join(dir, 'content');
  await mkdir(path.join(content, 'nested/deeper'), { recursive: true });
  await writeFile(path.join(content, 'ovf-env.xml'), OVF);
  await writeFile(path.join(content, LONG_NAME), 'long\n');
  await writeFile(path.join(content, 'nested/deeper/inner.txt'), 'inner\n');
  await writeFile(path.join(content, 'big.bin'), Buffer.alloc(5000, 7));
  mkisofs('plain', content, ['--norock', '-relaxed-filenames']);
  mkisofs('mangled', content, ['--norock']);
  mkisofs('joliet', content, ['--norock', '-J']);
  mkisofs('rockridge', content, ['-R']);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const text = async (img: string, name: string, max = 1024 * 1024) => (await readFileFromIso(image(img), name, max))?.toString('utf8') ?? null;

describe('reading one file from an ISO 9660 image without mounting it', () => {
  it('finds the plain name OVF-ENV.XML;1 when asked for ovf-env.xml, as Linux maps plain names', async () => {
    expect(await text('plain', 'ovf-env.xml')).toBe(OVF);
  });

  it('does not match a plain name whose characters were changed by mkisofs', async () => {
    expect(await text('mangled', 'ovf-env.xml')).toBeNull();
    expect(await text('mangled', 'ovf_env.xml')).toBe(OVF);
  });

  it('finds the Joliet name when the primary tree only has the mangled one', async () => {
    expect(await text('joliet', 'ovf-env.xml')).toBe(OVF);
    expect(await text('joliet', LONG_NAME)).toBe('long\n');
  });

  it('finds Rock Ridge NM names exactly, case included', async () => {
    expect(await text('rockridge', 'ovf-env.xml')).toBe(OVF);
    expect(await text('rockridge', LONG_NAME)).toBe('long\n');
    expect(await text('rockridge', LONG_NAME.toLowerCase())).toBeNull();
  });

  it('follows subdirectories in every naming scheme', async () => {
    expect(await text('plain', 'nested/deeper/inner.txt')).toBe('inner\n');
    expect(await text('joliet', 'nested/deeper/inner.txt')).toBe('inner\n');
    expect(await text('rockridge', 'nested/deeper/inner.txt')).toBe('inner\n');
  });

  it('returns null for a name the volume does not have, or that names a directory', async () => {
    expect(await text('rockridge', 'user-data')).toBeNull();
    expect(await text('rockridge', 'nested')).toBeNull();
    expect(await text('rockridge', 'ovf-env.xml/inner.txt')).toBeNull();
  });

  it('refuses a file longer than the cap with TOO_LARGE, and reads one exactly at the cap', async () => {
    await expect(readFileFromIso(image('rockridge'), 'big.bin', 4999)).rejects.toMatchObject({ name: 'IsoError', code: 'TOO_LARGE' });
    expect(await readFileFromIso(image('rockridge'), 'big.bin', 5000)).toEqual(Buffer.alloc(5000, 7));
  });

  it('rejects a file that is not an ISO 9660 volume with NOT_ISO9660', async () => {
    const notIso = path.join(dir, 'zeros.img');
    await writeFile(notIso, Buffer.alloc(64 * 1024));
    await expect(readFileFromIso(notIso, 'ovf-env.xml', 1024)).rejects.toMatchObject({ code: 'NOT_ISO9660' });
    await writeFile(notIso, 'short');
    await expect(readFileFromIso(notIso, 'ovf-env.xml', 1024)).rejects.toMatchObject({ code: 'NOT_ISO9660' });
  });

  it('rejects an image cut off before the file it lists with TRUNCATED', async () => {
    const whole = await readFile(image('plain'));
    const at = whole.indexOf(OVF);
    const cut = path.join(dir, 'cut.iso');
    await writeFile(cut, whole.subarray(0, at + 4));
    await expect(readFileFromIso(cut, 'ovf-env.xml', 1024)).rejects.toMatchObject({ code: 'TRUNCATED' });
  });
});

describe('damaged media', () => {
  /** 'clean' for a Buffer, null or an IsoError; anything else is described. */
  const outcome = async (bytes: Uint8Array): Promise<string> => {
    const file = path.join(dir, 'fuzz.iso');
    await writeFile(file, bytes);
    try {
      const read = await readFileFromIso(file, 'ovf-env.xml', 4096);
      return read === null || Buffer.isBuffer(read) ? 'clean' : `unexpected result ${String(read)}`;
    } catch (error) {
      return error instanceof IsoError ? 'clean' : `unexpected ${String(error)}`;
    }
  };

  it('never fails with anything but an IsoError on random bytes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 0, maxLength: 40 * 2048 }), async (bytes) => {
        expect(await outcome(bytes)).toBe('clean');
      }),
      { numRuns: 60 },
    );
  });

  it('never fails with anything but an IsoError when descriptors and directories are corrupted', async () => {
    const images = await Promise.all(['plain', 'joliet', 'rockridge'].map((n) => readFile(image(n))));
    // Edits land on a byte in use (neither zero nor space padding) between the first descriptor and the file data, where all metadata lies.
    const used = images.map((img) => {
      const out: number[] = [];
      for (let i = 16 * 2048; i < img.indexOf(OVF); i++) if (img[i] !== 0 && img[i] !== 0x20) out.push(i);
      return out;
    });
    const anywhere = fc.noBias(fc.nat());
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: images.length - 1 }),
        fc.array(fc.tuple(anywhere, fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 12 }),
        fc.oneof({ arbitrary: fc.constant(null), weight: 4 }, { arbitrary: anywhere, weight: 1 }),
        async (which, edits, cut) => {
          const offsets = used[which]!;
          const at = (n: number) => offsets[n % offsets.length]!;
          const bytes = Buffer.from(images[which]!);
          for (const [where, value] of edits) bytes[at(where)] = value;
          expect(await outcome(cut === null ? bytes : bytes.subarray(0, at(cut)))).toBe('clean');
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('provisioning media that cannot be mounted', () => {
  const AZURE_OVF = `<?xml version="1.0" encoding="utf-8"?>
<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1" xmlns:wa="http://schemas.microsoft.com/windowsazure">
  <wa:ProvisioningSection>
    <LinuxProvisioningConfigurationSet xmlns="http://schemas.microsoft.com/windowsazure">
      <HostName>iso-host</HostName>
      <UserName>isouser</UserName>
      <UserPassword>from-userspace</UserPassword>
    </LinuxProvisioningConfigurationSet>
  </wa:ProvisioningSection>
</Environment>
`;

  /** blkid lists `device` as ISO 9660; mount fails as it does without the iso9660 module. */
  const noIsoKernel = (device: string, calls: string[][]): Runner => async (argv) => {
    calls.push(argv);
    if (argv[0] === 'mount') throw new BootstateError('SUBPROCESS_FAILED', 'mount: unknown filesystem type iso9660');
    const stdout = argv[0] === 'blkid' && argv.includes('TYPE=iso9660') ? `${device}\n` : '';
    return { argv, exitCode: 0, signal: null, stdout, stderr: '', endedBy: 'exit' };
  };

  async function mediaImage(name: string, files: Record<string, string | Buffer>): Promise<string> {
    const content = path.join(dir, `${name}-content`);
    await mkdir(content);
    for (const [file, data] of Object.entries(files)) await writeFile(path.join(content, file), data);
    mkisofs(name, content, []);
    return image(name);
  }

  const read = async (device: string, notes: string[] = [], calls: string[][] = [], secrets = new SecretStore()) => {
    const root = await mkdtemp(path.join(dir, 'root-'));
    return readProvisioningMedia({ secrets, root, run: noIsoKernel(device, calls), onNote: (n) => notes.push(n) });
  };

  it('reads ovf-env.xml from the device itself after the mount fails, password included', async () => {
    const device = await mediaImage('media-ok', { 'ovf-env.xml': AZURE_OVF });
    const secrets = new SecretStore();
    const calls: string[][] = [];
    const media = await read(device, [], calls, secrets);
    expect(calls.some((c) => c[0] === 'mount')).toBe(true);
    expect(media).toMatchObject({ username: 'isouser', hostname: 'iso-host', passwordProvided: true, device });
    expect(secrets.withPassword((b) => b.toString('utf8'))).toBe('from-userspace');
  });

  it('reports an ovf-env.xml above the size cap as OVF_INVALID, as a mounted one would be', async () => {
    const device = await mediaImage('media-big', { 'ovf-env.xml': Buffer.alloc(1024 * 1024 + 1, 0x20) });
    await expect(read(device)).rejects.toMatchObject({ code: 'OVF_INVALID' });
  });

  it('skips a device it can neither mount nor read as ISO 9660 (UDF, say), with a note naming both failures', async () => {
    const device = path.join(dir, 'udf-like.img');
    await writeFile(device, Buffer.alloc(64 * 1024));
    const notes: string[] = [];
    expect(await read(device, notes)).toBeNull();
    expect(notes).toEqual([expect.stringMatching(/cannot mount .*unknown filesystem type iso9660.*reading it as ISO 9660 failed too: no ISO 9660 volume descriptor/)]);
  });

  it('notes an ISO 9660 device without ovf-env.xml and returns null', async () => {
    const device = await mediaImage('media-empty', { 'README.TXT': 'not provisioning media\n' });
    const notes: string[] = [];
    expect(await read(device, notes)).toBeNull();
    expect(notes).toEqual([`${device}: no ovf-env.xml`]);
  });
});
