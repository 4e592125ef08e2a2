/**
 * A real boot with a temporary disk: Debian 12 (systemd-nspawn, the .deb installed, fdisk and ntfs-3g as a cloud
 * image has them) whose /dev/sdb is a loop device holding Azure's pristine NTFS, shown in /sys/class/block as LUN 1
 * of SCSI controller 0. bootstate-resource-disk.service formats and mounts it after the first boot's READY=1. No udev
 * runs in the container: the agent makes the partition's node itself from the kernel's numbers in sysfs, and the
 * mount unit names the kernel's device (on a VM, the udev rule's /dev/disk/azure/resource-part1). systemd starts no
 * swap unit inside a container, so the swap file is made and its unit refused, which the pass reports as a warning.
 */
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../src/system/exec.js';
import { canSandbox } from '../e2e/ns.js';
import { debianRoot, installDeb } from './debian-root.js';
import { agentEnded, createMachine, journal, type Boot, type Machine } from './machine.js';
import { configLayer, createRig, imdsDocument, type Rig } from './scenario.js';

const TAG = `bsr${process.pid}${randomBytes(2).toString('hex')}`;
// systemd's catalog ids for "Starting UNIT" and for a finished start job.
const UNIT_STARTING = '7d4958e842da4a758f6c1cdc7b36dcc5';
const UNIT_STARTED = '39f53479d3a045ac8e11786248231fbf';
const MiB = 1024 * 1024;

interface Seen {
  system: string;
  failedUnits: string[];
  /** `findmnt /mnt` inside the VM after the boot. */
  mounted: string;
  mountUnit: string;
  swapFile: string;
  /** The temporary disk unit: Result and exit status. */
  service: string;
  unitLog: string;
  warnings: string[];
  /** Monotonic µs from PID 1's journal. */
  bootstateReady: number | null;
  diskStarting: number | null;
  diskDone: number | null;
  sshAfter: string;
  reports: string[];
  /** The ext4's size (dumpe2fs) and its partition's in the table on the disk (sfdisk), in bytes. */
  fsBytes: number;
  partitionBytes: number;
}

let rig: Rig;
let machine: Machine | null = null;
let loop: string | null = null;
let seen: Promise<Seen>;

async function pristineNtfs(image: string): Promise<string> {
  await writeFile(image, '');
  await run(['truncate', '--size', String(64 * MiB), image]);
  const device = (await run(['losetup', '--find', '--show', image])).stdout.trim();
  await run(['sfdisk', '--quiet', device], { stdin: Buffer.from('label: dos\n,,7\n') });
  await run(['partx', '--add', device]);
  await run(['mkntfs', '--quick', '--quiet', '--label', 'Temporary Storage', `${device}p1`]);
  const warning = `${image}.txt`;
  await writeFile(warning, 'WARNING: THIS IS A TEMPORARY DISK.\n');
  await run(['ntfscp', `${device}p1`, warning, 'DATALOSS_WARNING_README.txt']);
  await run(['partx', '--delete', device]);
  return device;
}

