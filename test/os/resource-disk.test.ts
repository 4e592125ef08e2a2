/**
 * `bootstate resource-disk` on real block devices: loop devices carrying real disk images (Azure's pristine NTFS made
 * with mkntfs, an NTFS with a user file, two foreign partitions), shown to a namespace sandbox as the VM's temporary
 * disk through a /sys/class/block entry laid out like Azure's (or as a data disk). The agent runs inside the sandbox's
 * mount namespace: what it mounts disappears with it, and the units it writes land in the sandbox's /etc. systemd does
 * not run there (the sandbox has its own /run), so it mounts directly and leaves the swap file unenabled: swapon acts
 * on the whole machine, which no test here owns; the units are checked with `systemd-analyze verify` instead.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, readdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { run } from '../../src/os/exec.js';
import { GEN2_SCSI0_DEVICE_ID } from '../../src/os/resource-disk/find.js';
import { mountUnitName } from '../../src/os/resource-disk/units.js';
import { canSandbox, createSandbox, REPO, runInSandbox, type Sandbox } from '../e2e/ns.js';

const DATA_CONTROLLER = 'f8b3781b-1e82-4818-a1c3-63d806ec15bb';
const MiB = 1024 * 1024;

let sandbox: Sandbox;
const loops: string[] = [];

beforeEach(async () => {
  if (!canSandbox) return;
  sandbox = await createSandbox({ generation: 2 });
});
afterEach(async () => {
  if (!canSandbox) return;
  for (const loop of loops.splice(0)) {
    await run(['partx', '--delete', loop], { allowFailure: true });
    await run(['losetup', '--detach', loop], { allowFailure: true });
  }
  await sandbox.cleanup();
});

type Layout = 'pristine-ntfs' | 'pristine-ntfs-over-2tb' | 'ntfs-with-user-file' | 'two-foreign-partitions' | 'blank' | 'our-partition-without-filesystem';

/** Writes `layout` onto `loop` (whole disk: the old table and signatures go first). */
async function writeLayout(loop: string, layout: Layout): Promise<void> {
  await run(['partx', '--delete', loop], { allowFailure: true });
  await run(['wipefs', '--all', '--quiet', loop]);
  if (layout === 'blank') return;
  if (layout === 'our-partition-without-filesystem') {
    // As the agent's own sfdisk leaves it: the new partition's old signatures wiped.
    await run(['sfdisk', '--quiet', '--wipe-partitions', 'always', loop], { stdin: Buffer.from('label: gpt\nname="azure-resource", type=linux\n') });
    return;
  }
  const tables: Record<string, string> = {
    'two-foreign-partitions': 'label: dos\n,16M,L\n,,L\n',
    // Disks over 2 TB: GPT, a Microsoft reserved partition, then the NTFS.
    'pristine-ntfs-over-2tb': 'label: gpt\n,16M,E3C9E316-0B5C-4DB8-817D-F92DF00215AE\n,,EBD0A0A2-B9E5-4433-87C0-68B6B72699C7\n',
  };
  await run(['sfdisk', '--quiet', loop], { stdin: Buffer.from(tables[layout] ?? 'label: dos\n,,7\n') });
  await run(['partx', '--add', loop]);
  if (layout === 'two-foreign-partitions') {
    await run(['mkfs.ext4', '-q', '-F', '-L', 'data', `${loop}p1`]);
    await run(['mkfs.ext4', '-q', '-F', '-L', 'logs', `${loop}p2`]);
  } else {
    const ntfs = layout === 'pristine-ntfs-over-2tb' ? `${loop}p2` : `${loop}p1`;
    await run(['mkntfs', '--quick', '--quiet', '--label', 'Temporary Storage', ntfs]);
    const warning = path.join(sandbox.root, 'DATALOSS_WARNING_README.txt');
    await writeFile(warning, 'WARNING: THIS IS A TEMPORARY DISK.\n');
    await run(['ntfscp', ntfs, warning, 'DATALOSS_WARNING_README.txt']);
    // Named like NTFS's own files, which a listing without system files would hide.
    if (layout === 'ntfs-with-user-file') await run(['ntfscp', ntfs, warning, '$results.csv']);
  }
  // A fresh boot: the kernel reads the table itself; here the agent has to ask for the partitions.
  await run(['partx', '--delete', loop]);
}

