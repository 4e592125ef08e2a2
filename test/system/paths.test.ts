/**
 * resolveInRoot on a real tree of files and symlinks: every path ends inside the root whatever the links say, as
 * after chroot(2), and what the kernel would not find is not found.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveInRoot } from '../../src/system/paths.js';

let root: string;
const at = (p: string) => path.join(root, p);
function file(p: string, text = p): void {
  mkdirSync(path.dirname(at(p)), { recursive: true });
  writeFileSync(at(p), text);
}
function link(p: string, target: string): void {
  mkdirSync(path.dirname(at(p)), { recursive: true });
  symlinkSync(target, at(p));
}

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), 'bootstate-root-'));
});
afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('resolveInRoot', () => {
  it('reads an absolute link as pointing inside the root, never at the host', () => {
    file('etc/passwd', 'image passwd');
    link('etc/bootstate/bootstate.toml', '/etc/passwd');
    expect(resolveInRoot(root, '/etc/bootstate/bootstate.toml')).toBe(at('etc/passwd'));
    expect(readFileSync(resolveInRoot(root, 'etc/bootstate/bootstate.toml'), 'utf8')).toBe('image passwd');
  });

  it('never lets `..` climb above the root, in the path or in a link', () => {
    file('etc/hostname', 'image');
    expect(resolveInRoot(root, '/../../../etc/hostname')).toBe(at('etc/hostname'));
    link('etc/a', '../../../../../../../../etc/hostname');
    expect(resolveInRoot(root, '/etc/a')).toBe(at('etc/hostname'));
    link('up', '..');
    expect(resolveInRoot(root, '/up/up/etc/hostname')).toBe(at('etc/hostname'));
  });

  it('follows relative links from the directory holding them, and links in the middle of a path', () => {
    file('usr/lib/os-release', 'image');
    link('etc/os-release', '../usr/lib/os-release');
    expect(resolveInRoot(root, '/etc/os-release')).toBe(at('usr/lib/os-release'));
    link('etc/ssh', '/usr/lib/ssh');
    file('usr/lib/ssh/sshd_config');
    expect(resolveInRoot(root, '/etc/ssh/sshd_config')).toBe(at('usr/lib/ssh/sshd_config'));
    link('lib', 'usr/lib');
    expect(resolveInRoot(root, '/lib/ssh/../os-release')).toBe(at('usr/lib/os-release'));
  });

  it('keeps a final link unfollowed with followLast: false, as lstat does', () => {
    link('etc/dangling.toml', '/nowhere/x.toml');
    expect(resolveInRoot(root, '/etc/dangling.toml', { followLast: false })).toBe(at('etc/dangling.toml'));
    expect(resolveInRoot(root, '/etc/dangling.toml')).toBe(at('nowhere/x.toml'));
  });

  it('finds nothing where the kernel would find nothing: past a missing directory or a file', () => {
    file('etc/hostname');
    file('etc/passwd');
    // path.join would turn these into etc/hostname; a chroot says ENOENT and ENOTDIR.
    expect(resolveInRoot(root, '/missing/../etc/hostname')).toBe(at('missing/etc/hostname'));
    expect(resolveInRoot(root, '/etc/passwd/../hostname')).toBe(at('etc/passwd/hostname'));
    expect(resolveInRoot(root, '/etc/passwd/../../../../x')).toBe(at('etc/passwd/x'));
  });

  it('fails with ELOOP on a link cycle instead of looping', () => {
    link('a', '/b');
    link('b', 'a');
    expect(() => resolveInRoot(root, '/a')).toThrow(expect.objectContaining({ code: 'ELOOP' }));
    expect(resolveInRoot(root, '/a', { followLast: false })).toBe(at('a'));
  });
});
