import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { writeFileAtomic } from '../../src/system/atomic.js';
import { removeAllOnExit } from '../../src/system/exit-cleanup.js';

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

  // A SIGTERM mid-save once left a decoded user-data temp file in the data directory.
  describe('leaves no temp file when the write is interrupted', () => {
    it('by its abort signal: the write stops, the temp file is removed, the target stays as it was', async () => {
      const dir = await temp();
      const file = path.join(dir, 'UserData');
      await writeFile(file, 'old');
      const controller = new AbortController();
      let sawTemp = false;
      const write = writeFileAtomic(file, 'new', {
        mode: 0o600,
        signal: controller.signal,
        validate: async (t) => {
          sawTemp = (await readdir(dir)).includes(path.basename(t));
          controller.abort();
        },
      });
      await expect(write).rejects.toMatchObject({ name: 'AbortError' });
      expect(sawTemp).toBe(true);
      expect(await readdir(dir)).toEqual(['UserData']);
      expect(await readFile(file, 'utf8')).toBe('old');
    });

    it('by a signal aborted before it starts: nothing is created', async () => {
      const dir = await temp();
      await expect(writeFileAtomic(path.join(dir, 'UserData'), 'x', { mode: 0o600, signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' });
      expect(await readdir(dir)).toEqual([]);
    });

    it('by the process exiting: the exit hook removes the temp files of writes still in flight', async () => {
      const dir = await temp();
      let release!: () => void;
      const paused = new Promise<void>((resolve) => (release = resolve));
      let reached!: () => void;
      const inValidate = new Promise<void>((resolve) => (reached = resolve));
      const write = writeFileAtomic(path.join(dir, 'UserData'), 'x', { mode: 0o600, validate: () => (reached(), paused) });
      await inValidate;
      expect(process.listeners('exit')).toContain(removeAllOnExit);
      expect(await readdir(dir)).toEqual([expect.stringMatching(/^\.UserData\.[0-9a-f]{12}\.tmp$/)]);
      removeAllOnExit(); // what process.exit() runs
      expect(await readdir(dir)).toEqual([]);
      release();
      await expect(write).rejects.toMatchObject({ code: 'ENOENT' });
      expect(await readdir(dir)).toEqual([]);
    });

    it('by process.exit() in the middle of the write, in a real process', async () => {
      const dir = await temp();
      const script = [
        `import { writeFileAtomic } from ${JSON.stringify(path.resolve('src/system/atomic.ts'))};`,
        `await writeFileAtomic(${JSON.stringify(path.join(dir, 'UserData'))}, Buffer.alloc(1 << 20, 1), { mode: 0o600, validate: async () => process.exit(3) });`,
      ].join('\n');
      const run = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script]).then(
        () => 0,
        (error: { code?: number }) => error.code,
      );
      expect(run).toBe(3);
      expect(await readdir(dir)).toEqual([]);
    });
  });
});
