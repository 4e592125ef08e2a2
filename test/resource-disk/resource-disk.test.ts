/**
 * `bootstate resource-disk` on real block devices (the rig: resource-disk-rig.ts): Azure's pristine NTFS made with
 * mkntfs, an NTFS with a user file, two foreign partitions, a blank disk, shown to a namespace sandbox as the VM's
 * temporary disk (or as a data disk, or the OS disk). The swap file is made but never enabled; the units are checked
 * with `systemd-analyze verify` instead.
 */
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { run } from '../../src/system/exec.js';
import { mountUnitName } from '../../src/resource-disk/units.js';
import { canSandbox } from '../e2e/ns.js';
import { attachDisk, DATA_CONTROLLER, kvpPool, MiB, pass, sandbox, sha256, useRig, warnings, writeLayout } from './rig.js';

useRig();

describe.skipIf(!canSandbox)('bootstate resource-disk on loop devices', () => {
  it('[ntfs-pristine] formats Azure\'s pristine NTFS (GPT, one ext4 partition), mounts it, makes a 0600 swap file; the next boot only mounts it; a redeploy\'s fresh NTFS is formatted again', async () => {
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
    ['[ntfs-user-files] an NTFS holding a user file', 'ntfs-with-user-file', {}, 'the NTFS on partition 1 holds 1 entry besides DATALOSS_WARNING_README.txt'],
    ['a disk with two foreign partitions', 'two-foreign-partitions', {}, 'partition 1 is not a Microsoft reserved partition (type 83); Azure\'s first of two partitions is one'],
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

  it('[ntfs-pristine] formats the pristine NTFS of a disk over 2 TB: GPT, a Microsoft reserved partition, the NTFS second', async () => {
    const { loop } = await attachDisk('pristine-ntfs-over-2tb');
    const result = await pass('');
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.log.map((l) => l.msg)).toContain(`temporary disk ${loop}: partition 2 holds Azure's pristine NTFS (nothing but DATALOSS_WARNING_README.txt)`);
    expect(result.mounted).toBe(`${loop}p1 ext4 azure-resource`);
  });

  it('[raw-zeros] formats a blank disk (a local NVMe disk comes so), and [ours-blank] gives our own partition its filesystem after a pass cut short', async () => {
    const { loop } = await attachDisk('blank');
    const blank = await pass('');
    expect(blank.exitCode, blank.stderr).toBe(0);
    expect(blank.log.map((l) => l.msg)).toContain(`temporary disk ${loop}: it holds no partition table and no filesystem, and reads as zeros where they or data would be`);
    expect(blank.mounted).toBe(`${loop}p1 ext4 azure-resource`);

    await writeLayout(loop, 'our-partition-without-filesystem');
    const resumed = await pass('');
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    expect(resumed.log.map((l) => l.msg)).toContain(`temporary disk ${loop}: partition 1 is bootstate's (GPT name azure-resource), has no filesystem yet and reads as zeros`);
    expect(resumed.mounted).toBe(`${loop}p1 ext4 azure-resource`);
  });

  it('[mount-point-busy] a mount point that holds files is never mounted over: the disk stays as it was, the pass fails with why', async () => {
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
