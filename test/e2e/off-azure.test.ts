/**
 * An image booted off Azure (QEMU, a local Packer build): no Azure chassis asset tag, no provisioning media. The
 * agent, with the default configuration and a fake fabric still answering at Azure's addresses, must send nothing,
 * change nothing and exit 0 at once, with one log line saying why.
 */
import { readdir } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { vmFile, withVm, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox } from './ns.js';

const vms: Vm[] = [];
let booted: Promise<{ vm: Vm; boot: BootResult; passwdBefore: string; hostnameBefore: string; sshBefore: string[] }>;

describe.skipIf(!canSandbox)('a boot off Azure', { timeout: 120_000 }, () => {
  beforeAll(() => {
    assertNamespaces();
    booted = withVm(vms, `bs-offaz-${process.pid}`, { generation: 2, chassisAssetTag: 'Default string' }, async (vm) => {
      const passwdBefore = await vmFile(vm, '/etc/passwd');
      const hostnameBefore = await vmFile(vm, '/etc/hostname');
      const sshBefore = (await readdir(vm.sandbox.hostPath('/etc/ssh'))).sort();
      return { vm, boot: await vm.boot(), passwdBefore, hostnameBefore, sshBefore };
    });
    booted.catch(() => undefined);
  });

  afterAll(async () => {
    await booted.catch(() => undefined);
    await Promise.allSettled(vms.map((vm) => vm.sandbox.cleanup()));
  });

  it('exits 0 with one line saying why, sends no request, and changes no user, hostname or host key', async () => {
    const { vm, boot, passwdBefore, hostnameBefore, sshBefore } = await booted;
    expect(boot.exitCode, boot.stderr).toBe(0);
    expect(await vm.requests()).toEqual([]);
    const why = boot.stderr.split('\n').filter((l) => l.includes('not an Azure VM'));
    expect(why).toHaveLength(1);
    expect(why[0]).toContain('chassis asset tag is');
    expect(why[0]).toContain('Default string');
    expect(await vmFile(vm, '/etc/passwd')).toBe(passwdBefore);
    expect(await vmFile(vm, '/etc/hostname')).toBe(hostnameBefore);
    expect((await readdir(vm.sandbox.hostPath('/etc/ssh'))).sort()).toEqual(sshBefore);
    // No provisioned marker and no KVP pool: the next boot on Azure provisions as a new VM.
    expect((await readdir(vm.sandbox.hostPath('/var/lib/bootstate')).catch(() => [])).filter((n) => n.endsWith('.provisioned'))).toEqual([]);
    expect(await readdir(vm.sandbox.hostPath('/var/lib/hyperv')).catch(() => [])).toEqual([]);
    // Far inside the IMDS budget (300 s) the first request would have waited for.
    expect(boot.ms).toBeLessThan(60_000);
  });
});
