/**
 * bootstate-node, the architecture-independent .deb run by the distribution's nodejs, booted for real: a Debian 13
 * (trixie) root with its own nodejs, the package installed with dpkg --root (its Depends checked by dpkg, its
 * postinst run chrooted), systemd as PID 1 under systemd-nspawn and the fake fabric in the VM's network namespace,
 * as test/boot/debian-boot.test.ts does for the single executable on Debian 12. The VM provisions and the admin logs
 * in over SSH with the key the metadata carried.
 */
import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunResult } from '../../src/system/exec.js';
import { canSandbox, REPO } from '../e2e/ns.js';
import { buildDeb, debianRoot, installDeb } from './debian-root.js';
import { agentEnded, createMachine, type Machine } from './machine.js';
import { createRig, imdsDocument, type Rig } from './scenario.js';

const TAG = `bsn${process.pid}${randomBytes(2).toString('hex')}`;
const SUITE = 'trixie';

let rig: Rig;
let machine: Machine;
let seen: {
  dpkgOutput: string;
  nodeVersion: string;
  service: string;
  reports: string[];
  login: RunResult;
  failedUnits: string;
  unitLog: string;
};

describe.skipIf(!canSandbox)(`bootstate-node booted in Debian 13 (${SUITE}) with its nodejs`, { timeout: 900_000 }, () => {
  beforeAll(async () => {
    rig = await createRig({ deb: false });
    const [root, deb] = await Promise.all([debianRoot(['nodejs'], SUITE), buildDeb(REPO, path.join(rig.workDir, 'dist'), ['--node'])]);
    const layer = path.join(rig.workDir, 'node-deb-layer');
    await mkdir(layer);
    const { dpkgOutput } = await installDeb(root, deb, layer);
    const user = 'azureuser';
    machine = await createMachine({
      name: `${TAG}n`,
      workDir: rig.workDir,
      layers: [path.join(layer, 'upper'), root],
      imdsDocument: imdsDocument(rig.publicKey, { adminUsername: user, computerName: 'node-pkg' }),
    });
    const boot = await machine.boot();
    await boot.settled();
    await agentEnded(boot);
    let login = await boot.ssh(rig.key, user, 'id -un; hostname', 60_000);
    for (let attempt = 1; attempt < 3 && login.exitCode === 255 && !/Permission denied/.test(login.stderr); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      login = await boot.ssh(rig.key, user, 'id -un; hostname', 60_000);
    }
    seen = {
      dpkgOutput,
      nodeVersion: (await boot.exec(['node', '--version'])).stdout.trim(),
      service: (await boot.exec(['systemctl', 'show', 'bootstate.service', '-p', 'Result', '-p', 'ExecMainStatus'])).stdout.trim(),
      reports: await machine.reportKinds(),
      login,
      failedUnits: (await boot.exec(['systemctl', 'list-units', '--failed', '--plain', '--no-legend', '--no-pager'])).stdout.trim(),
      unitLog: (await boot.exec(['journalctl', '--no-pager', '-q', '-b', '-u', 'bootstate.service', '-o', 'cat'])).stdout,
    };
    await boot.shutdown();
  }, 900_000);

  afterAll(async () => {
    await machine?.destroy();
    await rig?.cleanup();
  });

  it("runs on the distribution's nodejs, which satisfies the package's Depends (>= 20.18)", () => {
    const [major, minor] = seen.nodeVersion.replace(/^v/, '').split('.').map(Number);
    expect(major! > 20 || (major === 20 && minor! >= 18), seen.nodeVersion).toBe(true);
  });

  it('provisions on its first boot: the unit succeeds, the fabric hears InProgress then Ready', () => {
    expect(seen.service, seen.unitLog).toMatch(/Result=success[\s\S]*ExecMainStatus=0|ExecMainStatus=0[\s\S]*Result=success/);
    expect(seen.reports).toEqual(['NotReady/Provisioning', 'Ready']);
  });

  it('lets the admin log in over SSH with the key from the metadata', () => {
    expect(seen.login.exitCode, `${seen.login.stderr}\n${seen.unitLog}`).toBe(0);
    expect(seen.login.stdout.split('\n').slice(0, 2)).toEqual(['azureuser', 'node-pkg']);
  });
});
