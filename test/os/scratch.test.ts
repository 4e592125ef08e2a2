import { sshdDumpFlags } from '../../src/os/ssh/sshd-capability.js';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { ScratchProvisioner } from '../../src/os/scratch.js';
import { SecretStore } from '../../src/core/secrets.js';
import { keyLine } from './keys.js';

const dirs: string[] = [];
async function scratch(config = DEFAULT_CONFIG): Promise<ScratchProvisioner> {
  const dir = await mkdtemp(path.join(tmpdir(), 'scratch-'));
  dirs.push(dir);
  return new ScratchProvisioner(dir, config);
}
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});
const signal = new AbortController().signal;

describe('ScratchProvisioner', () => {
  it('runs a whole provisioning under its directory and records exactly the commands the real backend would run', async () => {
    const p = await scratch();
    const key = keyLine();
    expect((await p.setHostname('web-01.example.com', signal)).backend).toBe('hostnamectl');
    await p.createUser({ username: 'azureuser', groups: ['adm'], passwordProvided: false }, signal);
    expect((await p.setPassword('azureuser', new SecretStore(), signal)).backend).toBe('passwd');
    const keys = await p.writeSshKeys({ username: 'azureuser', keys: [key] }, signal);
    const sshd = await p.configureSshd(false, signal);

    expect(await readFile(path.join(p.dir, 'etc/hostname'), 'utf8')).toBe('web-01\n');
    expect(await readFile(path.join(p.dir, 'home/azureuser/.ssh/authorized_keys'), 'utf8')).toBe(`${key}\n`);
    expect(keys.detail).toContain('/home/azureuser/.ssh/authorized_keys');
    expect(await readFile(path.join(p.dir, 'etc/ssh/sshd_config.d/00-bootstate.conf'), 'utf8')).toMatch(/^PasswordAuthentication no$/m);
    expect((await stat(path.join(p.dir, 'etc/ssh/sshd_config.d/00-bootstate.conf'))).mode & 0o777).toBe(0o600);
    expect(sshd.warnings).toContain('sshd is not installed; effective value not verified');
    // sudo = "auto" and no password: the NOPASSWD drop-in, checked beside useradd before it is moved into place.
    expect(p.commands.slice(1, 3)).toEqual(
      expect.arrayContaining([
        ['useradd', '--create-home', '--home-dir', '/home/azureuser', '--shell', '/bin/bash', '--comment', 'created by bootstate from provisioning metadata', 'azureuser'],
        ['visudo', '-cf', expect.stringMatching(/^\/etc\/sudoers\.d\/\.90-bootstate-azureuser\.[0-9a-f]+\.tmp$/)],
      ]),
    );
    expect(p.commands).toEqual([
      ['hostnamectl', 'set-hostname', 'web-01'],
      ...p.commands.slice(1, 3),
      ['passwd', '-l', 'azureuser'],
      // The first dump flag this host's sshd has (-G from OpenSSH 9.8, else -T), as the real backend would ask.
      ['sshd', (await sshdDumpFlags())[0], '-f', '/etc/ssh/sshd_config', '-C', 'user=azureuser,host=vm,addr=127.0.0.1'],
      ['sshd', '-T', '-f', '/etc/ssh/sshd_config'],
    ]);
  });

  it('writes /etc/hostname with the hostname backend when that is the one configured', async () => {
    const p = await scratch({ ...DEFAULT_CONFIG, hostname_provisioners: { backends: ['hostname'] } });
    expect((await p.setHostname('web-02', signal)).backend).toBe('hostname');
    expect(await readFile(path.join(p.dir, 'etc/hostname'), 'utf8')).toBe('web-02\n');
    expect(p.commands).toEqual([['hostname', 'web-02']]);
  });

  it('warns about a configured group that does not exist instead of dropping it silently', async () => {
    const p = await scratch();
    const result = await p.createUser({ username: 'azureuser', groups: ['wheel'], passwordProvided: false }, signal);
    expect(result.warnings).toEqual([expect.stringMatching(/group wheel does not exist; skipped/)]);
  });

  it('records chpasswd without the password when one is stored', async () => {
    const p = await scratch();
    await p.createUser({ username: 'azureuser', groups: [], passwordProvided: false }, signal);
    const secrets = new SecretStore();
    secrets.setPassword('correct horse battery staple');
    expect((await p.setPassword('azureuser', secrets, signal)).backend).toBe('chpasswd');
    expect(p.commands.at(-1)).toEqual(['chpasswd']);
    expect(JSON.stringify(p.commands)).not.toContain('horse');
  });

  it('validates before it records anything', async () => {
    const p = await scratch();
    await expect(p.createUser({ username: 'root', groups: [], passwordProvided: false }, signal)).rejects.toMatchObject({ code: 'INVALID_USERNAME' });
    await expect(p.setHostname('bad_name', signal)).rejects.toMatchObject({ code: 'INVALID_HOSTNAME' });
    await expect(p.setPassword('ghost', new SecretStore(), signal)).rejects.toMatchObject({ code: 'USER_MISSING' });
    expect(p.commands).toEqual([]);
  });

  it('writes a sudoers drop-in 0440 when sudo = "nopasswd" is configured', async () => {
    const p = await scratch({ ...DEFAULT_CONFIG, user_provisioners: { ...DEFAULT_CONFIG.user_provisioners, sudo: 'nopasswd' } });
    const result = await p.createUser({ username: 'azureuser', groups: [], passwordProvided: true }, signal);
    const file = path.join(p.dir, 'etc/sudoers.d/90-bootstate-azureuser');
    expect(await readFile(file, 'utf8')).toMatch(/^"azureuser" ALL=\(ALL\) NOPASSWD: ALL$/m);
    expect((await stat(file)).mode & 0o777).toBe(0o440);
    expect(result.warnings).toContain('visudo is not installed; sudoers drop-in not validated');
  });

  it('with the default sudo = "auto" on an image without sudo, still writes the rule and says it is unvalidated in the detail, not as a warning', async () => {
    const p = await scratch();
    const result = await p.createUser({ username: 'azureuser', groups: [], passwordProvided: false }, signal);
    expect(await readFile(path.join(p.dir, 'etc/sudoers.d/90-bootstate-azureuser'), 'utf8')).toMatch(/^"azureuser" ALL=\(ALL\) NOPASSWD: ALL$/m);
    expect(result.warnings).toEqual([]);
    expect(result.detail).toMatch(
      /wrote .*\/etc\/sudoers\.d\/90-bootstate-azureuser \(visudo is not installed; sudoers drop-in not validated\): ALL=\(ALL\) NOPASSWD: ALL \(sudo = "auto", no password provisioned\)$/,
    );
  });
});
