import { mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { writeFileAtomic } from '../../src/os/atomic.js';

const dirs: string[] = [];
async function temp(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'atomic-'));
  dirs.push(dir);
  return dir;
}
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

describe('writeFileAtomic', () => {
  it('replaces the file with the given mode and leaves no temp file', async () => {
    const dir = await temp();
    const file = path.join(dir, 'conf');
    await writeFile(file, 'old', { mode: 0o644 });
    await writeFileAtomic(file, 'new\n', { mode: 0o440 });
    expect(await readFile(file, 'utf8')).toBe('new\n');
    expect((await stat(file)).mode & 0o777).toBe(0o440);
    expect(await readdir(dir)).toEqual(['conf']);
  });

  it('keeps the old file untouched when validation of the new content fails', async () => {
    const dir = await temp();
    const file = path.join(dir, 'sudoers-rule');
    await writeFile(file, 'old');
    const failing = writeFileAtomic(file, 'broken', { mode: 0o440, validate: async () => Promise.reject(new Error('visudo says no')) });
    await expect(failing).rejects.toThrow('visudo says no');
    expect(await readFile(file, 'utf8')).toBe('old');
    expect(await readdir(dir)).toEqual(['sudoers-rule']);
  });

  it('replaces a symlink at the target instead of writing through it', async () => {
    const dir = await temp();
    const victim = path.join(dir, 'victim');
    await writeFile(victim, 'keep');
    await symlink(victim, path.join(dir, 'hostname'));
    await writeFileAtomic(path.join(dir, 'hostname'), 'web-01\n', { mode: 0o644 });
    expect(await readFile(victim, 'utf8')).toBe('keep');
    expect(await readFile(path.join(dir, 'hostname'), 'utf8')).toBe('web-01\n');
  });

  it('names its temp file with a leading dot and an inner dot so sudoers.d and *.conf includes skip it', async () => {
    const dir = await temp();
    let seen = '';
    await writeFileAtomic(path.join(dir, '90-rule'), 'x', { mode: 0o440, validate: async (t) => void (seen = path.basename(t)) });
    expect(seen).toMatch(/^\.90-rule\.[0-9a-f]+\.tmp$/);
  });

  it('sweeps the temp files a killed run left for the same name, and only those', async () => {
    const dir = await temp();
    await writeFile(path.join(dir, '.hostname.0123456789ab.tmp'), 'half');
    await writeFile(path.join(dir, '.hostname.backup'), 'someone else');
    await writeFile(path.join(dir, '.hostnamex.0123456789ab.tmp'), 'another name');
    await writeFileAtomic(path.join(dir, 'hostname'), 'web-01\n', { mode: 0o644 });
    expect((await readdir(dir)).sort()).toEqual(['.hostname.backup', '.hostnamex.0123456789ab.tmp', 'hostname']);
  });
});
