/**
 * The admin's sudo after a real first boot (docs/configuration.md#the-admins-sudo), with the default configuration and
 * real `sudo` inside the sandbox, run as the admin: a keys-only admin becomes root without a password (what
 * WALinuxAgent, azure-init and cloud-init give), an admin whose password came on the provisioning media must type it,
 * and an image whose configuration was written for azure-init keeps azure-init's NOPASSWD rule even then.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ovfDocument } from '../../src/fabric/ovf-document.js';
import type { RunResult } from '../../src/system/exec.js';
import { attachLoop, vmFile, withVm, type BootResult, type Vm, type VmOptions } from './boot.js';
import { assertNamespaces, canSandbox, runInSandbox } from './ns.js';

const PREFIX = `bs-sudo-${process.pid}`;
const LOOP = existsSync('/dev/loop-control');
const ADMIN = 'azureuser';
const DROPIN = `/etc/sudoers.d/90-bootstate-${ADMIN}`;
const PASSWORD = 'Sudo-Needs-This-9!';

interface Booted {
  vm: Vm;
  boot: BootResult;
  /** `sudo -n true` as the admin: no password may be asked for. */
  nonInteractive: RunResult;
  /** `sudo -S true` as the admin with a wrong password on stdin, then with the right one (password VMs only). */
  wrongPassword?: RunResult;
  rightPassword?: RunResult;
}

const vms: Vm[] = [];
let cases: Record<'keysOnly' | 'password' | 'azureInit', Promise<Booted>>;

/** Runs `argv` inside the VM as the admin, without a login (setpriv: no PAM session, the admin's own groups). */
const asAdmin = (vm: Vm, argv: string[], stdin?: string) =>
  runInSandbox(vm.sandbox, ['setpriv', `--reuid=${ADMIN}`, `--regid=${ADMIN}`, '--init-groups', '--reset-env', ...argv], {
    stdin: stdin === undefined ? undefined : Buffer.from(stdin),
  });

/** ovf-env.xml carrying the admin IMDS names, with a password, on an ISO 9660 image on a loop device of this VM. */
async function attachPasswordMedia(vm: Vm): Promise<() => Promise<void>> {
  const content = path.join(vm.sandbox.root, 'media-content');
  await mkdir(content);
  await writeFile(path.join(content, 'ovf-env.xml'), ovfDocument({ username: ADMIN, hostname: 'web-01', password: PASSWORD, disableSshPasswordAuthentication: false }));
  const iso = path.join(vm.sandbox.root, 'ovf.iso');
  execFileSync('xorriso', ['-as', 'mkisofs', '-quiet', '-V', 'rd_rdfe_stable', '-o', iso, content], { stdio: 'pipe' });
  return (await attachLoop(iso, vm.sandbox)).detach;
}

/** Boots a VM (with the password media when `password`), then tries sudo as its admin. */
function bootAndTrySudo(name: string, options: VmOptions & { password: boolean; config?: string }): Promise<Booted> {
  return withVm(vms, `${PREFIX}-${name}`, options, async (vm) => {
    if (options.config !== undefined) {
      await mkdir(vm.sandbox.hostPath('/etc/bootstate'), { recursive: true });
      await writeFile(vm.sandbox.hostPath('/etc/bootstate/bootstate.toml'), options.config);
    }
    const detach = options.password ? await attachPasswordMedia(vm) : null;
    let boot: BootResult;
    try {
      boot = await vm.boot();
    } finally {
      await detach?.();
    }
    // In this order: a right password would leave a sudo timestamp that lets the later `-n` through.
    const nonInteractive = await asAdmin(vm, ['sudo', '-n', 'true']);
    if (!options.password) return { vm, boot, nonInteractive };
    const wrongPassword = await asAdmin(vm, ['sudo', '-S', '-p', '', 'true'], 'not-the-password\n');
    const rightPassword = await asAdmin(vm, ['sudo', '-S', '-p', '', 'true'], `${PASSWORD}\n`);
    return { vm, boot, nonInteractive, wrongPassword, rightPassword };
  });
}

/** The user step's log line (the log file is JSON, one object a line). */
async function userStepLog(vm: Vm): Promise<string> {
  const lines = (await vmFile(vm, '/var/log/bootstate.log')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { step?: string; msg?: string });
  return lines.filter((l) => l.step === 'user').map((l) => l.msg ?? '').join('\n');
}

