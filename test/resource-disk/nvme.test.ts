/**
 * Several local NVMe disks (`[resource_disk] local_nvme`): the disks are loop devices shown as local NVMe disks through
 * a fake sysfs tree (controller model `Microsoft NVMe Direct Disk v2`) and a temporary /dev holding `nvme<N>n1` links to
 * them and azure-vm-utils' by-index links, read by the real per-disk probe (sfdisk, blkid). This machine's kernel has
 * neither md nor device-mapper, so `mdadm` is a recording fake: its "array" is a file it creates, which the real
 * mkfs.ext4 formats; an assembled array is a fake sysfs entry (md/level, slaves/). `mount` is a recording fake too
 * (it appends to the pass's own mount table): nothing is mounted on this machine. Partitioning in `each` mode and mkfs
 * are real, on the loop devices. Every other command runs for real.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { appendFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, type ResourceDiskConfig } from '../../src/config/defaults.js';
import { run, type Runner } from '../../src/system/exec.js';
import { BY_INDEX_DIR } from '../../src/resource-disk/local-nvme.js';
import { resourceDiskPass, type PassEnv } from '../../src/resource-disk/pass.js';
import { devNumber } from '../../src/resource-disk/probe.js';
import { canSandbox, createSandbox, REPO, runInSandbox, type Sandbox } from '../e2e/ns.js';

const MiB = 1024 * 1024;
const NVME_LOCAL = 'Microsoft NVMe Direct Disk v2';

let root: string;
let env: PassEnv;
let logged: Array<{ level: number; msg: string }>;
let calls: string[][];
/** Per-test answers of the fake `blkid` for a device, where the real one cannot say it (md member signatures). */
let blkidAnswers: Map<string, string>;
const loops: string[] = [];

const at = (p: string) => path.join(root, p);

/** The recording runner: mdadm, mount and udevadm are fakes, blkid may be answered, the rest runs for real. */
const recording: Runner = async (argv, options) => {
  calls.push(argv);
  const ok = (stdout = '') => ({ argv, exitCode: 0, signal: null, stdout, stderr: '', endedBy: 'exit' as const });
  if (argv[0] === 'mdadm') {
    const array = argv[2]!;
    await mkdir(path.dirname(array), { recursive: true });
    await writeFile(array, '');
    await run(['truncate', '--size', String(16 * MiB), array]);
    return ok();
  }
  if (argv[0] === 'mount') {
    const [source, where] = argv.slice(-2) as [string, string];
    await appendFile(env.mountinfo, `99 1 ${devNumber(source)} / ${where} rw,relatime - ext4 ${source} rw\n`);
    return ok();
  }
  if (argv[0] === 'udevadm') return ok();
  if (argv[0] === 'blkid' && blkidAnswers.has(argv.at(-1)!)) return ok(blkidAnswers.get(argv.at(-1)!));
  return run(argv, options);
};

beforeEach(async () => {
  if (!canSandbox) return;
  root = await mkdtemp(path.join(tmpdir(), 'bootstate-nvme-'));
  for (const dir of ['sys/class/block', 'sys/dev/block', `dev/${BY_INDEX_DIR}`, 'etc/systemd/system', 'mnt']) await mkdir(at(dir), { recursive: true });
  await writeFile(at('mountinfo'), '');
  await writeFile(at('swaps'), 'Filename\tType\tSize\tUsed\tPriority\n');
  calls = [];
  logged = [];
  blkidAnswers = new Map();
  const sink = new Writable({ write: (chunk: Buffer, _e, done) => (logged.push(JSON.parse(chunk.toString()) as { level: number; msg: string }), done()) });
  env = {
    run: recording,
    log: pino({ level: 'debug' }, sink),
    sysRoot: at('sys'),
    devDir: at('dev'),
    mountinfo: at('mountinfo'),
    swaps: at('swaps'),
    unitDir: at('etc/systemd/system'),
    fstab: at('etc/fstab'),
    systemd: false,
    requireAzure: false,
  };
});
afterEach(async () => {
  if (!canSandbox) return;
  for (const loop of loops.splice(0)) {
    await run(['partx', '--delete', loop], { allowFailure: true });
    await run(['losetup', '--detach', loop], { allowFailure: true });
  }
  await rm(root, { recursive: true, force: true });
});

type Content = 'blank' | 'ext4';

/**
 * A loop device holding `content`, shown as local NVMe disk `nvme<controller>n1` (and, with `index`, as azure-vm-utils'
 * `/dev/disk/azure/local/by-index/<index>`). Its sysfs `dev/block` entry is the kernel's own, for its partitions.
 */
