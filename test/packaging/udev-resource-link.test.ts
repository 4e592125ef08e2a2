/**
 * `/dev/disk/azure/resource` is named by three rule files: bootstate's (packaging/udev), WALinuxAgent's
 * 66-azure-storage.rules and azure-vm-utils' 80-azure-disk.rules. If two of them named different devices, the link
 * would lead to whichever udev handled last. Here bootstate's rule file itself runs under the real `udevadm test`, in a
 * mount namespace whose /sys is a fake tree laid out like an Azure VM's (VMBus channels with their device ids, SCSI
 * hosts, targets and LUNs with vendor and model, block devices and partitions, NVMe controllers and namespaces) and
 * whose /dev and /run are empty, over every device of several VMs, including devices Azure does not present at the
 * resource disk's place. The other two rules are transcribed below as facts (what each one matches), not copied:
 * neither ships on this machine, and azure-vm-utils is not packaged for Debian 12.
 *
 * 60-persistent-storage.rules sets the ID_VENDOR and ID_MODEL azure-vm-utils reads from `scsi_id`, which needs a real
 * SCSI device: a stand-in program gives the same values from the same inquiry data (sysfs vendor and model: trailing
 * blanks dropped, inner blanks as `_`).
 */
import { lstatSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../src/system/exec.js';
import { canSandbox, REPO } from '../e2e/ns.js';

const OUR_RULE = path.join(REPO, 'packaging/udev/66-bootstate-resource-disk.rules');
const VMBUS = 'devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00';
const GEN1_OS = '00000000-0000-8899-0000-000000000000';
const GEN1_RESOURCE = '00000000-0001-8899-0000-000000000000';
const SCSI0 = 'f8b3781a-1e82-4818-a1c3-63d806ec15bb';
const SCSI1 = 'f8b3781b-1e82-4818-a1c3-63d806ec15bb';
const SCSI2 = 'f8b3781c-1e82-4818-a1c3-63d806ec15bb';

interface ScsiDevice {
  kind: 'scsi';
  name: string;
  /** The VMBus channel's device id, without braces. */
  channel: string;
  host: number;
  lun: number;
  vendor: string;
  model: string;
  partitions?: number;
}
interface NvmeDevice {
  kind: 'nvme';
  controller: number;
  nsid: number;
  model: string;
}
type Device = ScsiDevice | NvmeDevice;

const disk = (name: string, channel: string, host: number, lun: number, extra: Partial<ScsiDevice> = {}): ScsiDevice => ({
  kind: 'scsi',
  name,
  channel,
  host,
  lun,
  vendor: 'Msft',
  model: 'Virtual Disk',
  ...extra,
});
const nvme = (controller: number, nsid: number, model: string): NvmeDevice => ({ kind: 'nvme', controller, nsid, model });

/** VMs as Azure presents them, and devices at the resource disk's place that Azure does not present. */
const VMS: Record<string, Device[]> = {
  'Generation 1 with a data disk': [disk('sda', GEN1_OS, 0, 0, { partitions: 2 }), disk('sdb', GEN1_RESOURCE, 1, 0, { partitions: 1 }), disk('sdc', SCSI1, 3, 0)],
  'Generation 2 with a DVD and data disks on two controllers': [
    disk('sda', SCSI0, 0, 0, { partitions: 3 }),
    disk('sdb', SCSI0, 0, 1, { partitions: 2 }),
    disk('sr0', SCSI0, 0, 2, { model: 'Virtual DVD-ROM' }),
    disk('sdc', SCSI1, 1, 0, { partitions: 1 }),
    disk('sdd', SCSI2, 2, 1),
  ],
  'Lsv3: a SCSI resource disk beside local NVMe disks': [disk('sda', SCSI0, 0, 0), disk('sdb', SCSI0, 0, 1, { partitions: 1 }), nvme(0, 1, 'Microsoft NVMe Direct Disk'), nvme(1, 1, 'Microsoft NVMe Direct Disk')],
  'v6: remote NVMe OS and data disks, local NVMe disks, no SCSI resource disk': [nvme(0, 1, 'MSFT NVMe Accelerator v1.0'), nvme(0, 2, 'MSFT NVMe Accelerator v1.0'), nvme(1, 1, 'Microsoft NVMe Direct Disk v2'), nvme(2, 1, 'Microsoft NVMe Direct Disk v2')],
  'another model at Gen2 LUN 1': [disk('sda', SCSI0, 0, 0), disk('sdb', SCSI0, 0, 1, { model: 'Virtual Disk 2', partitions: 1 })],
  'another vendor at the Gen1 resource channel': [disk('sda', GEN1_OS, 0, 0), disk('sdb', GEN1_RESOURCE, 1, 0, { vendor: 'Msft2' })],
};

/** The block devices of `device`: the disk and its partitions, with DEVTYPE and partition number. */
function blocks(device: Device): Array<{ name: string; partition: number | null }> {
  if (device.kind === 'nvme') return [{ name: `nvme${device.controller}n${device.nsid}`, partition: null }];
  const parts = Array.from({ length: device.partitions ?? 0 }, (_, i) => ({ name: `${device.name}${i + 1}`, partition: i + 1 }));
  return [{ name: device.name, partition: null }, ...parts];
}

const scsiAddress = (d: ScsiDevice) => `${d.host}:0:0:${d.lun}`;
const blanksTrimmed = (s: string) => s.replace(/ +$/, '').replace(/ /g, '_');

/**
 * WALinuxAgent's 66-azure-storage.rules (config/66-azure-storage.rules), as facts: on add/change of any block device,
 * its vendor and model test reads `ATTRS{ID_VENDOR}` and `ATTRS{ID_MODEL}`, sysfs attributes no device has, so it never
 * skips one; a device under the VMBus channel whose id matches `?00000000-0000-*` is `root`, `?00000000-0001-*` is
 * `resource`; under `{f8b3781a-…}` the LUN (fourth field of the SCSI address its `device` link names) 0 is `root`,
 * 1 is `resource`. Disks get `disk/azure/<name>`, partitions `disk/azure/<name>-part<N>`.
 */
function waagentNamesResource(device: Device): boolean {
  if (device.kind === 'nvme') return false;
  if (device.channel.startsWith('00000000-0000-')) return false;
  if (device.channel.startsWith('00000000-0001-')) return true;
  return device.channel === SCSI0 && device.lun === 1;
}

/**
 * azure-vm-utils' 80-azure-disk.rules (udev/80-azure-disk.rules), as facts: on add/change of a block device whose
 * ID_VENDOR is `Msft` and ID_MODEL `Virtual_Disk` (NVMe namespaces take other branches and are named under
 * `disk/azure/local`, `os` or `data`, from their controller model and namespace data): the channel id
 * `?00000000-0000-*` is `os`, `{f8b3781a-…}` LUN 0 `os`, `{f8b3781b…d-…}` `data`, then `?00000000-0001-*` or
 * `{f8b3781a-…}` LUN 1 is `resource`. Disks get `disk/azure/resource`, partitions `disk/azure/resource-part<N>`.
 */
function azureVmUtilsNamesResource(device: Device): boolean {
  if (device.kind === 'nvme') return false;
  if (blanksTrimmed(device.vendor) !== 'Msft' || blanksTrimmed(device.model) !== 'Virtual_Disk') return false;
  if (device.channel.startsWith('00000000-0000-')) return false;
  if (device.channel.startsWith('00000000-0001-')) return true;
  return device.channel === SCSI0 && device.lun === 1;
}

let scratch: string;

/** Writes `file`, making its directory. */
async function put(file: string, text: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, text);
}
/** A relative symlink at `link` to `target`, as sysfs makes them (once: devices share channels and controllers). */
async function link(link: string, target: string): Promise<void> {
  await mkdir(path.dirname(link), { recursive: true });
  if (!lstatSync(link, { throwIfNoEntry: false })) await symlink(path.relative(path.dirname(link), target), link);
}