/** Waits for the oneshot to leave `activating`: it runs after READY=1, beside the rest of the boot. */
async function diskPassEnded(boot: Boot): Promise<void> {
  for (const until = Date.now() + 300_000; Date.now() < until; ) {
    const state = (await boot.exec(['systemctl', 'show', 'bootstate-resource-disk.service', '-p', 'ActiveState', '--value'])).stdout.trim();
    if (state !== 'activating' && state !== '') return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** The ext4 bootstate made and the partition the table on the disk gives it: an ext4 larger overruns the backup GPT. */
async function sizes(out: (argv: string[]) => Promise<string>): Promise<{ fsBytes: number; partitionBytes: number }> {
  const header = await out(['dumpe2fs', '-h', '/dev/sdb1']);
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)$`, 'm').exec(header)?.[1] ?? NaN);
  const table = JSON.parse(await out(['sfdisk', '--json', '/dev/sdb'])) as { partitiontable: { sectorsize: number; partitions: Array<{ size: number }> } };
  return { fsBytes: field('Block count') * field('Block size'), partitionBytes: table.partitiontable.partitions[0]!.size * table.partitiontable.sectorsize };
}

async function observe(m: Machine, boot: Boot): Promise<Seen> {
  const system = await boot.settled();
  await diskPassEnded(boot);
  await agentEnded(boot);
  const manager = await journal(boot, ['-b', '_PID=1']);
  const at = (unit: string, id: string) => {
    const entry = manager.find((e) => e.UNIT === unit && e.MESSAGE_ID === id && (e.JOB_TYPE ?? 'start') === 'start');
    return entry ? Number(entry.__MONOTONIC_TIMESTAMP) : null;
  };
  const out = async (argv: string[]) => (await boot.exec(argv)).stdout.trim();
  const failed = await out(['systemctl', 'list-units', '--failed', '--plain', '--no-legend', '--no-pager']);
  const warned = await journal(boot, ['-b', '-u', 'bootstate-resource-disk.service', '-p', 'warning']);
  return {
    system,
    failedUnits: failed.split('\n').map((l) => l.trim().split(/\s+/)[0]!).filter(Boolean),
    mounted: (await out(['findmnt', '--noheadings', '--output', 'SOURCE,FSTYPE,LABEL', '--mountpoint', '/mnt'])).split(/\s+/).join(' '),
    mountUnit: await out(['systemctl', 'show', 'mnt.mount', '-p', 'ActiveState', '-p', 'What', '-p', 'FragmentPath']),
    swapFile: await out(['stat', '-c', '%a %s', '/mnt/swapfile']),
    service: await out(['systemctl', 'show', 'bootstate-resource-disk.service', '-p', 'Result', '-p', 'ExecMainStatus']),
    unitLog: await out(['journalctl', '--no-pager', '-q', '-b', '-u', 'bootstate-resource-disk.service', '-o', 'cat']),
    warnings: warned.filter((e) => e.SYSLOG_IDENTIFIER === 'bootstate').map((e) => e.MESSAGE ?? ''),
    bootstateReady: at('bootstate.service', UNIT_STARTED),
    diskStarting: at('bootstate-resource-disk.service', UNIT_STARTING),
    diskDone: at('bootstate-resource-disk.service', UNIT_STARTED),
    sshAfter: await out(['systemctl', 'show', 'ssh.service', '-p', 'After', '--value']),
    reports: await m.reportKinds(),
    ...(await sizes(out)),
  };
}

describe.skipIf(!canSandbox)('Debian 12 with a temporary disk holding Azure\'s pristine NTFS', () => {
  beforeAll(async () => {
    rig = await createRig();
    seen = (async () => {
      const root = await debianRoot(['fdisk', 'ntfs-3g']);
      const layer = path.join(rig.workDir, 'deb-layer-disk');
      await installDeb(root, rig.deb!, layer);
      const config = await configLayer(rig, 'resource-disk', '[resource_disk]\nswap_size_mb = 8\n');
      loop = await pristineNtfs(path.join(rig.workDir, 'temporary-disk.img'));
      machine = await createMachine({
        name: `${TAG}d`,
        workDir: rig.workDir,
        layers: [config, path.join(layer, 'upper'), root],
        imdsDocument: imdsDocument(rig.publicKey),
        temporaryDisk: { device: loop, name: 'sdb' },
      });
      const boot = await machine.boot();
      try {
        return await observe(machine, boot);
      } finally {
        await boot.shutdown();
      }
    })();
    seen.catch(() => undefined);
  }, 900_000);

  afterAll(async () => {
    await seen?.catch(() => undefined);
    await machine?.destroy().catch(() => undefined);
    if (loop) {
      await run(['partx', '--delete', loop], { allowFailure: true });
      await run(['losetup', '--detach', loop], { allowFailure: true });
    }
    await rig?.cleanup();
  }, 120_000);

  it('formats it and mounts it at /mnt through the mount unit it wrote, and the boot is not degraded', async () => {
    const s = await seen;
    expect(s.mounted, s.unitLog).toBe('/dev/sdb1 ext4 azure-resource');
    expect(s.mountUnit.split('\n').sort()).toEqual(['ActiveState=active', 'FragmentPath=/etc/systemd/system/mnt.mount', 'What=/dev/sdb1']);
    expect(s.unitLog).toContain("temporary disk /dev/sdb: partition 1 holds Azure's pristine NTFS (nothing but DATALOSS_WARNING_README.txt)");
    expect(s.unitLog).toContain('temporary disk /dev/sdb formatted and mounted at /mnt');
    expect(s.service.split('\n').sort()).toEqual(['ExecMainStatus=0', 'Result=success']);
    expect([s.system, s.failedUnits]).toEqual(['running', []]);
  }, 900_000);

  it('makes the ext4 on the partition the new table gives it, never on the old NTFS partition the kernel had (no udev, no re-read in a container)', async () => {
    const s = await seen;
    expect(s.fsBytes).toBeGreaterThan(0);
    expect(s.fsBytes).toBeLessThanOrEqual(s.partitionBytes);
  }, 900_000);

  it('makes the 0600 swap file; systemd refuses swap units in a container, which is a warning, not a failure', async () => {
    const s = await seen;
    expect(s.swapFile).toBe(`600 ${8 * MiB}`);
    expect(s.warnings).toHaveLength(1);
    expect(s.warnings[0]).toMatch(/^swap file \/mnt\/swapfile: /);
  }, 900_000);

  it('never delays Ready or SSH: it starts after the first boot\'s READY=1, ssh.service is not ordered after it, Ready was reported', async () => {
    const s = await seen;
    expect(s.bootstateReady).not.toBeNull();
    expect(s.diskStarting).not.toBeNull();
    expect(s.diskDone).not.toBeNull();
    expect(s.bootstateReady!).toBeLessThanOrEqual(s.diskStarting!);
    expect(s.diskStarting!).toBeLessThan(s.diskDone!);
    expect(s.sshAfter.split(/\s+/)).not.toContain('bootstate-resource-disk.service');
    expect(s.reports).toEqual(['NotReady/Provisioning', 'Ready']);
  }, 900_000);
});
