/**
 * SELinux labels after a real first boot in the sandbox (docs/protocol.md#selinux-labels). This machine has no
 * SELinux, so `selinuxenabled`, `restorecon`, `matchpathcon` and `chcon` are executables put first in the agent's
 * PATH that record their argv and answer as a policy would: what is checked is which files the agent asks to label,
 * with what, and that a label it cannot set is a warning, never a failed provisioning. Whether sshd in a real
 * enforcing policy then reads the keys cannot be checked here (no SELinux kernel, no policy).
 */
import { chmod, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SSH_HOME_CONTEXT } from '../../src/os/selinux.js';
import { shimDir, vmFile, withVm, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox } from './ns.js';

const PREFIX = `bs-selinux-${process.pid}`;
const LABELLING = new Set(['selinuxenabled', 'restorecon', 'matchpathcon', 'chcon']);
const SSH_DIR = '/home/azureuser/.ssh';
const KEYS = `${SSH_DIR}/authorized_keys`;
const SUDOERS = '/etc/sudoers.d/90-bootstate-azureuser';
const DROPIN = '/etc/ssh/sshd_config.d/00-bootstate.conf';

/** How each fake answers: a shell snippet run after the argv is recorded. */
interface Policy {
  selinuxenabled: string;
  restorecon: string;
  matchpathcon: string;
  chcon: string;
}

// Records "$0 args…" as the harness's shims do (one printf, NUL-separated), then runs the policy's answer.
const fake = (answer: string) => `#!/bin/sh
me=$(basename "$0"); dir=$(dirname "$0")
format='%s'; for a in "$@"; do format="$format\\\\0%s"; done
printf "$format\\\\n" "$me" "$@" >> "$dir/../argv.log"
${answer}
`;

interface Booted {
  vm: Vm;
  boot: BootResult;
  labelling: string[][];
  log: string;
}

const vms: Vm[] = [];
const booted: Record<string, Booted> = {};

async function bootWith(name: string, policy: Policy): Promise<Booted> {
  return withVm(vms, `${PREFIX}-${name}`, {}, async (vm) => {
    for (const [command, answer] of Object.entries(policy)) {
      await writeFile(path.join(shimDir(vm), command), fake(answer));
      await chmod(path.join(shimDir(vm), command), 0o755);
    }
    const boot = await vm.boot();
    const labelling = (await vm.commands()).filter((argv) => LABELLING.has(argv[0]!));
    return { vm, boot, labelling, log: await vmFile(vm, '/var/log/bootstate.log') };
  });
}

describe.skipIf(!canSandbox)('SELinux labels on a first boot', { timeout: 180_000 }, () => {
  beforeAll(async () => {
    assertNamespaces();
    booted.labelled = await bootWith('ok', {
      selinuxenabled: 'exit 0',
      restorecon: 'exit 0',
      matchpathcon: 'printf "%s\\tsystem_u:object_r:ssh_home_t:s0\\n" "$2"',
      chcon: 'exit 0',
    });
    booted.noRule = await bootWith('norule', {
      selinuxenabled: 'exit 0',
      restorecon: 'exit 0',
      matchpathcon: 'printf "%s\\tsystem_u:object_r:default_t:s0\\n" "$2"',
      chcon: 'exit 0',
    });
    booted.failing = await bootWith('fail', {
      selinuxenabled: 'exit 0',
      restorecon: 'echo "restorecon: lstat failed: Permission denied" >&2; exit 255',
      matchpathcon: 'exit 1',
      chcon: 'echo "chcon: failed to change context: Operation not supported" >&2; exit 1',
    });
    booted.disabled = await bootWith('off', { selinuxenabled: 'exit 1', restorecon: 'exit 0', matchpathcon: 'exit 0', chcon: 'exit 0' });
  }, 300_000);
  afterAll(async () => {
    for (const vm of vms) await vm.sandbox.cleanup();
  });

  it('provisions in every case: a label is never a reason to fail', () => {
    for (const [name, { boot }] of Object.entries(booted)) expect([name, boot.exitCode, boot.stderr]).toEqual([name, 0, boot.stderr]);
  });

  it('asks selinuxenabled once, then restores the default labels of ~/.ssh, authorized_keys, the sudoers and sshd drop-ins', () => {
    const { labelling } = booted.labelled!;
    expect(labelling.filter((argv) => argv[0] === 'selinuxenabled')).toEqual([['selinuxenabled']]);
    expect(labelling.filter((argv) => argv[0] === 'restorecon').sort()).toEqual(
      [['restorecon', '-R', SSH_DIR, KEYS], ['restorecon', '-R', SUDOERS], ['restorecon', '-R', DROPIN]].sort(),
    );
  });

  it('leaves the policy its ssh_home_t rule: no chcon when matchpathcon names ssh_home_t', () => {
    const { labelling } = booted.labelled!;
    expect(labelling.filter((argv) => argv[0] === 'matchpathcon')).toEqual([['matchpathcon', '-n', SSH_DIR], ['matchpathcon', '-n', KEYS]]);
    expect(labelling.filter((argv) => argv[0] === 'chcon')).toEqual([]);
    expect(booted.labelled!.log).not.toContain('SELinux:');
  });

  it("gives ~/.ssh and authorized_keys WALinuxAgent's ssh_home_t with chcon when the policy has no such rule", () => {
    const { labelling, log } = booted.noRule!;
    expect(labelling.filter((argv) => argv[0] === 'chcon')).toEqual([['chcon', SSH_HOME_CONTEXT, SSH_DIR], ['chcon', SSH_HOME_CONTEXT, KEYS]]);
    expect(log).not.toContain('SELinux:');
  });

  it('warns, naming the file and why, when restorecon and chcon both fail', () => {
    const { labelling, log } = booted.failing!;
    expect(labelling.filter((argv) => argv[0] === 'chcon')).toEqual([['chcon', SSH_HOME_CONTEXT, SSH_DIR], ['chcon', SSH_HOME_CONTEXT, KEYS]]);
    expect(labelling.filter((argv) => argv[0] === 'matchpathcon')).toEqual([]);
    expect(log).toContain(`SELinux: restorecon failed (restorecon: lstat failed: Permission denied), chcon ${SSH_HOME_CONTEXT} ${KEYS} failed (chcon: failed to change context: Operation not supported)`);
    expect(log).toContain(`SELinux: restorecon ${SUDOERS} failed`);
    expect(log).toContain(`SELinux: restorecon ${DROPIN} failed`);
  });

  it('runs nothing but selinuxenabled when SELinux is off', () => {
    expect(booted.disabled!.labelling).toEqual([['selinuxenabled']]);
  });
});
