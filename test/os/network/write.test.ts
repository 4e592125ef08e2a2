/**
 * writeNetworkFiles against a real temp root: rendered files land with their modes, an unchanged file is left as it
 * was (same inode), bootstate's earlier files not rendered now go, anything else stays, and no symlink planted at a
 * name or on the way is followed.
 */
import { chmod, lstat, mkdir, mkdtemp, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RenderedFile } from '../../../src/os/network/types.js';
import { writeNetworkFiles } from '../../../src/os/network/write.js';

let root: string;
let outside: string;
const owner = { uid: process.getuid!(), gid: process.getgid!() };
const at = (p: string) => path.join(root, p);

const file = (name: string, text: string, mode = 0o644): RenderedFile => ({
  path: `/etc/systemd/network/${name}`,
  text,
  mode,
  interfaces: [name.replace(/^\d+-bootstate-|\.network$/g, '')],
});

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'bootstate-netwrite-'));
  outside = await mkdtemp(path.join(tmpdir(), 'bootstate-netwrite-outside-'));
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

describe('writeNetworkFiles', () => {
  it('writes every rendered file with its mode, making the directories on the way', async () => {
    const eth1 = file('50-bootstate-eth1.network', '[Match]\nName=eth1\n');
    const secret = { ...file('50-bootstate-eth2.network', 'x\n', 0o600), path: '/etc/NetworkManager/system-connections/bootstate-eth2.nmconnection' };
    const change = await writeNetworkFiles(root, [eth1, secret], [], { owner });
    expect(change).toEqual({ written: [eth1, secret], removed: [], unchanged: [] });
    expect(await readFile(at(eth1.path), 'utf8')).toBe(eth1.text);
    expect((await stat(at(eth1.path))).mode & 0o7777).toBe(0o644);
    expect((await stat(at(secret.path))).mode & 0o7777).toBe(0o600);
  });

  it('leaves a file whose text and mode are already the rendered ones alone, and rewrites one whose mode differs', async () => {
    const eth0 = file('50-bootstate-eth0.network', 'a\n');
    const eth1 = file('50-bootstate-eth1.network', 'b\n');
    await writeNetworkFiles(root, [eth0, eth1], [], { owner });
    const inode = (await stat(at(eth0.path))).ino;
    await chmod(at(eth1.path), 0o666);
    const change = await writeNetworkFiles(root, [eth0, eth1], [eth0.path, eth1.path], { owner });
    expect(change).toEqual({ written: [eth1], removed: [], unchanged: [eth0.path] });
    expect((await stat(at(eth0.path))).ino).toBe(inode);
    expect((await stat(at(eth1.path))).mode & 0o7777).toBe(0o644);
  });

  it('removes earlier files of bootstate that are not rendered now, and nothing it does not own', async () => {
    const eth1 = file('50-bootstate-eth1.network', 'b\n');
    const eth2 = file('50-bootstate-eth2.network', 'c\n');
    await writeNetworkFiles(root, [eth1, eth2], [], { owner });
    await writeFile(at('/etc/systemd/network/80-image.network'), 'image\n');
    const change = await writeNetworkFiles(root, [eth1], [eth1.path, eth2.path, '/etc/systemd/network/50-bootstate-eth9.network'], { owner });
    expect(change).toEqual({ written: [], removed: [eth2.path], unchanged: [eth1.path] });
    await expect(lstat(at(eth2.path))).rejects.toThrow(/ENOENT/);
    expect(await readFile(at('/etc/systemd/network/80-image.network'), 'utf8')).toBe('image\n');
  });

  it('tells beforeChange the old text of a file it replaces or removes, before it does', async () => {
    const eth1 = file('50-bootstate-eth1.network', 'old 1\n');
    const eth2 = file('50-bootstate-eth2.network', 'old 2\n');
    await writeNetworkFiles(root, [eth1, eth2], [], { owner });
    const seen: string[] = [];
    const beforeChange = async (p: string, previous: string) => {
      seen.push(`${p}: ${previous.trim()} (on disk: ${(await readFile(at(p), 'utf8')).trim()})`);
    };
    await writeNetworkFiles(root, [{ ...eth1, text: 'new 1\n' }], [eth1.path, eth2.path], { owner, beforeChange });
    expect(seen).toEqual([`${eth1.path}: old 1 (on disk: old 1)`, `${eth2.path}: old 2 (on disk: old 2)`]);
  });

  it('replaces a symlink planted at a file name instead of writing through it', async () => {
    const eth1 = file('50-bootstate-eth1.network', 'ours\n');
    await mkdir(path.dirname(at(eth1.path)), { recursive: true });
    await writeFile(path.join(outside, 'victim'), 'victim\n');
    await symlink(path.join(outside, 'victim'), at(eth1.path));
    const change = await writeNetworkFiles(root, [eth1], [], { owner });
    expect(change.written).toEqual([eth1]);
    expect((await lstat(at(eth1.path))).isFile()).toBe(true);
    expect(await readFile(path.join(outside, 'victim'), 'utf8')).toBe('victim\n');
  });

  it('refuses a directory on the way that is a symlink, writing nothing where it points', async () => {
    await mkdir(at('/etc/systemd'), { recursive: true });
    await symlink(outside, at('/etc/systemd/network'));
    await expect(writeNetworkFiles(root, [file('50-bootstate-eth1.network', 'x\n')], [], { owner })).rejects.toThrow(/symlink/);
    await expect(lstat(path.join(outside, '50-bootstate-eth1.network'))).rejects.toThrow(/ENOENT/);
  });

  it('removes a symlink at an owned name, never the file it points to, and nothing through a linked directory', async () => {
    await mkdir(at('/etc/systemd/network'), { recursive: true });
    await writeFile(path.join(outside, 'victim'), 'victim\n');
    await symlink(path.join(outside, 'victim'), at('/etc/systemd/network/50-bootstate-eth3.network'));
    await mkdir(at('/etc/network'), { recursive: true });
    await symlink(outside, at('/etc/network/interfaces.d'));
    const change = await writeNetworkFiles(root, [], ['/etc/systemd/network/50-bootstate-eth3.network', '/etc/network/interfaces.d/victim'], { owner });
    expect(change.removed).toEqual(['/etc/systemd/network/50-bootstate-eth3.network']);
    expect(await readFile(path.join(outside, 'victim'), 'utf8')).toBe('victim\n');
    expect(await readlink(at('/etc/network/interfaces.d'))).toBe(outside);
  });
});