async function localDisk(controller: number, content: Content, index?: number): Promise<{ image: string; device: string }> {
  const image = at(`disk-${controller}.img`);
  await writeFile(image, '');
  await run(['truncate', '--size', String(16 * MiB), image]);
  if (content === 'ext4') await run(['mkfs.ext4', '-q', '-F', '-L', 'user-data', image]);
  const loop = (await run(['losetup', '--find', '--show', image])).stdout.trim();
  loops.push(loop);
  const name = `nvme${controller}n1`;
  const ctrl = at(`sys/devices/pci0000:00/0000:00:0${controller}.0/nvme/nvme${controller}`);
  await mkdir(path.join(ctrl, name), { recursive: true });
  await writeFile(path.join(ctrl, 'model'), `${NVME_LOCAL.padEnd(40)}\n`);
  await symlink(path.join(ctrl, name), at(`sys/class/block/${name}`));
  const numbers = devNumber(loop);
  await symlink(`/sys/dev/block/${numbers}`, at(`sys/dev/block/${numbers}`));
  await symlink(loop, at(`dev/${name}`));
  if (index !== undefined) await symlink(`../../../../${name}`, at(`dev/${BY_INDEX_DIR}/${index}`));
  return { image, device: at(`dev/${name}`) };
}

const sha256 = async (file: string) => createHash('sha256').update(await readFile(file)).digest('hex');
const config = (local_nvme: ResourceDiskConfig['local_nvme'], extra: Partial<ResourceDiskConfig> = {}): ResourceDiskConfig => ({
  ...DEFAULT_CONFIG.resource_disk,
  mount_point: at('mnt'),
  local_nvme,
  ...extra,
});
const warnings = () => logged.filter((l) => l.level === 40).map((l) => l.msg);
const messages = () => logged.map((l) => l.msg);
/** The commands that write to a disk or mount one. */
const writes = () => calls.filter((c) => ['mdadm', 'mkfs.ext4', 'mount', 'mknod'].includes(c[0]!) || (c[0] === 'sfdisk' && !c.includes('--json')));

