import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IsoError, readFileFromIso } from '../../src/os/iso9660.js';

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
