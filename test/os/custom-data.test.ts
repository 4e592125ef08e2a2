import fc from 'fast-check';
import { watch } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, type Config } from '../../src/config/defaults.js';
import { customDataTargets, decodeBase64Data, saveCustomData } from '../../src/os/custom-data.js';
import { parseOvfEnv } from '../../src/azure/ovf.js';
import { parseInstanceMetadata } from '../../src/azure/imds.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { ovfDocument } from '../../src/fabric/ovf-document.js';
import { SecretStore } from '../../src/core/secrets.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'bootstate-cd-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const configFor = (changes: Partial<Config['custom_data']> = {}): Config => ({
  ...DEFAULT_CONFIG,
  data_dir: { path: path.join(dir, 'data') },
  custom_data: { ...DEFAULT_CONFIG.custom_data, ...changes },
});
const owner = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };

describe('decoding custom data', () => {
  it('gives back any bytes however the base64 is wrapped with whitespace', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), fc.array(fc.constantFrom(' ', '\n', '\r\n', '\t'), { maxLength: 40 }), (bytes, spaces) => {
        const text = Buffer.from(bytes).toString('base64');
        let wrapped = '';
        for (const [i, ch] of [...text].entries()) wrapped += ch + (spaces[i % Math.max(1, spaces.length)] ?? '');
        expect(decodeBase64Data(wrapped)).toEqual(Buffer.from(bytes));
      }),
    );
  });

  it('refuses text that is not base64 instead of guessing', () => {
    for (const bad of ['abc', 'a$bc', '====', 'YWJj=ZA==']) expect(decodeBase64Data(bad)).toBeNull();
  });

  it('puts OVF CustomData into the secret store only, and keeps CustomData that is not base64 as received', () => {
    const secrets = new SecretStore();
    const media = parseOvfEnv(ovfDocument({ username: 'u', hostname: 'h', customData: Buffer.from('#!/bin/sh\necho hi\n') }), { secrets });
    expect(media.customDataPresent).toBe(true);
    expect(JSON.stringify(media)).not.toContain('echo hi');
    expect(secrets.with('customData', (b) => b.toString())).toBe('#!/bin/sh\necho hi\n');
    const broken = ovfDocument({ username: 'u', hostname: 'h' }).replace('</SSH>', '</SSH><CustomData>not*base64</CustomData>');
    const kept = new SecretStore();
    const verbatim = parseOvfEnv(broken, { secrets: kept });
    expect(verbatim).toMatchObject({ username: 'u', customDataPresent: true, customDataEncoding: 'verbatim' });
    expect(kept.with('customData', (b) => b.toString())).toBe('not*base64');
  });

  it('puts IMDS compute.userData into the secret store and flags a value that is not base64', () => {
    const doc = exampleImdsDocument();
    doc.compute.userData = Buffer.from('user data').toString('base64');
    const secrets = new SecretStore();
    const metadata = parseInstanceMetadata(JSON.stringify(doc), secrets);
    expect(metadata.userData).toBe('present');
    expect(JSON.stringify(metadata)).not.toContain(doc.compute.userData);
    expect(secrets.with('userData', (b) => b.toString())).toBe('user data');
    doc.compute.userData = '%%%';
    expect(parseInstanceMetadata(JSON.stringify(doc), new SecretStore()).userData).toBe('invalid');
    doc.compute.userData = '';
    expect(parseInstanceMetadata(JSON.stringify(doc)).userData).toBeUndefined();
  });
});

