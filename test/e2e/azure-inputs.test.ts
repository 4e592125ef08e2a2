/**
 * Inputs Azure really sends, on a real first boot in namespaces (see first-boot.test.ts for the harness): admin
 * user names with upper case, a dot or 32 bytes, created by the image's own useradd with a sudo rule visudo and
 * sudo accept; and metadata whose keys are partly or wholly invalid.
 */
import { readdir, readFile, stat, mkdir, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { USERNAME_32_BYTES } from '../../src/fabric/scenarios.js';
import { decodeRecords } from '../../src/kvp/codec.js';
import { createVm, vmFile, type BootResult, type Vm, lastFailure } from './boot.js';
import { assertNamespaces, canSandbox, runInSandbox } from './ns.js';

const PREFIX = `bs-e2e-in-${process.pid}`;
const IMDS_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIN/Rb85Ri4GtZokp7+G4Wiooo9ItAifFWeNtrUbNH45R azureuser@laptop';
const SUDO_CONFIG = '[user_provisioners]\npasswordless_sudo = true\n';
const AZURE_INIT_VM_ID = '3f2b8c1e-5d4a-4b6f-9e7c-2a1d0b9c8e7f';

interface Booted { vm: Vm; boot: BootResult }

const vms: Vm[] = [];
const booted = new Map<string, Promise<Booted>>();

/** Boots one VM with the scenario; at most two at once (2 cores shared with the other suites). */
let queue: Promise<unknown> = Promise.resolve();
let running = 0;
function bootVm(name: string, scenario: string, prepare?: (vm: Vm) => Promise<void>): Promise<Booted> {
  const task = async () => {
    const vm = await createVm(`${PREFIX}-${name}`, { generation: 2, productUuid: AZURE_INIT_VM_ID, scenario });
    vms.push(vm);
    try {
      await mkdir(vm.sandbox.hostPath('/etc/bootstate'), { recursive: true });
      await writeFile(vm.sandbox.hostPath('/etc/bootstate/bootstate.toml'), SUDO_CONFIG);
      await prepare?.(vm);
      return { vm, boot: await vm.boot() };
    } finally {
      await vm.shutdown();
    }
  };
  const slot = async (): Promise<Booted> => {
    while (running >= 2) await queue;
    running += 1;
    const p = task();
    queue = p.catch(() => undefined);
    try {
      return await p;
    } finally {
      running -= 1;
    }
  };
  return slot();
}

const file = vmFile;

async function passwdEntry(vm: Vm, user: string) {
  const line = (await file(vm, '/etc/passwd')).split('\n').find((l) => l.startsWith(`${user}:`));
  if (!line) return null;
  const [, , uid, gid, , home] = line.split(':');
  return { uid: Number(uid), gid: Number(gid), home: home! };
}


async function kvpValues(vm: Vm): Promise<string[]> {
  const pool = await readFile(vm.sandbox.hostPath('/var/lib/hyperv/.kvp_pool_1'));
  return decodeRecords(pool, { lossy: true }).map((r) => r.value);
}

const USERS = { azureadmin: ['username-azureadmin', 'AzureAdmin'], dotted: ['username-dotted', 'john.doe'], long: ['username-32-bytes', USERNAME_32_BYTES] } as const;

describe.skipIf(!canSandbox)('a first boot with inputs Azure sends', { timeout: 240_000 }, () => {
  beforeAll(() => {
    assertNamespaces();
    for (const [key, [scenario]] of Object.entries(USERS)) booted.set(key, bootVm(key, scenario));
    booted.set('oneInvalid', bootVm('onebad', 'one-invalid-key'));
    booted.set('onlyInvalid', bootVm('allbad', 'only-invalid-keys'));
    booted.set('azureInitMarker', bootVm('azinit', 'happy', async (vm) => {
      await mkdir(vm.sandbox.hostPath('/var/lib/azure-init'), { recursive: true });
      await writeFile(vm.sandbox.hostPath(`/var/lib/azure-init/${AZURE_INIT_VM_ID}.provisioned`), '');
    }));
    for (const p of booted.values()) p.catch(() => undefined);
  });

  afterAll(async () => {
    await Promise.allSettled(booted.values());
    for (const vm of vms) await vm.sandbox.cleanup();
  }, 120_000);

  for (const [key, [, username]] of Object.entries(USERS)) {
    describe(`admin user ${username}`, () => {
      it('is created by useradd with its home, and the VM reports Ready', async () => {
        const { vm, boot } = await booted.get(key)!;
        expect(boot.exitCode, boot.stderr).toBe(0);
        expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready']);
        expect(await vm.commands()).toContainEqual(expect.arrayContaining(['useradd', username]));
        const user = await passwdEntry(vm, username);
        expect(user?.home).toBe(`/home/${username}`);
        const home = await stat(vm.sandbox.hostPath(`/home/${username}`));
        expect([home.uid, home.gid]).toEqual([user!.uid, user!.gid]);
      });

      it('gets the key in authorized_keys 0600 inside .ssh 0700, both owned by the user', async () => {
        const { vm } = await booted.get(key)!;
        const user = (await passwdEntry(vm, username))!;
        const dir = await stat(vm.sandbox.hostPath(`/home/${username}/.ssh`));
        const keys = await stat(vm.sandbox.hostPath(`/home/${username}/.ssh/authorized_keys`));
        expect([dir.mode & 0o7777, dir.uid, dir.gid]).toEqual([0o700, user.uid, user.gid]);
        expect([keys.mode & 0o7777, keys.uid, keys.gid]).toEqual([0o600, user.uid, user.gid]);
        expect((await file(vm, `/home/${username}/.ssh/authorized_keys`)).trim()).toBe(IMDS_KEY);
      });

      it('is the user sshd -T resolves that authorized_keys for, with password logins off', async () => {
        const { vm } = await booted.get(key)!;
        const dump = (await runInSandbox(vm.sandbox, ['sshd', '-T', '-f', '/etc/ssh/sshd_config', '-C', `user=${username},host=laptop,addr=10.0.0.9`])).stdout;
        expect(dump).toMatch(/^passwordauthentication no$/m);
        expect(dump).toMatch(/^authorizedkeysfile .*\.ssh\/authorized_keys/m);
      });

      it('gets a sudo rule in a dot-free drop-in that visudo -c accepts and sudo applies', async () => {
        const { vm } = await booted.get(key)!;
        const dropins = (await readdir(vm.sandbox.hostPath('/etc/sudoers.d'))).filter((n) => n.startsWith('90-bootstate-'));
        expect(dropins).toHaveLength(1);
        expect(dropins[0]).not.toContain('.');
        const check = await runInSandbox(vm.sandbox, ['visudo', '-c']);
        expect(check.exitCode, check.stdout + check.stderr).toBe(0);
        const rules = await runInSandbox(vm.sandbox, ['sudo', '-n', '-l', '-U', username]);
        expect(rules.exitCode, rules.stderr).toBe(0);
        expect(rules.stdout).toMatch(/\(ALL\) NOPASSWD: ALL/);
      });
    });
  }

  describe('metadata with one valid and one invalid key', () => {
    it('installs the valid key, skips the other with a warning naming it, and reports Ready', async () => {
      const { vm, boot } = await booted.get('oneInvalid')!;
      expect(boot.exitCode, boot.stderr).toBe(0);
      expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready']);
      expect((await file(vm, '/home/azureuser/.ssh/authorized_keys')).trim().split('\n')).toEqual([IMDS_KEY]);
      expect(boot.stderr).toContain('ssh key skipped: ssh-rsa AAAA!not-base64 broken@laptop');
      expect(await file(vm, '/var/log/bootstate.log')).toContain('ssh key skipped');
      expect((await kvpValues(vm)).some((v) => v.includes('ssh key skipped') && v.includes('AAAA!not-base64'))).toBe(true);
    });
  });

  describe('an image migrated from azure-init, booting a VM azure-init already provisioned', () => {
    it('is not provisioned again: exit 0, no request to the fabric, no user, no marker of ours', async () => {
      const { vm, boot } = await booted.get('azureInitMarker')!;
      expect(boot.exitCode, boot.stderr).toBe(0);
      expect(await vm.requests()).toEqual([]);
      expect(await passwdEntry(vm, 'azureuser')).toBeNull();
      expect(await readdir(vm.sandbox.hostPath('/var/lib/bootstate')).catch(() => [])).not.toContain(`${AZURE_INIT_VM_ID}.provisioned`);
    });
  });

  describe('metadata with only invalid keys and password logins off', () => {
    it('reports ProvisioningFailed naming the keys, exits 78 and creates no user', async () => {
      const { vm, boot } = await booted.get('onlyInvalid')!;
      expect(boot.exitCode, boot.stderr).toBe(78);
      expect((await vm.reportKinds()).at(-1)).toBe('NotReady/ProvisioningFailed');
      const report = await lastFailure(vm);
      expect(report.get('reason')).toBe('invalid ssh public key');
      expect(report.get('key_1')).toBe('ssh-rsa AAAA!not-base64 broken@laptop');
      expect(report.get('key_2')).toMatch(/^ssh-dss /);
      expect(await passwdEntry(vm, 'azureuser')).toBeNull();
    });
  });
});
