/** Where the goal state's certificates and key pairs land, with their modes, in a temp root. */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { installKeyPair, keyPairPath, PLACED_RECORD, placeCertificates, placedNames } from '../../../src/os/certificates/certificate-files.js';

let root: string;
const owner = { uid: process.getuid!(), gid: process.getgid!() };
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'certificate-files-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const mode = (p: string) => (statSync(join(root, p)).mode & 0o777).toString(8);
const T = 'AB'.repeat(20);

describe('keyPairPath', () => {
  it('reads $HOME as /home (WALinuxAgent), an empty path as ~/.ssh/id_rsa, and keeps a path inside the home', () => {
    expect(keyPairPath('$HOME/azureuser/.ssh/id_rsa', '/home/azureuser')).toBe('/home/azureuser/.ssh/id_rsa');
    expect(keyPairPath('', '/home/azureuser')).toBe('/home/azureuser/.ssh/id_rsa');
    expect(keyPairPath('/home/azureuser/keys/deploy', '/home/azureuser')).toBe('/home/azureuser/keys/deploy');
  });

  it('refuses a path outside the user\'s home, relative, or the home itself', () => {
    for (const bad of ['/etc/shadow', '/home/azureuser/../root/.ssh/id_rsa', '.ssh/id_rsa', '/home/azureuser', '/home/other/.ssh/id_rsa']) {
      expect(() => keyPairPath(bad, '/home/azureuser'), bad).toThrow(expect.objectContaining({ code: 'CERTIFICATES_FAILED' }));
    }
  });
});

describe('placeCertificates', () => {
  it('writes <THUMBPRINT>.crt 0644 and .prv 0600 in a 0700 /var/lib/waagent, and skips a name that is not a thumbprint', async () => {
    const written = await placeCertificates(root, owner, [
      { thumbprint: T, certificatePem: 'CERT\n', privateKeyPem: 'KEY\n' },
      { thumbprint: '../evil', certificatePem: 'X' },
    ]);
    expect(written).toEqual([`${T}.crt`, `${T}.prv`]);
    expect([mode('var/lib/waagent'), mode(`var/lib/waagent/${T}.crt`), mode(`var/lib/waagent/${T}.prv`)]).toEqual(['700', '644', '600']);
    expect(readFileSync(join(root, `var/lib/waagent/${T}.prv`), 'utf8')).toBe('KEY\n');
  });
});

describe('the record of what placeCertificates placed', () => {
  it('names every file before it is written, keeps the names of earlier runs, and is root\'s alone', async () => {
    const data = join(root, 'var/lib/bootstate');
    const U = 'CD'.repeat(20);
    await placeCertificates(root, owner, [{ thumbprint: T, certificatePem: 'CERT\n', privateKeyPem: 'KEY\n' }], { record: data });
    await placeCertificates(root, owner, [{ thumbprint: U, certificatePem: 'CERT\n' }, { thumbprint: '../evil', certificatePem: 'X' }], { record: data });
    const record = readFileSync(join(data, PLACED_RECORD), 'utf8');
    expect(placedNames(record)).toEqual([`${T}.crt`, `${T}.prv`, `${U}.crt`]);
    expect(record.split('\n')[0]).toMatch(/^# /);
    expect([mode('var/lib/bootstate'), mode(`var/lib/bootstate/${PLACED_RECORD}`)]).toEqual(['700', '600']);
  });

  it('reads only the names bootstate gives: a line naming any other path is not a name', () => {
    expect(placedNames(`# x\n${T}.crt\n../../etc/passwd\n${T.toLowerCase()}.prv\n${T}.prv.tmp\n${T}.prv\n`)).toEqual([`${T}.crt`, `${T}.prv`]);
  });

  it('places nothing when the record cannot be written', async () => {
    mkdirSync(join(root, 'data'));
    mkdirSync(join(root, 'data', PLACED_RECORD));
    await expect(placeCertificates(root, owner, [{ thumbprint: T, certificatePem: 'CERT\n', privateKeyPem: 'KEY\n' }], { record: join(root, 'data') })).rejects.toThrow();
    expect(() => statSync(join(root, `var/lib/waagent/${T}.prv`))).toThrow();
  });
});

describe('installKeyPair', () => {
  it('writes the key 0600 and its .pub 0644, making ~/.ssh 0700', async () => {
    mkdirSync(join(root, 'home/u'), { recursive: true });
    await installKeyPair({ ...owner, home: '/home/u', root }, '/home/u/.ssh/id_rsa', 'PRIVATE\n', 'ssh-rsa AAAA');
    expect([mode('home/u/.ssh'), mode('home/u/.ssh/id_rsa'), mode('home/u/.ssh/id_rsa.pub')]).toEqual(['700', '600', '644']);
    expect(readFileSync(join(root, 'home/u/.ssh/id_rsa.pub'), 'utf8')).toBe('ssh-rsa AAAA\n');
  });

  it('refuses a symlink planted on the way instead of following it', async () => {
    mkdirSync(join(root, 'home/u'), { recursive: true });
    mkdirSync(join(root, 'elsewhere'));
    symlinkSync(join(root, 'elsewhere'), join(root, 'home/u/.ssh'));
    await expect(installKeyPair({ ...owner, home: '/home/u', root }, '/home/u/.ssh/id_rsa', 'PRIVATE\n', 'ssh-rsa AAAA')).rejects.toThrow();
    expect(() => statSync(join(root, 'elsewhere/id_rsa'))).toThrow();
  });
});
