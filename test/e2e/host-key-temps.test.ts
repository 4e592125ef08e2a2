/**
 * The new host keys are made under temporary names in /etc/ssh (`.bootstate-new-ssh_host_<type>_key`) and renamed
 * into place; a first boot that fails, or is stopped, while they are made must leave none of those private keys
 * behind. Each VM is a namespace sandbox with the fake fabric on Azure's addresses (boot.ts); an `ssh-keygen` shim
 * holds the ecdsa key for 30 s, so the run ends after the ed25519 key was made and while the ecdsa one is.
 */
import { chmod, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shimDir, vmFile, withVm, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox } from './ns.js';

interface Run { vm: Vm; boot: BootResult; imageKey: string }

const PREFIX = `bs-hkt-${process.pid}`;
const vms: Vm[] = [];
let runs: { refused: Promise<Run>; stopped: Promise<Run> };

const SLOW_ECDSA = `#!/bin/sh
for a in "$@"; do if [ "$a" = ecdsa ]; then sleep 30; fi; done
exec /usr/bin/ssh-keygen "$@"
`;

async function withSlowEcdsa(vm: Vm): Promise<string> {
  const shim = path.join(shimDir(vm), 'ssh-keygen');
  await writeFile(shim, SLOW_ECDSA);
  await chmod(shim, 0o755);
  return vmFile(vm, '/etc/ssh/ssh_host_ed25519_key.pub');
}

const leftovers = async (vm: Vm) => (await readdir(vm.sandbox.hostPath('/etc/ssh'))).filter((n) => n.startsWith('.bootstate-new-'));

describe.skipIf(!canSandbox)('host keys made under temporary names', { timeout: 240_000 }, () => {
  beforeAll(() => {
    assertNamespaces();
    runs = {
      // IMDS answers after 1.5 s, the ed25519 key is in long before, the refusal ends the run while ecdsa is made.
      refused: withVm(vms, `${PREFIX}-user`, { generation: 2, scenario: 'hostile-username', imdsDelayMs: 1500 }, async (vm) => {
        const imageKey = await withSlowEcdsa(vm);
        return { vm, boot: await vm.boot(), imageKey };
      }),
      stopped: withVm(vms, `${PREFIX}-stop`, { generation: 2 }, async (vm) => {
        const imageKey = await withSlowEcdsa(vm);
        const boot = await vm.boot([], { terminateWhen: 'test -s /etc/ssh/.bootstate-new-ssh_host_ed25519_key.pub' });
        return { vm, boot, imageKey };
      }),
    };
    for (const run of Object.values(runs)) run.catch(() => undefined);
  });

  afterAll(async () => {
    if (runs) await Promise.allSettled(Object.values(runs));
    for (const vm of vms) {
      await vm.shutdown().catch(() => undefined);
      await vm.sandbox.cleanup();
    }
  }, 120_000);

  it('a refused username leaves none behind, and the image keys as they were', async () => {
    const { vm, boot, imageKey } = await runs.refused;
    expect(boot.exitCode, boot.stderr).toBe(78);
    expect((await vm.reportKinds()).at(-1)).toBe('NotReady/ProvisioningFailed');
    expect(await leftovers(vm)).toEqual([]);
    expect(await vmFile(vm, '/etc/ssh/ssh_host_ed25519_key.pub')).toBe(imageKey);
  });

  it('a SIGTERM while they are made leaves none behind', async () => {
    const { vm, boot, imageKey } = await runs.stopped;
    expect(boot.exitCode, boot.stderr).toBe(1);
    expect((await vm.reportKinds()).at(-1)).toBe('NotReady/ProvisioningFailed');
    expect(await leftovers(vm)).toEqual([]);
    expect(await vmFile(vm, '/etc/ssh/ssh_host_ed25519_key.pub')).toBe(imageKey);
  });
});
