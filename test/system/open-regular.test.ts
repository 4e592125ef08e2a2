/** openRegularSync refuses what is not a regular file with one name, and says so in plain words. */
import { execFileSync } from 'node:child_process';
import { closeSync, linkSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openRegularSync, UnexpectedFileError } from '../../src/system/open-regular.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'open-regular-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function refusal(file: string): string {
  try {
    closeSync(openRegularSync(file, { flags: 0 }));
  } catch (error) {
    expect(error).toBeInstanceOf(UnexpectedFileError);
    return (error as Error).message;
  }
  throw new Error(`${file} was opened`);
}

describe('UnexpectedFileError messages', () => {
  it('read as English: "it is not a regular file", "it is a symlink", "it is a hard link"', () => {
    const fifo = path.join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    expect(refusal(fifo)).toBe(`refusing ${fifo}: it is not a regular file (fifo)`);
    const file = path.join(dir, 'file');
    writeFileSync(file, '');
    const link = path.join(dir, 'link');
    symlinkSync(file, link);
    expect(refusal(link)).toBe(`refusing ${link}: it is a symlink`);
    linkSync(file, path.join(dir, 'second-name'));
    expect(refusal(file)).toBe(`refusing ${file}: it is a hard link (2 names)`);
    const sub = path.join(dir, 'sub');
    mkdirSync(sub);
    expect(refusal(sub)).toMatch(/: it is (a directory|not a regular file \(directory\))$/);
    expect(new UnexpectedFileError('/x', 'not a directory').message).toBe('refusing /x: it is not a directory');
    expect(new UnexpectedFileError('/x', 'not a regular file (fifo)').message).not.toContain('a not a');
  });
});
