/**
 * The loop-device rig of the temporary disk tests: loop devices carrying real disk images, shown to a namespace
 * sandbox as the VM's temporary disk through a /sys/class/block entry laid out like Azure's (or as a data disk), and
 * one `bootstate resource-disk` pass inside the sandbox's mount namespace: what it mounts disappears with it, and the
 * units it writes land in the sandbox's /etc. systemd does not run there (the sandbox has its own /run), so it mounts
 * directly and leaves the swap file unenabled: swapon acts on the whole machine, which no test here owns.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach } from 'vitest';
import { run } from '../../src/system/exec.js';
import { GEN2_SCSI0_DEVICE_ID } from '../../src/resource-disk/find.js';
import { canSandbox, createSandbox, REPO, runInSandbox, type Sandbox } from '../e2e/ns.js';

export const DATA_CONTROLLER = 'f8b3781b-1e82-4818-a1c3-63d806ec15bb';
export const MiB = 1024 * 1024;

export let sandbox: Sandbox;
const loops: string[] = [];

/** A fresh sandbox for each test of the file that calls it; its loop devices detached afterwards. */
export function useRig(): void {
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
}

export type Layout = 'pristine-ntfs' | 'pristine-ntfs-over-2tb' | 'ntfs-with-user-file' | 'two-foreign-partitions' | 'blank' | 'our-partition-without-filesystem';

/** Writes `layout` onto `loop` (whole disk: the old table and signatures go first). */
export async function writeLayout(loop: string, layout: Layout): Promise<void> {
  await run(['partx', '--delete', loop], { allowFailure: true });
  await run(['wipefs', '--all', '--quiet', loop]);
  if (layout === 'blank') return;
  if (layout === 'our-partition-without-filesystem') {
    // As the agent's own partitioning leaves it when cut short before mkfs: zeros where the partition is sampled.
    await run(['dd', 'if=/dev/zero', `of=${loop}`, 'bs=1M', 'conv=fsync', 'status=none'], { allowFailure: true });
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
export async function attachDisk(layout: Layout, place: { deviceId?: string; lun?: number } = {}): Promise<{ loop: string; image: string }> {
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

export const sha256 = async (file: string) => createHash('sha256').update(await readFile(file)).digest('hex');

export interface Pass {
  exitCode: number | null;
  log: Array<{ level: number; msg: string }>;
  /** `findmnt` of the mount point inside the sandbox, right after the pass. */
  mounted: string;
  /** `stat` and blkid TYPE of the swap file, right after the pass. */
  swapFile: string;
  stderr: string;
}

/** One `bootstate resource-disk` inside the sandbox, then what its mount namespace looks like. */
export async function pass(settings: string): Promise<Pass> {
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

export const warnings = (p: Pass) => p.log.filter((l) => l.level === 40).map((l) => l.msg);
export const kvpPool = () => readFile(sandbox.hostPath('/var/lib/hyperv/.kvp_pool_1')).then((b) => b.toString('utf8').replace(/\0+/g, ' '), () => '');