/** A sysfs tree holding `devices`, laid out as the kernel does on Azure. */
async function buildSysfs(sys: string, devices: Device[]): Promise<void> {
  let minor = 0;
  const blockDevice = async (dir: string, name: string, devtype: string, major: number, partition: number | null) => {
    const m = minor++;
    await put(path.join(dir, 'uevent'), `MAJOR=${major}\nMINOR=${m}\nDEVNAME=${name}\nDEVTYPE=${devtype}\n${partition ? `PARTN=${partition}\n` : ''}`);
    await put(path.join(dir, 'dev'), `${major}:${m}\n`);
    if (partition) await put(path.join(dir, 'partition'), `${partition}\n`);
    await link(path.join(dir, 'subsystem'), path.join(sys, 'class/block'));
    await link(path.join(sys, 'class/block', name), dir);
  };
  for (const device of devices) {
    if (device.kind === 'nvme') {
      const ctrl = path.join(sys, `devices/pci0000:00/0000:00:0${device.controller}.0/nvme/nvme${device.controller}`);
      await put(path.join(ctrl, 'model'), `${device.model.padEnd(40)}\n`);
      await link(path.join(ctrl, 'subsystem'), path.join(sys, 'class/nvme'));
      const ns = path.join(ctrl, `nvme${device.controller}n${device.nsid}`);
      await put(path.join(ns, 'nsid'), `${device.nsid}\n`);
      await link(path.join(ns, 'device'), ctrl);
      await blockDevice(ns, `nvme${device.controller}n${device.nsid}`, 'disk', 259, null);
      continue;
    }
    const channel = path.join(sys, VMBUS, device.channel);
    await put(path.join(channel, 'device_id'), `{${device.channel}}\n`);
    await link(path.join(channel, 'subsystem'), path.join(sys, 'bus/vmbus'));
    const host = path.join(channel, `host${device.host}`);
    const target = path.join(host, `target${device.host}:0:0`);
    const scsi = path.join(target, scsiAddress(device));
    for (const dir of [host, target, scsi]) await link(path.join(dir, 'subsystem'), path.join(sys, 'bus/scsi'));
    await put(path.join(scsi, 'vendor'), `${device.vendor.padEnd(8)}\n`);
    await put(path.join(scsi, 'model'), `${device.model.padEnd(16)}\n`);
    await put(path.join(scsi, 'uevent'), 'DEVTYPE=scsi_device\n');
    const isCd = device.name.startsWith('sr');
    const own = path.join(scsi, 'block', device.name);
    await blockDevice(own, device.name, 'disk', isCd ? 11 : 8, null);
    // As the kernel links it: up to the SCSI device's parent and down again, so `cut -d: -f4` reads the LUN.
    await mkdir(own, { recursive: true });
    await symlink(`../../../${scsiAddress(device)}`, path.join(own, 'device'));
    for (const part of blocks(device).filter((b) => b.partition)) await blockDevice(path.join(own, part.name), part.name, 'partition', 8, part.partition);
  }
  await addUevents(path.join(sys, 'devices'));
}