describe.skipIf(!canSandbox)('several local NVMe disks', { timeout: 180_000 }, () => {
  it('by default leaves every local NVMe disk alone, blank or not, naming them (none is formatted, not even the first)', async () => {
    const disks = [await localDisk(1, 'blank', 2), await localDisk(2, 'blank', 1), await localDisk(3, 'blank', 3)];
    const before = await Promise.all(disks.map((d) => sha256(d.image)));
    const outcome = await resourceDiskPass(config('leave'), env);
    expect(outcome).toMatchObject({ result: 'left-alone', why: 'local NVMe disks are left alone (local_nvme = "leave")' });
    expect(writes()).toEqual([]);
    expect(calls).toEqual([]);
    expect(messages().join('\n')).toContain(`local NVMe disks left alone: ${at(`dev/${BY_INDEX_DIR}/1`)} (${at('dev/nvme2n1')}), ${at(`dev/${BY_INDEX_DIR}/2`)} (${at('dev/nvme1n1')})`);
    expect(await Promise.all(disks.map((d) => sha256(d.image)))).toEqual(before);
  });

  it('raid0: every disk blank → one mdadm RAID0 array over all of them in azure-vm-utils\' index order, ext4 on it, mounted at the mount point', async () => {
    const disks = [await localDisk(1, 'blank', 3), await localDisk(2, 'blank', 1), await localDisk(3, 'blank', 2)];
    const outcome = await resourceDiskPass(config('raid0'), env);
    const array = at('dev/md/azure-resource');
    expect(outcome, JSON.stringify(logged)).toMatchObject({ result: 'formatted', device: array });
    expect(writes()).toEqual([
      ['mdadm', '--create', array, '--level=0', '--raid-devices=3', '--metadata=1.2', '--homehost=any', '--name=azure-resource', disks[1]!.device, disks[2]!.device, disks[0]!.device],
      ['mkfs.ext4', '-F', '-q', '-L', 'azure-resource', array],
      ['mount', '-t', 'ext4', '-o', 'defaults', array, at('mnt')],
    ]);
    expect((await run(['blkid', '-p', '-o', 'value', '-s', 'LABEL', array])).stdout.trim()).toBe('azure-resource');
    const unit = await readFile(path.join(env.unitDir, (await import('../../src/resource-disk/units.js')).mountUnitName(at('mnt'))), 'utf8');
    expect(unit).toContain(`What=${array}\nWhere=${at('mnt')}\nType=ext4\n`);
    expect(warnings()).toEqual([]);
  });

  it('raid0: one disk holding a filesystem leaves all of them alone, byte for byte, with one warning naming it', async () => {
    const disks = [await localDisk(1, 'blank', 1), await localDisk(2, 'ext4', 2), await localDisk(3, 'blank', 3)];
    const before = await Promise.all(disks.map((d) => sha256(d.image)));
    const outcome = await resourceDiskPass(config('raid0'), env);
    expect(outcome.result).toBe('left-alone');
    expect(writes()).toEqual([]);
    expect(warnings()).toEqual([`local NVMe disks left alone, all 3 of them: ${at(`dev/${BY_INDEX_DIR}/2`)} (${disks[1]!.device}): it holds a ext4 filesystem on the whole disk, not Azure's NTFS`]);
    expect(await Promise.all(disks.map((d) => sha256(d.image)))).toEqual(before);
    expect(existsSync(at('dev/md'))).toBe(false);
  });

  it('raid0: an array the kernel assembled over exactly these disks holding our ext4 is only mounted; one that is ours and empty gets its filesystem; another is left', async () => {
    const disks = [await localDisk(1, 'blank'), await localDisk(2, 'blank')];
    await mkdir(at('sys/devices/virtual/block/md127/md'), { recursive: true });
    await mkdir(at('sys/devices/virtual/block/md127/slaves'));
    await writeFile(at('sys/devices/virtual/block/md127/md/level'), 'raid0\n');
    for (const n of ['nvme1n1', 'nvme2n1']) await symlink(at(`sys/class/block/${n}`), at(`sys/devices/virtual/block/md127/slaves/${n}`));
    await symlink(at('sys/devices/virtual/block/md127'), at('sys/class/block/md127'));
    await writeFile(at('dev/md127'), '');
    await run(['truncate', '--size', String(16 * MiB), at('dev/md127')]);
    await mkdir(at('dev/md'));
    await symlink('../md127', at('dev/md/azure-resource'));
    const array = at('dev/md/azure-resource');

    // Ours, assembled, without a filesystem yet (a pass cut short after mdadm): the members carry our md name.
    for (const d of disks) blkidAnswers.set(d.device, 'TYPE=linux_raid_member\nLABEL=any:azure-resource\n');
    const empty = await resourceDiskPass(config('raid0'), env);
    expect(empty, JSON.stringify(logged)).toMatchObject({ result: 'formatted', device: array });
    expect(writes()).toEqual([
      ['mkfs.ext4', '-F', '-q', '-L', 'azure-resource', array],
      ['mount', '-t', 'ext4', '-o', 'defaults', array, at('mnt')],
    ]);

    // The next boot: only mounted.
    calls = [];
    await writeFile(env.mountinfo, '');
    const again = await resourceDiskPass(config('raid0'), env);
    expect(again).toMatchObject({ result: 'mounted', device: array });
    expect(writes()).toEqual([['mount', '-t', 'ext4', '-o', 'defaults', array, at('mnt')]]);

    // An array over them that someone else made and formatted: left alone.
    calls = [];
    await writeFile(env.mountinfo, '');
    await run(['mkfs.ext4', '-q', '-F', '-L', 'user-data', at('dev/md127')]);
    for (const d of disks) blkidAnswers.set(d.device, 'TYPE=linux_raid_member\nLABEL=db-host:data\n');
    const theirs = await resourceDiskPass(config('raid0'), env);
    expect(theirs.result).toBe('left-alone');
    expect(writes()).toEqual([]);
    expect(warnings()).toContain(`local NVMe disks left alone: RAID0 array ${array} over the local NVMe disks holds ext4, and its md name is not bootstate's`);
  });

  it('raid0: mdadm failing (not installed, or it refused) fails the pass with why, and nothing else is written', async () => {
    await localDisk(1, 'blank');
    await localDisk(2, 'blank');
    env.run = async (argv, options) => {
      if (argv[0] === 'mdadm') throw new Error('spawn mdadm ENOENT');
      return recording(argv, options);
    };
    const outcome = await resourceDiskPass(config('raid0'), env);
    expect(outcome).toMatchObject({ result: 'failed', why: 'making the RAID0 array failed: Error: spawn mdadm ENOENT' });
    expect(writes()).toEqual([]);
  });

  it('raid0: mdadm returning before udev made /dev/md/<label> → the kernel\'s md node over exactly these disks is formatted and mounted', async () => {
    await localDisk(1, 'blank');
    await localDisk(2, 'blank');
    env.run = async (argv, options) => {
      if (argv[0] !== 'mdadm') return recording(argv, options);
      calls.push(argv);
      const md = at('sys/devices/virtual/block/md127');
      await mkdir(path.join(md, 'md'), { recursive: true });
      await mkdir(path.join(md, 'slaves'));
      await writeFile(path.join(md, 'md/level'), 'raid0\n');
      for (const n of ['nvme1n1', 'nvme2n1']) await symlink(at(`sys/class/block/${n}`), path.join(md, 'slaves', n));
      await symlink(md, at('sys/class/block/md127'));
      await writeFile(at('dev/md127'), '');
      await run(['truncate', '--size', String(16 * MiB), at('dev/md127')]);
      return { argv, exitCode: 0, signal: null, stdout: '', stderr: '', endedBy: 'exit' };
    };
    const outcome = await resourceDiskPass(config('raid0'), env);
    expect(outcome, JSON.stringify(logged)).toMatchObject({ result: 'formatted', device: at('dev/md127') });
    expect(writes().slice(1)).toEqual([
      ['mkfs.ext4', '-F', '-q', '-L', 'azure-resource', at('dev/md127')],
      ['mount', '-t', 'ext4', '-o', 'defaults', at('dev/md127'), at('mnt')],
    ]);
  });

  it('each: GPT and ext4 on every disk, mounted at <mount point>/<index>; the next boot only mounts them; one disk holding anything leaves all alone', async () => {
    const disks = [await localDisk(1, 'blank', 2), await localDisk(2, 'blank', 1)];
    const first = await resourceDiskPass(config('each'), env);
    expect(first, JSON.stringify(logged)).toMatchObject({ result: 'formatted' });
    expect(warnings()).toEqual([]);
    const mounts = calls.filter((c) => c[0] === 'mount');
    expect(mounts).toEqual([
      ['mount', '-t', 'ext4', '-o', 'defaults', `${disks[1]!.device}p1`, at('mnt/1')],
      ['mount', '-t', 'ext4', '-o', 'defaults', `${disks[0]!.device}p1`, at('mnt/2')],
    ]);
    for (const d of disks) {
      const table = JSON.parse((await run(['sfdisk', '--json', d.device])).stdout) as { partitiontable: { label: string; partitions: Array<{ name: string }> } };
      expect(table.partitiontable.label).toBe('gpt');
      expect(table.partitiontable.partitions.map((p) => p.name)).toEqual(['azure-resource']);
    }

    calls = [];
    await writeFile(env.mountinfo, '');
    const second = await resourceDiskPass(config('each'), env);
    expect(second).toMatchObject({ result: 'mounted' });
    expect(writes().filter((c) => c[0] !== 'mount')).toEqual([]);
    expect(calls.filter((c) => c[0] === 'mount')).toEqual(mounts);

    // The unit started again on the same boot: each disk is mounted at its own place already, nothing to do.
    calls = [];
    const restarted = await resourceDiskPass(config('each'), env);
    expect(restarted, JSON.stringify(logged)).toMatchObject({ result: 'mounted' });
    expect(writes()).toEqual([]);
    expect(warnings()).toEqual([]);

    // A user's filesystem on one of them: nothing is mounted or written, the warning names it.
    calls = [];
    await writeFile(env.mountinfo, '');
    await run(['mkfs.ext4', '-q', '-F', '-L', 'user-data', `${disks[0]!.device}p1`]);
    const third = await resourceDiskPass(config('each'), env);
    expect(third.result).toBe('left-alone');
    expect(writes()).toEqual([]);
    expect(warnings()).toEqual([`local NVMe disks left alone, all 2 of them: ${at(`dev/${BY_INDEX_DIR}/2`)} (${disks[0]!.device}): partition 1 holds ext4, not Azure's NTFS`]);
  });

  it.each([
    ['its unit is enabled', async () => symlink('/usr/lib/systemd/system/azure-ephemeral-disk-setup.service', at('etc/systemd/system/multi-user.target.wants/azure-ephemeral-disk-setup.service')), 'is enabled'],
    ['its fstab line mounts the mount point', async () => writeFile(at('etc/fstab'), `# /etc/fstab\nUUID=1 / ext4 defaults 0 1\nLABEL=AzureEphmDsk ${at('mnt')} ext4 defaults,nofail,comment=azure-ephemeral-disk-setup 0 2\n`), 'mounts azure-vm-utils\' disk'],
    ['its fstab line mounts a directory under it', async () => writeFile(at('etc/fstab'), `LABEL=AzureEphmDsk ${at('mnt/nvme')} ext4 defaults,nofail,comment=azure-ephemeral-disk-setup 0 2\n`), 'mounts azure-vm-utils\' disk'],
  ])('stands aside for azure-vm-utils\' setup when %s: no disk is read, one warning says why', async (_, arrange, why) => {
    await mkdir(at('etc/systemd/system/multi-user.target.wants'), { recursive: true });
    await arrange();
    const disks = [await localDisk(1, 'blank', 1), await localDisk(2, 'blank', 2)];
    const before = await Promise.all(disks.map((d) => sha256(d.image)));
    const outcome = await resourceDiskPass(config('raid0'), env);
    expect(outcome.result).toBe('left-alone');
    expect(calls).toEqual([]);
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toContain(why);
    expect(warnings()[0]).toMatch(/^no disk is touched: /);
    expect(await Promise.all(disks.map((d) => sha256(d.image)))).toEqual(before);
  });

  it('does not stand aside for a masked setup unit, nor for its fstab line at another mount point', async () => {
    await mkdir(at('etc/systemd/system/multi-user.target.wants'), { recursive: true });
    await symlink('/usr/lib/systemd/system/azure-ephemeral-disk-setup.service', at('etc/systemd/system/multi-user.target.wants/azure-ephemeral-disk-setup.service'));
    await symlink('/dev/null', at('etc/systemd/system/azure-ephemeral-disk-setup.service'));
    await writeFile(at('etc/fstab'), `LABEL=AzureEphmDsk /data ext4 defaults,nofail,comment=azure-ephemeral-disk-setup 0 2\n`);
    await localDisk(1, 'blank');
    await localDisk(2, 'blank');
    const outcome = await resourceDiskPass(config('raid0'), env);
    expect(outcome.result, JSON.stringify(logged)).toBe('formatted');
    expect(calls.some((c) => c[0] === 'mdadm')).toBe(true);
  });
});

