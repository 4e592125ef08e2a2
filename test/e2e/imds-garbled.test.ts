/**
 * A garbled IMDS answer is damage in transit (docs/protocol.md#imds-retries): a VM whose IMDS answers every request
 * with its document cut short (valid HTTP framing) asks again until the IMDS budget is spent, then provisions from
 * the provisioning media, a real ISO 9660 ovf-env.xml on a loop device, inside namespaces.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ovfDocument } from '../../src/fabric/ovf-document.js';
import { vmFile, withMedia, withVm, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox } from './ns.js';

const LOOP = existsSync('/dev/loop-control');
const TOTAL_SECS = 3;
const vms: Vm[] = [];
let booted: Promise<{ vm: Vm; boot: BootResult; key: string }>;

describe.skipIf(!canSandbox)('a first boot whose IMDS answers are always cut short, with the provisioning media attached', { timeout: 240_000 }, () => {
  beforeAll(() => {
    assertNamespaces();
    if (!LOOP) throw new Error('no loop devices (/dev/loop-control): this test attaches the provisioning media as one');
    booted = withVm(vms, `bs-garbled-${process.pid}`, { generation: 2, scenario: 'imds-truncated' }, async (vm) => {
      await mkdir(vm.sandbox.hostPath('/etc/bootstate'), { recursive: true });
      await writeFile(vm.sandbox.hostPath('/etc/bootstate/bootstate.toml'), `[imds]\ntotal_retry_timeout_secs = ${TOTAL_SECS}\nretry_interval_secs = 0.2\n`);
      const keyFile = path.join(vm.sandbox.root, 'media-key');
      execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'mediauser@garbled', '-f', keyFile]);
      const key = (await readFile(`${keyFile}.pub`, 'utf8')).trim();
      return withMedia(vm, ovfDocument({ username: 'mediauser', hostname: 'from-media', keys: [key] }), async () => ({ vm, boot: await vm.boot(), key }));
    });
    booted.catch(() => undefined);
  });

  afterAll(async () => {
    await booted?.catch(() => undefined);
    await Promise.allSettled(vms.map((vm) => vm.sandbox.cleanup()));
  });

  it('asks IMDS again until its total deadline, not once, then provisions from the media and reports Ready', async () => {
    const { vm, boot } = await booted;
    expect(boot.exitCode, boot.stderr).toBe(0);
    expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready']);
    const imds = (await vm.requests()).filter((r) => r.route === 'imds');
    expect(imds.length).toBeGreaterThan(3);
    expect(imds.at(-1)!.receivedAt - imds[0]!.receivedAt).toBeGreaterThanOrEqual((TOTAL_SECS - 1) * 1000);
  });

  it("creates the media's user with the media's key, and sets the media's hostname", async () => {
    const { vm, key } = await booted;
    expect((await vmFile(vm, '/etc/passwd')).split('\n').map((l) => l.split(':')[0])).toContain('mediauser');
    expect((await vmFile(vm, '/home/mediauser/.ssh/authorized_keys')).trim()).toBe(key);
    expect((await vmFile(vm, '/etc/hostname')).trim()).toBe('from-media');
  });
});