/** sd-device only takes a directory under /sys/devices for a device when it has a `uevent` file. */
async function addUevents(dir: string): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true });
  if (!entries.some((e) => e.name === 'uevent')) await writeFile(path.join(dir, 'uevent'), '');
  for (const e of entries) if (e.isDirectory()) await addUevents(path.join(dir, e.name));
}

const STAND_IN = `#!/bin/sh
# scsi_id's ID_VENDOR and ID_MODEL from the SCSI inquiry data, read from sysfs: trailing blanks dropped, blanks as _.
d=/sys/class/block/$1/device
[ -e "$d/vendor" ] || d=/sys/class/block/$1/../device
[ -e "$d/vendor" ] || exit 0
echo "ID_VENDOR=$(sed 's/ *$//; s/ /_/g' "$d/vendor")"
echo "ID_MODEL=$(sed 's/ *$//; s/ /_/g' "$d/model")"
`;

/** Inside a new mount namespace: fake /sys, empty /dev and /run, only `rules`; `udevadm test` on each device. */
const ENTER = `set -eu
sys=$1; rules=$2; shift 2
mount --bind "$sys" /sys
mount --bind "$rules" /usr/lib/udev/rules.d
mount -t tmpfs tmpfs /etc/udev/rules.d
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /dev
for name in "$@"; do
  echo "=== $name"
  SYSTEMD_DEVICE_VERIFY_SYSFS=0 SYSTEMD_LOG_LEVEL=err udevadm test --action=add "/sys/class/block/$name" 2>/dev/null | grep '^DEVLINKS=' || true
done`;

