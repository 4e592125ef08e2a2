/**
 * A stop once the OS is configured never turns into a failure, on a real boot (Debian 12, systemd as PID 1 under
 * systemd-nspawn, the .deb installed, the fake fabric at Azure's addresses). The image's `ssh-keygen` is wrapped so
 * that the first rsa key it is asked for takes 30 s: on Debian 12 (OpenSSH 9.2, sshd reads its keys per connection)
 * bootstate makes rsa in the background after READY=1, so the admin logs in while it is being made, and the VM is
 * halted right after that first login — between READY=1 and the Ready POST. The next boot finds the report-pending
 * marker, makes the rsa key the halt left unmade, and reports Ready; the fabric never hears ProvisioningFailed.
 */
import { chmod, mkdir, readdir, writeFile } from 'node:fs/promises';
import { existsSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canSandbox } from '../e2e/ns.js';
import { createMachine, show, until, type Boot, type Machine } from './machine.js';
import { createRig, imdsDocument, type Rig } from './scenario.js';

const TAG = `bss${process.pid}${randomBytes(2).toString('hex')}`;
const USER = 'azureuser';

/** Found before /usr/bin in the unit's PATH; the first rsa key waits 30 s (the mark is on the VM's disk: not /var/tmp, which the unit has private). */
const SLOW_RSA = `#!/bin/sh
for a in "$@"; do
  if [ "$a" = rsa ] && [ ! -e /var/lib/rsa-slowed ]; then touch /var/lib/rsa-slowed; sleep 30; fi
done
exec /usr/bin/ssh-keygen "$@"
`;

interface Halted {
  /** Health reports the fabric had when the VM was halted, and after each boot. */
  atHalt: string[];
  afterFirst: string[];
  afterSecond: string[];
  markersAfterFirst: string[];
  rsaAfterFirst: boolean;
  second: Record<string, string>;
  rsaAfterSecond: string;
  story: string;
}

let rig: Rig;
let machine: Machine | null = null;
let run: Promise<Halted>;

async function storyOf(boot: Boot): Promise<string> {
  const unit = await boot.exec(['journalctl', '--no-pager', '-q', '-b', '-u', 'bootstate.service', '-o', 'short-monotonic']);
  return `bootstate.service journal:\n${unit.stdout}\nconsole (end):\n${boot.console().slice(-3000)}`;
}

async function slowRsaLayer(): Promise<string> {
  const dir = path.join(rig.workDir, 'slow-rsa');
  await mkdir(path.join(dir, 'usr/local/bin'), { recursive: true });
  await writeFile(path.join(dir, 'usr/local/bin/ssh-keygen'), SLOW_RSA);
  await chmod(path.join(dir, 'usr/local/bin/ssh-keygen'), 0o755);
  return dir;
}

async function haltAfterFirstLogin(): Promise<Halted> {
  const m = await createMachine({ name: `${TAG}h`, workDir: rig.workDir, layers: [await slowRsaLayer(), rig.debLayer, rig.debian], imdsDocument: imdsDocument(rig.publicKey) });
  machine = m;
  const first = await m.boot();
  let story = '';
  let atHalt: string[] = [];
  try {
    await until(
      'the first key login',
      async () => ((await first.ssh(rig.key, USER, 'true', 20_000, ['-o', 'ConnectTimeout=2'])).exitCode === 0 ? true : null),
      120_000,
      () => storyOf(first),
      100,
    );
    story = await storyOf(first);
  } finally {
    // The halt: systemd stops bootstate.service (SIGTERM) while the rsa key is still being made.
    atHalt = await m.reportKinds();
    await first.shutdown();
  }
  const afterFirst = await m.reportKinds();
  const data = m.diskPath('/var/lib/bootstate');
  const markersAfterFirst = existsSync(data) ? (await readdir(data)).filter((n) => /\.(provisioned|report-pending)$/.test(n)) : [];
  // The image's key lives in a lower layer: the one the agent removed shows on the disk as a whiteout, not a file.
  const rsa1 = m.diskPath('/etc/ssh/ssh_host_rsa_key');
  const rsaAfterFirst = existsSync(rsa1) && statSync(rsa1).isFile();

  const second = await m.boot();
  const ended = await until(
    'bootstate.service ending on the second boot',
    async () => {
      const props = await show(second, 'bootstate.service', ['ActiveState', 'SubState', 'Result', 'ExecMainStatus', 'StatusText']);
      return props.SubState === 'exited' || props.SubState === 'failed' ? props : null;
    },
    180_000,
    () => storyOf(second),
  );
  const rsa = await second.exec(['ssh-keygen', '-l', '-f', '/etc/ssh/ssh_host_rsa_key.pub']);
  story += `\n--- second boot ---\n${await storyOf(second)}`;
  await second.shutdown();
  return { atHalt, afterFirst, afterSecond: await m.reportKinds(), markersAfterFirst, rsaAfterFirst, second: ended, rsaAfterSecond: rsa.stdout.trim(), story };
}

describe.skipIf(!canSandbox)('a VM halted between READY=1 and the Ready POST, on a booted Debian 12', () => {
  beforeAll(async () => {
    rig = await createRig();
    run = haltAfterFirstLogin();
    run.catch(() => undefined);
  }, 900_000);

  afterAll(async () => {
    await run?.catch(() => undefined);
    await machine?.destroy().catch(() => undefined);
    await rig?.cleanup();
  }, 120_000);

  it('was halted in the window: logged in, no Ready yet, the rsa key not yet made', async () => {
    const r = await run;
    expect(r.atHalt, r.story).not.toContain('Ready');
    expect(r.rsaAfterFirst, r.story).toBe(false);
  }, 900_000);

  it('reports nothing on the halt and leaves Ready pending for the next boot', async () => {
    const r = await run;
    expect(r.afterFirst, r.story).toEqual(['NotReady/Provisioning']);
    expect(r.markersAfterFirst, r.story).toEqual([expect.stringMatching(/\.report-pending$/)]);
  }, 900_000);

  it('boots again into Ready with every host key, and the fabric never hears ProvisioningFailed', async () => {
    const r = await run;
    expect(r.second, r.story).toMatchObject({ SubState: 'exited', Result: 'success', ExecMainStatus: '0', StatusText: 'provisioned' });
    expect(r.afterSecond, r.story).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(r.afterSecond.some((k) => k.includes('ProvisioningFailed'))).toBe(false);
    expect(r.rsaAfterSecond, r.story).toMatch(/^3072 SHA256:\S+ .*\(RSA\)$/);
  }, 900_000);
});
