/**
 * A first boot on an image whose sshd_config never includes sshd_config.d (Azure Linux, older RHEL), with the real
 * sshd in the sandbox: the setting replaces the image's first global one in sshd_config itself, so `sshd -T` sees it
 * despite the image's own `PasswordAuthentication yes`; a Match block keeps its own value; the file keeps its owner
 * and mode, the original is kept beside it, and no drop-in is written. When sshd cannot confirm the value, the
 * original comes back and the boot reports ProvisioningFailed.
 */
import { chmod, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lastFailure, shimDir, vmFile, withVm, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox, runInSandbox } from './ns.js';

const PREFIX = `bs-sshdmain-${process.pid}`;
// What Azure Linux 3.0's openssh ships, in short: no Include, password logins on, a Match block, mode 0600.
const IMAGE_CONFIG = `# Azure Linux style: no Include of sshd_config.d
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication yes
KbdInteractiveAuthentication no
UsePAM yes
Match User rescue
  PasswordAuthentication yes
`;

const vms: Vm[] = [];
let ok: { vm: Vm; boot: BootResult; global: string; inMatch: string };
let refused: { vm: Vm; boot: BootResult };

/** The image's sshd_config without Include, root-owned 0600 as on RHEL-family images. */
async function imageWithoutInclude(vm: Vm): Promise<void> {
  await writeFile(vm.sandbox.hostPath('/etc/ssh/sshd_config'), IMAGE_CONFIG);
  await chmod(vm.sandbox.hostPath('/etc/ssh/sshd_config'), 0o600);
}

const effective = async (vm: Vm, extra: string[] = []) => {
  const dump = await runInSandbox(vm.sandbox, ['sshd', '-T', '-f', '/etc/ssh/sshd_config', ...extra]);
  return /^passwordauthentication (\w+)$/m.exec(dump.stdout)?.[1] ?? `no value (${dump.stderr.trim()})`;
};

describe.skipIf(!canSandbox)('a first boot on an sshd_config without Include', { timeout: 180_000 }, () => {
  beforeAll(async () => {
    assertNamespaces();
    ok = await withVm(vms, `${PREFIX}-ok`, {}, async (vm) => {
      await imageWithoutInclude(vm);
      const boot = await vm.boot();
      return { vm, boot, global: await effective(vm), inMatch: await effective(vm, ['-C', 'user=rescue,host=h,addr=10.0.0.1']) };
    });
    refused = await withVm(vms, `${PREFIX}-refused`, {}, async (vm) => {
      await imageWithoutInclude(vm);
      // An sshd that cannot dump its configuration: -T fails, every other use is the real sshd's.
      const fake = path.join(shimDir(vm), 'sshd');
      await writeFile(fake, '#!/bin/sh\nif [ "$1" = -T ]; then echo "sshd: cannot read configuration" >&2; exit 255; fi\nexec /usr/sbin/sshd "$@"\n');
      await chmod(fake, 0o755);
      return { vm, boot: await vm.boot() };
    });
  }, 240_000);
  afterAll(async () => {
    for (const vm of vms) await vm.sandbox.cleanup();
  });

  it('provisions, and sshd -T sees PasswordAuthentication no despite the image turning it on', () => {
    expect(ok.boot.exitCode, ok.boot.stderr).toBe(0);
    expect(ok.global).toBe('no');
  });

  it("replaces the image's first global setting in place and leaves every other line, the Match block's too", async () => {
    const text = await vmFile(ok.vm, '/etc/ssh/sshd_config');
    expect(text).toBe(IMAGE_CONFIG.replace('PasswordAuthentication yes\nKbd', 'PasswordAuthentication no\nKbd'));
    expect(ok.inMatch).toBe('yes');
  });

  it("keeps the file's owner and mode, keeps the original beside it with the same, and writes no drop-in", async () => {
    for (const p of ['/etc/ssh/sshd_config', '/etc/ssh/sshd_config.bootstate-orig']) {
      const info = await stat(ok.vm.sandbox.hostPath(p));
      expect([p, info.mode & 0o7777, info.uid, info.gid]).toEqual([p, 0o600, 0, 0]);
    }
    expect(await vmFile(ok.vm, '/etc/ssh/sshd_config.bootstate-orig')).toBe(IMAGE_CONFIG);
    await expect(stat(ok.vm.sandbox.hostPath('/etc/ssh/sshd_config.d/00-bootstate.conf'))).rejects.toThrow(/ENOENT/);
  });

  it('when sshd cannot confirm the value: ProvisioningFailed naming sshd, and the original sshd_config is back', async () => {
    expect(refused.boot.exitCode).not.toBe(0);
    const failure = await lastFailure(refused.vm);
    expect(failure.get('error')).toMatch(/sshd -T failed/);
    expect(await readFile(refused.vm.sandbox.hostPath('/etc/ssh/sshd_config'), 'utf8')).toBe(IMAGE_CONFIG);
    expect((await stat(refused.vm.sandbox.hostPath('/etc/ssh/sshd_config'))).mode & 0o7777).toBe(0o600);
  });
});