describe.skipIf(!canSandbox)('bootstate resource-disk, the command, on a VM with local NVMe disks only', { timeout: 180_000 }, () => {
  let sandbox: Sandbox;
  beforeEach(async () => {
    sandbox = await createSandbox({ generation: 2 });
  });
  afterEach(async () => sandbox.cleanup());

  it('as installed (no local_nvme setting) leaves them alone, exits 0 and says so in the journal and the KVP outcome', async () => {
    for (const controller of [1, 2]) {
      const ns = sandbox.hostPath(`/fake-sys/devices/pci0000:00/0000:00:0${controller}.0/nvme/nvme${controller}/nvme${controller}n1`);
      await mkdir(ns, { recursive: true });
      await writeFile(path.join(ns, '../model'), `${NVME_LOCAL.padEnd(40)}\n`);
      await symlink(ns, sandbox.hostPath(`/sys/class/block/nvme${controller}n1`));
    }
    await mkdir(sandbox.hostPath('/var/lib/hyperv'), { recursive: true });
    const file = sandbox.hostPath('/etc/bootstate-test.toml');
    await writeFile(file, `[resource_disk]\nmount_point = "${sandbox.hostPath('/mnt-temp')}"\n[log_path]\npath = ""\n`);
    const result = await runInSandbox(sandbox, [process.execPath, '--import', 'tsx', 'src/cli.ts', 'resource-disk', '--config', file, '--log-format', 'json'], { cwd: REPO, timeoutMs: 120_000 });
    expect(result.exitCode, result.stderr).toBe(0);
    const log = result.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string });
    expect(log.filter((l) => l.level >= 40)).toEqual([]);
    expect(log.map((l) => l.msg)).toContain('local NVMe disks left alone: /dev/nvme1n1, /dev/nvme2n1 ([resource_disk] local_nvme = "leave"; "raid0" or "each" would use them when blank)');
    const pool = (await readFile(sandbox.hostPath('/var/lib/hyperv/.kvp_pool_1'))).toString('utf8').replace(/\0+/g, ' ');
    expect(pool).toContain('left-alone /dev/nvme1n1 /dev/nvme2n1: local NVMe disks are left alone (local_nvme = "leave")');
    expect(await readdir(sandbox.hostPath('/etc/systemd/system')).catch(() => [])).toEqual([]);
  });
});