describe('saving custom data', () => {
  it('writes each piece held, byte for byte, 0600, in a 0700 directory, and nothing when none is held', async () => {
    const secrets = new SecretStore();
    expect((await saveCustomData(configFor(), secrets, { root: dir, rootOwner: owner })).detail).toBe('no custom data or user data to save');
    const bytes = Buffer.from([0, 1, 2, 255, 10, 13]);
    secrets.set('customData', bytes);
    secrets.set('userData', Buffer.from('ud'));
    const result = await saveCustomData(configFor(), secrets, { root: dir, rootOwner: owner });
    expect(await readFile(path.join(dir, 'data/CustomData'))).toEqual(bytes);
    expect(await readFile(path.join(dir, 'data/UserData'), 'utf8')).toBe('ud');
    expect((await stat(path.join(dir, 'data/CustomData'))).mode & 0o777).toBe(0o600);
    expect((await stat(path.join(dir, 'data'))).mode & 0o777).toBe(0o700);
    expect(result.detail).toContain('(6 bytes)');
    expect(result.detail).not.toContain('ud,');
  });

  it('honours configured paths and also writes WALinuxAgent\'s copy, under the root, with waagent_compat', async () => {
    const config = configFor({ custom_data_path: path.join(dir, 'elsewhere/cd'), waagent_compat: true });
    expect(customDataTargets(config).map((t) => t.path)).toEqual([path.join(dir, 'elsewhere/cd'), path.join(dir, 'data/UserData'), '/var/lib/waagent/CustomData']);
    const secrets = new SecretStore();
    secrets.set('customData', Buffer.from('cd'));
    await saveCustomData(config, secrets, { root: path.join(dir, 'root'), rootOwner: owner });
    expect(await readFile(path.join(dir, 'elsewhere/cd'), 'utf8')).toBe('cd');
    expect(await readFile(path.join(dir, 'root/var/lib/waagent/CustomData'), 'utf8')).toBe('cd');
    expect((await stat(path.join(dir, 'root/var/lib/waagent/CustomData'))).mode & 0o777).toBe(0o600);
  });

  it('fails with CUSTOM_DATA_FAILED naming the path, never the content, when the target cannot be written', async () => {
    const secrets = new SecretStore();
    secrets.set('customData', Buffer.from('secret-content'));
    await writeFile(path.join(dir, 'a-file'), '');
    const config = configFor({ custom_data_path: path.join(dir, 'a-file/CustomData') });
    const error = await saveCustomData(config, secrets, { root: dir, rootOwner: owner }).catch((e: unknown) => e as Error & { code: string; data: unknown });
    expect(error).toMatchObject({ code: 'CUSTOM_DATA_FAILED' });
    expect(JSON.stringify((error as { data: unknown }).data)).toContain('a-file/CustomData');
    expect(`${(error as Error).message}${JSON.stringify((error as { data: unknown }).data)}`).not.toContain('secret-content');
  });

  // A SIGTERM soon after start once left a decoded user-data temp file in the data directory.
  it('stops when its step is abandoned (the signal aborted mid-write), leaving no temp file and no partial file', async () => {
    const secrets = new SecretStore();
    secrets.set('userData', Buffer.alloc(32 << 20, 0x61));
    const data = path.join(dir, 'data');
    await mkdir(data);
    const controller = new AbortController();
    // Abort the moment the temp file appears, while its 32 MiB are still being written.
    const watcher = watch(data, (_event, name) => {
      if (name?.endsWith('.tmp')) controller.abort();
    });
    try {
      const error = await saveCustomData(configFor(), secrets, { root: dir, rootOwner: owner }, controller.signal).then(() => null, (e: unknown) => e);
      expect(controller.signal.aborted).toBe(true);
      expect(error).toMatchObject({ name: 'AbortError' });
    } finally {
      watcher.close();
    }
    expect(await readdir(data)).toEqual([]);
  });

  it('writes nothing once its signal is aborted', async () => {
    const secrets = new SecretStore();
    secrets.set('customData', Buffer.from('cd'));
    await expect(saveCustomData(configFor(), secrets, { root: dir, rootOwner: owner }, AbortSignal.abort())).rejects.toMatchObject({ name: 'AbortError' });
    expect(await readdir(dir)).toEqual([]);
  });
});