/**
 * A loop device with `layout`, shown to the sandbox as LUN `lun` of the SCSI controller with `deviceId` (default:
 * LUN 1 of controller 0, a Gen2 VM's temporary disk).
 */
async function attachDisk(layout: Layout, place: { deviceId?: string; lun?: number } = {}): Promise<{ loop: string; image: string }> {
  const image = path.join(sandbox.root, `disk-${loops.length}.img`);
  await writeFile(image, '');
  await run(['truncate', '--size', String(64 * MiB), image]);
  const loop = (await run(['losetup', '--find', '--show', image])).stdout.trim();
  loops.push(loop);
  await writeLayout(loop, layout);
  const name = path.basename(loop);
  const deviceId = place.deviceId ?? GEN2_SCSI0_DEVICE_ID;
  const scsi = path.join(sandbox.root, 'fake-sys/devices/VMBUS:00', deviceId, 'host5/target5:0:0', `5:0:0:${place.lun ?? 1}`);
  await mkdir(path.join(scsi, 'block', name), { recursive: true });
  await writeFile(path.join(scsi, '../../..', 'device_id'), `{${deviceId}}\n`);
  await writeFile(path.join(scsi, 'vendor'), 'Msft    \n');
  await writeFile(path.join(scsi, 'model'), 'Virtual Disk    \n');
  await symlink(path.join(scsi, 'block', name), sandbox.hostPath(`/sys/class/block/${name}`));
  return { loop, image };
}

const sha256 = async (file: string) => createHash('sha256').update(await readFile(file)).digest('hex');

interface Pass {
  exitCode: number | null;
  log: Array<{ level: number; msg: string }>;
  /** `findmnt` of the mount point inside the sandbox, right after the pass. */
  mounted: string;
  /** `stat` and blkid TYPE of the swap file, right after the pass. */
  swapFile: string;
  stderr: string;
}

/** One `bootstate resource-disk` inside the sandbox, then what its mount namespace looks like. */
async function pass(settings: string): Promise<Pass> {
  const mnt = sandbox.hostPath('/mnt-temp');
  const config = sandbox.hostPath('/etc/bootstate-test.toml');
  await mkdir(sandbox.hostPath('/var/lib/hyperv'), { recursive: true });
  await writeFile(config, `[resource_disk]\nmount_point = "${mnt}"\n${settings}\n[log_path]\npath = ""\n[data_dir]\npath = "/var/lib/bootstate"\n`);
  const script = `"$@"; echo "exit=$?"
findmnt --noheadings --output SOURCE,FSTYPE,LABEL --mountpoint ${mnt} || true
echo ---
stat -c '%a %s %F' ${mnt}/swapfile 2>/dev/null && blkid -p -o value -s TYPE ${mnt}/swapfile || true`;
  const result = await runInSandbox(sandbox, ['sh', '-c', script, 'pass', process.execPath, '--import', 'tsx', 'src/cli.ts', 'resource-disk', '--config', config, '--log-format', 'json'], {
    cwd: REPO,
    timeoutMs: 180_000,
  });
  const [head = '', swap = ''] = result.stdout.split('---\n');
  const exit = /exit=(\d+)/.exec(head);
  return {
    exitCode: exit ? Number(exit[1]) : null,
    mounted: head.replace(/exit=\d+\n/, '').trim().split(/\s+/).join(' '),
    swapFile: swap.trim(),
    log: result.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string }),
    stderr: result.stderr,
  };
}

const warnings = (p: Pass) => p.log.filter((l) => l.level === 40).map((l) => l.msg);
const kvpPool = () => readFile(sandbox.hostPath('/var/lib/hyperv/.kvp_pool_1')).then((b) => b.toString('utf8').replace(/\0+/g, ' '), () => '');