/** Device name → the links udev gives it under bootstate's rule, for every block device of `devices`. */
async function linksUnderOurRule(name: string, devices: Device[]): Promise<Map<string, string[]>> {
  const dir = await mkdtemp(path.join(scratch, 'vm-'));
  await buildSysfs(path.join(dir, 'sys'), devices);
  await mkdir(path.join(dir, 'rules'));
  await put(path.join(dir, 'rules/60-stand-in-scsi-id.rules'), `SUBSYSTEM=="block", KERNEL=="sd*|sr*", IMPORT{program}="${path.join(scratch, 'scsi-id-stand-in')} %k"\n`);
  await run(['cp', OUR_RULE, path.join(dir, 'rules')]);
  const names = devices.flatMap(blocks).map((b) => b.name);
  const result = await run(['unshare', '--mount', '--propagation', 'private', 'sh', '-c', ENTER, name, path.join(dir, 'sys'), path.join(dir, 'rules'), ...names], { timeoutMs: 120_000 });
  const out = new Map<string, string[]>();
  for (const section of result.stdout.split('=== ').slice(1)) {
    const [device = '', ...rest] = section.split('\n');
    const devlinks = rest.find((l) => l.startsWith('DEVLINKS='))?.slice('DEVLINKS='.length) ?? '';
    out.set(device, devlinks.split(' ').filter(Boolean).sort());
  }
  expect([...out.keys()].sort(), result.stderr).toEqual([...names].sort());
  return out;
}

beforeAll(async () => {
  if (!canSandbox) return;
  scratch = await mkdtemp(path.join(tmpdir(), 'bootstate-udev-'));
  await writeFile(path.join(scratch, 'scsi-id-stand-in'), STAND_IN);
  await chmod(path.join(scratch, 'scsi-id-stand-in'), 0o755);
  await chmod(scratch, 0o755);
  // udevadm comes with Debian's udev package (scripts/test-packages.txt): without it every device would read as unnamed.
  expect((await run(['udevadm', '--version'])).stdout.trim()).toMatch(/^\d+/);
  expect((await stat('/usr/lib/udev/rules.d')).isDirectory()).toBe(true);
});
afterAll(async () => {
  if (canSandbox) await rm(scratch, { recursive: true, force: true });
});

/** What the three rules name `resource` on one VM: device names, disks and partitions alike. */
function resourceNames(links: Map<string, string[]>): string[] {
  return [...links].filter(([, l]) => l.some((x) => /^\/dev\/disk\/azure\/resource(-part\d+)?$/.test(x))).map(([n]) => n).sort();
}

describe.skipIf(!canSandbox)('/dev/disk/azure/resource: bootstate\'s udev rule, WALinuxAgent\'s and azure-vm-utils\' name the same device', { timeout: 180_000 }, () => {
  it.each(Object.entries(VMS))('%s', async (vm, devices) => {
    const links = await linksUnderOurRule(vm, devices);
    const ours = resourceNames(links);
    const scsi = devices.filter((d): d is ScsiDevice => d.kind === 'scsi');
    const byFacts = (names: (d: Device) => boolean) => scsi.filter(names).flatMap(blocks).map((b) => b.name).sort();
    // azure-vm-utils names exactly the same devices; WALinuxAgent the same or, where its vendor test is void, one more
    // that ours never names, so no two rules ever name two different devices.
    expect(ours).toEqual(byFacts(azureVmUtilsNamesResource));
    for (const name of ours) expect(byFacts(waagentNamesResource)).toContain(name);
    const union = new Set([...ours, ...byFacts(waagentNamesResource), ...byFacts(azureVmUtilsNamesResource)].map((n) => n.replace(/\d+$/, '')));
    expect(union.size).toBeLessThanOrEqual(1);
    // Each named device gets the link of its kind: the disk `resource`, partition N `resource-partN`.
    for (const device of devices.filter((d) => ours.includes(blocks(d)[0]!.name))) {
      for (const b of blocks(device)) expect(links.get(b.name)).toContain(b.partition ? `/dev/disk/azure/resource-part${b.partition}` : '/dev/disk/azure/resource');
    }
    // No NVMe namespace, local or remote, is ever the resource disk.
    for (const device of devices.filter((d) => d.kind === 'nvme')) expect(links.get(blocks(device)[0]!.name)).toEqual([]);
  });

  it('names the resource disk of a Gen1 and of a Gen2 VM, and nothing else, by the facts of docs/resource-disk.md', async () => {
    expect(resourceNames(await linksUnderOurRule('gen1', VMS['Generation 1 with a data disk']!))).toEqual(['sdb', 'sdb1']);
    expect(resourceNames(await linksUnderOurRule('gen2', VMS['Generation 2 with a DVD and data disks on two controllers']!))).toEqual(['sdb', 'sdb1', 'sdb2']);
  });
});