describe.skipIf(!canSandbox)("the admin's sudo after a first boot in namespaces", { timeout: 180_000 }, () => {
  beforeAll(() => {
    assertNamespaces();
    // Each VM sees only its own loop device (ns.ts), so the boots may overlap.
    const keysOnly = bootAndTrySudo('keys', { generation: 2, password: false });
    const password = LOOP ? bootAndTrySudo('pw', { generation: 2, scenario: 'password-auth', password: true }) : Promise.reject(new Error('no loop devices'));
    const azureInit = LOOP
      ? bootAndTrySudo('azinit', { generation: 2, scenario: 'password-auth', password: true, config: '[azure_init_data_dir]\npath = "/var/lib/azure-init"\n' })
      : Promise.reject(new Error('no loop devices'));
    cases = { keysOnly, password, azureInit };
    for (const p of Object.values(cases)) p.catch(() => undefined);
  });

  afterAll(async () => {
    if (cases) await Promise.allSettled(Object.values(cases));
    await Promise.allSettled(vms.map((vm) => vm.sandbox.cleanup()));
  });

  describe('a keys-only admin (no password provisioned), default configuration', () => {
    it('runs sudo -n true as itself: root without a password', async () => {
      const { boot, nonInteractive } = await cases.keysOnly;
      expect(boot.exitCode, boot.stderr).toBe(0);
      expect(nonInteractive.exitCode, nonInteractive.stderr).toBe(0);
    });

    it('gets NOPASSWD: ALL in a dot-free 0440 root drop-in that visudo checked before it was moved into place', async () => {
      const { vm } = await cases.keysOnly;
      expect((await vmFile(vm, DROPIN)).split('\n').filter((l) => l && !l.startsWith('#'))).toEqual([`"${ADMIN}" ALL=(ALL) NOPASSWD: ALL`]);
      const info = await stat(vm.sandbox.hostPath(DROPIN));
      expect([info.mode & 0o7777, info.uid, info.gid]).toEqual([0o440, 0, 0]);
      expect((await readdir(vm.sandbox.hostPath('/etc/sudoers.d'))).filter((n) => n.startsWith('90-bootstate-'))).toEqual([path.basename(DROPIN)]);
      const checked = (await vm.commands()).filter((c) => c[0] === 'visudo');
      expect(checked).toEqual([['visudo', '-cf', expect.stringMatching(/^\/etc\/sudoers\.d\/\.90-bootstate-azureuser\.[^/]*\.tmp$/)]]);
    });

    it('logs which rule was written and why', async () => {
      const { vm } = await cases.keysOnly;
      expect(await userStepLog(vm)).toContain(`wrote ${DROPIN}: ALL=(ALL) NOPASSWD: ALL (sudo = "auto", no password provisioned)`);
    });
  });

  describe.skipIf(!LOOP)('an admin whose password came on the provisioning media, default configuration', () => {
    it('cannot sudo -n true: sudo asks for the password', async () => {
      const { boot, nonInteractive } = await cases.password;
      expect(boot.exitCode, boot.stderr).toBe(0);
      expect(nonInteractive.exitCode).toBe(1);
      expect(nonInteractive.stderr).toContain('a password is required');
    });

    it('becomes root with its own password and not with another', async () => {
      const { wrongPassword, rightPassword } = await cases.password;
      expect(wrongPassword!.exitCode).not.toBe(0);
      expect(rightPassword!.exitCode, rightPassword!.stderr).toBe(0);
    });

    it('gets ALL=(ALL) ALL, logged with the reason, and the password is in neither the drop-in nor the log', async () => {
      const { vm } = await cases.password;
      const dropin = await vmFile(vm, DROPIN);
      expect(dropin.split('\n').filter((l) => l && !l.startsWith('#'))).toEqual([`"${ADMIN}" ALL=(ALL) ALL`]);
      expect((await stat(vm.sandbox.hostPath(DROPIN))).mode & 0o7777).toBe(0o440);
      const log = await userStepLog(vm);
      expect(log).toContain(`wrote ${DROPIN}: ALL=(ALL) ALL (sudo = "auto", a password was provisioned)`);
      expect(`${dropin}\n${await vmFile(vm, '/var/log/bootstate.log')}`).not.toContain(PASSWORD);
    });
  });

  describe.skipIf(!LOOP)('an image whose configuration was written for azure-init, with a password provisioned', () => {
    it("keeps azure-init's NOPASSWD: ALL: sudo -n true succeeds", async () => {
      const { vm, boot, nonInteractive } = await cases.azureInit;
      expect(boot.exitCode, boot.stderr).toBe(0);
      expect(nonInteractive.exitCode, nonInteractive.stderr).toBe(0);
      expect((await vmFile(vm, DROPIN)).split('\n').filter((l) => l && !l.startsWith('#'))).toEqual([`"${ADMIN}" ALL=(ALL) NOPASSWD: ALL`]);
      expect(await userStepLog(vm)).toContain(`wrote ${DROPIN}: ALL=(ALL) NOPASSWD: ALL (sudo = "nopasswd")`);
    });

    it('did use that configuration: the markers are in azure-init\'s data directory', async () => {
      const { vm } = await cases.azureInit;
      expect((await readdir(vm.sandbox.hostPath('/var/lib/azure-init'))).some((n) => n.endsWith('.provisioned'))).toBe(true);
    });
  });
});