describe.skipIf(!canSandbox)('bootstate resource-disk on loop devices', () => {
  it('formats Azure\'s pristine NTFS (GPT, one ext4 partition), mounts it, makes a 0600 swap file; the next boot only mounts it; a redeploy\'s fresh NTFS is formatted again', async () => {
    const { loop } = await attachDisk('pristine-ntfs');
    const first = await pass('swap_size_mb = 8');
    expect(first.exitCode, first.stderr).toBe(0);
    expect(warnings(first)).toEqual([]);
    expect(first.log.map((l) => l.msg)).toContain(`temporary disk ${loop}: partition 1 holds Azure's pristine NTFS (nothing but DATALOSS_WARNING_README.txt)`);
    expect(first.mounted).toBe(`${loop}p1 ext4 azure-resource`);
    expect(first.swapFile.split('\n')).toEqual([`600 ${8 * MiB} regular file`, 'swap']);
    const table = JSON.parse((await run(['sfdisk', '--json', loop])).stdout) as { partitiontable: { label: string; partitions: Array<{ name: string }> } };
    expect(table.partitiontable.label).toBe('gpt');
    expect(table.partitiontable.partitions.map((p) => p.name)).toEqual(['azure-resource']);
    const uuid = (await run(['blkid', '-p', '-o', 'value', '-s', 'UUID', `${loop}p1`])).stdout.trim();

    // The units it wrote: mount and swap, no [Install] (only its own service starts them), valid for systemd.
    const units = sandbox.hostPath('/etc/systemd/system');
    const mountUnit = mountUnitName(sandbox.hostPath('/mnt-temp'));
    expect((await readdir(units)).sort()).toEqual([mountUnit, mountUnit.replace(/\.mount$/, '-swapfile.swap')].sort());
    const mountText = await readFile(path.join(units, mountUnit), 'utf8');
    expect(mountText).toContain(`What=${loop}p1\nWhere=${sandbox.hostPath('/mnt-temp')}\nType=ext4\nOptions=defaults\n`);
    expect(mountText).not.toContain('[Install]');
    const verify = await run(['systemd-analyze', 'verify', '--man=no', ...(await readdir(units)).map((u) => path.join(units, u))], { allowFailure: true });
    expect(verify.exitCode, verify.stderr).toBe(0);

    const second = await pass('swap_size_mb = 8');
    expect(second.exitCode, second.stderr).toBe(0);
    expect(second.log.map((l) => l.msg)).toContain(`temporary disk ${loop} mounted at ${sandbox.hostPath('/mnt-temp')}`);
    expect((await run(['blkid', '-p', '-o', 'value', '-s', 'UUID', `${loop}p1`])).stdout.trim()).toBe(uuid);
    expect(second.swapFile.split('\n')).toEqual([`600 ${8 * MiB} regular file`, 'swap']);

    await writeLayout(loop, 'pristine-ntfs');
    const redeployed = await pass('swap_size_mb = 8');
    expect(redeployed.exitCode, redeployed.stderr).toBe(0);
    expect(redeployed.log.map((l) => l.msg)).toContain(`temporary disk ${loop} formatted and mounted at ${sandbox.hostPath('/mnt-temp')}`);
    expect(redeployed.mounted).toBe(`${loop}p1 ext4 azure-resource`);
    expect((await run(['blkid', '-p', '-o', 'value', '-s', 'UUID', `${loop}p1`])).stdout.trim()).not.toBe(uuid);
    expect(redeployed.swapFile.split('\n')).toEqual([`600 ${8 * MiB} regular file`, 'swap']);
  });

  it.each([
    ['an NTFS holding a user file', 'ntfs-with-user-file', {}, 'the NTFS on partition 1 holds 1 entry besides DATALOSS_WARNING_README.txt'],
    ['a disk with two foreign partitions', 'two-foreign-partitions', {}, 'partition 1 holds ext4; Azure\'s first of two partitions holds no filesystem'],
  ] as const)('leaves %s alone, byte for byte, with a warning naming the device and why (journal and KVP)', async (_, layout, place, why) => {
    const { loop, image } = await attachDisk(layout, place);
    const before = await sha256(image);
    const result = await pass('swap_size_mb = 8');
    expect(result.exitCode, result.stderr).toBe(0);
    expect(warnings(result)).toEqual([`temporary disk ${loop} left alone: ${why}`]);
    expect(await kvpPool()).toContain(`temporary disk ${loop} left alone: ${why}`);
    expect(result.mounted).toBe('');
    await run(['partx', '--delete', loop], { allowFailure: true });
    expect(await sha256(image)).toBe(before);
    expect(await readdir(sandbox.hostPath('/etc/systemd/system')).catch(() => [])).toEqual([]);
  });

  it('formats the pristine NTFS of a disk over 2 TB: GPT, a Microsoft reserved partition, the NTFS second', async () => {
    const { loop } = await attachDisk('pristine-ntfs-over-2tb');
    const result = await pass('');
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.log.map((l) => l.msg)).toContain(`temporary disk ${loop}: partition 2 holds Azure's pristine NTFS (nothing but DATALOSS_WARNING_README.txt)`);
    expect(result.mounted).toBe(`${loop}p1 ext4 azure-resource`);
  });

  it('formats a blank disk (a local NVMe disk comes so), and gives our own partition its filesystem after a pass cut short', async () => {
    const { loop } = await attachDisk('blank');
    const blank = await pass('');
    expect(blank.exitCode, blank.stderr).toBe(0);
    expect(blank.log.map((l) => l.msg)).toContain(`temporary disk ${loop}: it holds no partition table and no filesystem`);
    expect(blank.mounted).toBe(`${loop}p1 ext4 azure-resource`);

    await writeLayout(loop, 'our-partition-without-filesystem');
    const resumed = await pass('');
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    expect(resumed.log.map((l) => l.msg)).toContain(`temporary disk ${loop}: partition 1 is bootstate's (GPT name azure-resource) and has no filesystem yet`);
    expect(resumed.mounted).toBe(`${loop}p1 ext4 azure-resource`);
  });

  it('a mount point that holds files is never mounted over: the disk stays as it was, the pass fails with why', async () => {
    const { loop, image } = await attachDisk('pristine-ntfs');
    const before = await sha256(image);
    await mkdir(sandbox.hostPath('/mnt-temp'), { recursive: true });
    await writeFile(sandbox.hostPath('/mnt-temp/keep-me'), 'data\n');
    const result = await pass('');
    expect(result.exitCode, result.stderr).toBe(1);
    expect(warnings(result)).toEqual([`temporary disk ${loop}: not formatted: ${sandbox.hostPath('/mnt-temp')} is not empty (1 entry): mounting over it would hide them`]);
    expect(result.mounted).toBe('');
    await run(['partx', '--delete', loop], { allowFailure: true });
    expect(await sha256(image)).toBe(before);
  });

  it('never touches a data disk (SCSI controller 1) or the OS disk (LUN 0), even holding a pristine NTFS', async () => {
    const data = await attachDisk('pristine-ntfs', { deviceId: DATA_CONTROLLER, lun: 1 });
    const os = await attachDisk('pristine-ntfs', { lun: 0 });
    const before = [await sha256(data.image), await sha256(os.image)];
    const result = await pass('');
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.log.map((l) => l.msg)).toContain('no temporary disk on this VM (no Azure resource disk, no local NVMe disk)');
    expect(result.mounted).toBe('');
    expect([await sha256(data.image), await sha256(os.image)]).toEqual(before);
  });

  it('off Azure (no Azure chassis asset tag) no disk is touched: on Hyper-V the same ids name the VM\'s own disks', async () => {
    await writeFile(sandbox.hostPath('/sys/class/dmi/id/chassis_asset_tag'), '\n');
    const { image } = await attachDisk('blank');
    const before = await sha256(image);
    const result = await pass('');
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.log.map((l) => l.msg)).toContain('not an Azure VM (no Azure chassis asset tag): no disk is looked at');
    expect(result.mounted).toBe('');
    expect(await sha256(image)).toBe(before);
  });

  it('[resource_disk] enable = false: the disk is not even read', async () => {
    const { image } = await attachDisk('pristine-ntfs');
    const before = await sha256(image);
    const result = await pass('enable = false');
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.log.map((l) => l.msg)).toContain('step resource-disk skipped ([resource_disk] enable = false in the configuration)');
    expect(await sha256(image)).toBe(before);
  });
});
