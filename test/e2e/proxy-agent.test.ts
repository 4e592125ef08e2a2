/**
 * A VM whose provisioning media says ProvisionGuestProxyAgent=true, booted in namespaces with the default
 * configuration: provisioning goes on only once `azure-proxy-agent --status --wait 120` says the agent is ready;
 * missing or not ready ends in ProvisioningFailed with the platform's reasons. The fake agent is a script in the
 * VM's PATH.
 */
import { existsSync } from 'node:fs';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ovfDocument } from '../../src/fabric/ovf-document.js';
import { lastFailure, shimDir, vmFile, withMedia, withVm, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox } from './ns.js';

const PREFIX = `bs-gpa-${process.pid}`;
const LOOP = existsSync('/dev/loop-control');
const vms: Vm[] = [];
type Booted = { vm: Vm; boot: BootResult; argv: string };
const cases: Record<string, Promise<Booted>> = {};

/** Boots with the media asking for the agent; `agent` is the fake's script body, or null for none installed. */
function bootAsking(name: string, agent: string | null): Promise<Booted> {
  return withVm(vms, `${PREFIX}-${name}`, { generation: 2 }, async (vm) => {
    const argvFile = path.join(vm.sandbox.root, 'gpa-argv');
    if (agent !== null) {
      const fake = path.join(shimDir(vm), 'azure-proxy-agent');
      await writeFile(fake, `#!/bin/sh\necho "$@" > ${argvFile}\n${agent}\n`);
      await chmod(fake, 0o755);
    }
    const ovf = ovfDocument({ username: 'azureuser', hostname: 'web-01', provisionGuestProxyAgent: true });
    return withMedia(vm, ovf, async () => ({ vm, boot: await vm.boot(), argv: await readFile(argvFile, 'utf8').catch(() => '') }));
  });
}

describe.skipIf(!canSandbox)("Azure's Guest Proxy Agent, when the media asks for it", { timeout: 180_000 }, () => {
  beforeAll(async () => {
    assertNamespaces();
    if (!LOOP) throw new Error('no loop devices (/dev/loop-control): these tests attach the provisioning media as one');
    // One after the other: each boot is short, and three at once would crowd a 2-core machine.
    cases.ready = bootAsking('ready', 'exit 0');
    await cases.ready.catch(() => undefined);
    cases.failing = bootAsking('failing', 'echo not ready; exit 1');
    await cases.failing.catch(() => undefined);
    cases.missing = bootAsking('missing', null);
    await cases.missing.catch(() => undefined);
  });

  afterAll(async () => {
    await Promise.allSettled(Object.values(cases));
    await Promise.allSettled(vms.map((vm) => vm.sandbox.cleanup()));
  });

  it('waits for `azure-proxy-agent --status --wait 120`, then provisions and reports Ready', async () => {
    const { vm, boot, argv } = await cases.ready!;
    expect(boot.exitCode, boot.stderr).toBe(0);
    expect(argv.trim()).toBe('--status --wait 120');
    expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(await vmFile(vm, '/etc/passwd')).toMatch(/^azureuser:/m);
  });

  it('an agent that is not ready fails the VM with "azure-proxy-agent status failure" and its exit code, before any OS change', async () => {
    const { vm, boot } = await cases.failing!;
    expect(boot.exitCode).toBe(1);
    expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'NotReady/ProvisioningFailed']);
    const failure = await lastFailure(vm);
    expect(failure.get('reason')).toBe('azure-proxy-agent status failure');
    expect(failure.get('exit_code')).toBe('1');
    expect(await vmFile(vm, '/etc/passwd')).not.toMatch(/^azureuser:/m);
  });

  it('no agent installed fails the VM with "azure-proxy-agent not found"', async () => {
    const { vm, boot } = await cases.missing!;
    expect(boot.exitCode).toBe(1);
    expect((await lastFailure(vm)).get('reason')).toBe('azure-proxy-agent not found');
    expect(await vmFile(vm, '/etc/passwd')).not.toMatch(/^azureuser:/m);
  });
});
