import { lstat, mkdir, mkdtemp, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { chooseKeysFile, writeAuthorizedKeys, type AuthorizedKeysTarget } from '../../../src/os/ssh/ssh-keys.js';
import { keyLine } from '../keys.js';

const uid = process.getuid!();
const gid = process.getgid!();
const roots: string[] = [];

async function tree(): Promise<{ root: string; target: AuthorizedKeysTarget; homeOnHost: string }> {
  const root = await mkdtemp(path.join(tmpdir(), 'sshkeys-'));
  roots.push(root);
  const homeOnHost = path.join(root, 'home/alice');
  await mkdir(homeOnHost, { recursive: true, mode: 0o750 });
  const target = { username: 'alice', uid, gid, home: '/home/alice', paths: ['/home/alice/.ssh/authorized_keys'], root };
  return { root, target, homeOnHost };
}
afterEach(async () => {
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

describe('writeAuthorizedKeys', () => {
  it('creates .ssh 0700 and authorized_keys 0600 owned by the user, one key per line', async () => {
    const { target, homeOnHost } = await tree();
    const keys = [keyLine(), keyLine('ssh-rsa')];
    const result = await writeAuthorizedKeys(target, keys);
    expect(result).toEqual({ path: '/home/alice/.ssh/authorized_keys', added: 2, total: 2, warnings: [] });
    const dir = await stat(path.join(homeOnHost, '.ssh'));
    const file = await stat(path.join(homeOnHost, '.ssh/authorized_keys'));
    expect([dir.mode & 0o777, dir.uid, file.mode & 0o777, file.uid]).toEqual([0o700, uid, 0o600, uid]);
    expect(await readFile(path.join(homeOnHost, '.ssh/authorized_keys'), 'utf8')).toBe(`${keys.join('\n')}\n`);
  });

  it('merges with existing keys, keeps foreign lines and never duplicates a key', async () => {
    const { target, homeOnHost } = await tree();
    const old = keyLine('ssh-ed25519', 'old');
    await mkdir(path.join(homeOnHost, '.ssh'), { mode: 0o755 });
    await writeFile(path.join(homeOnHost, '.ssh/authorized_keys'), `# mine\n${old}\r\n`);
    const fresh = keyLine();
    const sameKeyOtherComment = old.replace(/ old$/, ' renamed');
    const result = await writeAuthorizedKeys(target, [fresh, sameKeyOtherComment, fresh]);
    expect(result.added).toBe(1);
    expect(await readFile(path.join(homeOnHost, '.ssh/authorized_keys'), 'utf8')).toBe(`# mine\n${old}\n${fresh}\n`);
    expect((await stat(path.join(homeOnHost, '.ssh'))).mode & 0o777).toBe(0o700);
  });

  it('refuses a .ssh symlink planted to point outside the home and writes nothing there', async () => {
    const { root, target, homeOnHost } = await tree();
    const outside = path.join(root, 'etc/victim');
    await mkdir(outside, { recursive: true });
    await symlink(outside, path.join(homeOnHost, '.ssh'));
    await expect(writeAuthorizedKeys(target, [keyLine()])).rejects.toMatchObject({ code: 'SSH_KEYS_FAILED', message: expect.stringContaining('symlink') });
    await expect(stat(path.join(outside, 'authorized_keys'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await readlink(path.join(homeOnHost, '.ssh'))).toBe(outside);
  });

  it('refuses an authorized_keys symlink pointing outside the home', async () => {
    const { root, target, homeOnHost } = await tree();
    const victim = path.join(root, 'etc-shadow');
    await writeFile(victim, 'root:*:1::::::\n');
    await mkdir(path.join(homeOnHost, '.ssh'));
    await symlink(victim, path.join(homeOnHost, '.ssh/authorized_keys'));
    await expect(writeAuthorizedKeys(target, [keyLine()])).rejects.toMatchObject({ code: 'SSH_KEYS_FAILED' });
    expect(await readFile(victim, 'utf8')).toBe('root:*:1::::::\n');
    expect((await lstat(path.join(homeOnHost, '.ssh/authorized_keys'))).isSymbolicLink()).toBe(true);
  });

  it("takes group and world write off a home the user owns, so sshd's StrictModes accepts the keys, and says so", async () => {
    const { target, homeOnHost } = await tree();
    const { chmod } = await import('node:fs/promises');
    await chmod(homeOnHost, 0o777);
    const result = await writeAuthorizedKeys(target, [keyLine()]);
    expect((await stat(homeOnHost)).mode & 0o7777).toBe(0o755);
    expect(result.warnings).toEqual(["/home/alice was writable by group or others (mode 0777); made 0755 so sshd's StrictModes accepts its keys"]);
  });

  it('refuses a writable home owned by someone else (root here), writing nothing, naming the reason', async () => {
    const { target, homeOnHost } = await tree();
    const { chmod } = await import('node:fs/promises');
    await chmod(homeOnHost, 0o775);
    const other = { ...target, uid: uid + 1, rootOwner: { uid, gid } };
    await expect(writeAuthorizedKeys(other, [keyLine()])).rejects.toMatchObject({
      code: 'SSH_KEYS_FAILED',
      message: expect.stringMatching(/writable by group or others \(mode 0775\) and owned by uid \d+, not alice: sshd's StrictModes/),
    });
    expect((await stat(homeOnHost)).mode & 0o7777).toBe(0o775);
    await expect(stat(path.join(homeOnHost, '.ssh'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses a home directory that is itself a symlink', async () => {
    const { root, target, homeOnHost } = await tree();
    await rm(homeOnHost, { recursive: true });
    await mkdir(path.join(root, 'elsewhere'));
    await symlink(path.join(root, 'elsewhere'), homeOnHost);
    await expect(writeAuthorizedKeys(target, [keyLine()])).rejects.toMatchObject({ code: 'SSH_KEYS_FAILED' });
  });

  it('rejects an invalid key before touching the home', async () => {
    const { target, homeOnHost } = await tree();
    await expect(writeAuthorizedKeys(target, [keyLine(), 'ssh-ed25519 garbage'])).rejects.toMatchObject({ code: 'INVALID_SSH_KEY' });
    await expect(stat(path.join(homeOnHost, '.ssh'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('writes outside the home only when sshd names such a file, creating directories 0755', async () => {
    const { root, target } = await tree();
    const result = await writeAuthorizedKeys({ ...target, paths: ['/etc/ssh/keys/alice'], rootOwner: { uid, gid } }, [keyLine()]);
    expect(result.path).toBe('/etc/ssh/keys/alice');
    expect((await stat(path.join(root, 'etc/ssh/keys'))).mode & 0o777).toBe(0o755);
    expect((await stat(path.join(root, 'etc/ssh/keys/alice'))).mode & 0o777).toBe(0o600);
  });
});

describe('chooseKeysFile', () => {
  it('prefers the first candidate inside the home', () => {
    expect(chooseKeysFile(['/etc/ssh/keys/u', '/home/u/.ssh/authorized_keys', '/home/u/.ssh/authorized_keys2'], '/home/u')).toBe('/home/u/.ssh/authorized_keys');
    expect(chooseKeysFile(['/etc/ssh/keys/u'], '/home/u')).toBe('/etc/ssh/keys/u');
    expect(chooseKeysFile(['/home/u2/.ssh/authorized_keys'], '/home/u')).toBe('/home/u2/.ssh/authorized_keys');
  });
});
