/**
 * Finding the temporary disk in sysfs trees built the way the kernel lays them out on Azure: the Gen1 resource disk by
 * its VMBus device id, the Gen2 one as LUN 1 of SCSI controller 0, local NVMe by model; the OS disk, data disks and
 * remote NVMe are never chosen.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findResourceDisk, GEN2_SCSI0_DEVICE_ID } from '../../src/resource-disk/find.js';

let sys: string;
beforeEach(() => {
  sys = mkdtempSync(path.join(tmpdir(), 'bootstate-sysfs-'));
  mkdirSync(path.join(sys, 'class/block'), { recursive: true });
});
afterEach(() => rmSync(sys, { recursive: true, force: true }));

const VMBUS = 'devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00';

/** A SCSI disk on a VMBus storage channel: /sys/class/block/<name> → …/<channel>/hostH/targetH:0:T/H:0:T:L/block/<name>. */
function scsiDisk(name: string, o: { channel: string; deviceId: string; host: number; lun: number; vendor?: string; model?: string; partitions?: number }) {
  const address = `${o.host}:0:0:${o.lun}`;
  const scsi = path.join(sys, VMBUS, o.channel, `host${o.host}`, `target${o.host}:0:0`, address);
  const block = path.join(scsi, 'block', name);
  mkdirSync(block, { recursive: true });
  writeFileSync(path.join(sys, VMBUS, o.channel, 'device_id'), `{${o.deviceId}}\n`);
  writeFileSync(path.join(scsi, 'vendor'), `${(o.vendor ?? 'Msft').padEnd(8)}\n`);
  writeFileSync(path.join(scsi, 'model'), `${(o.model ?? 'Virtual Disk').padEnd(16)}\n`);
  symlinkSync(path.relative(path.join(sys, 'class/block'), block), path.join(sys, 'class/block', name));
  for (let n = 1; n <= (o.partitions ?? 0); n++) {
    mkdirSync(path.join(block, `${name}${n}`));
    writeFileSync(path.join(block, `${name}${n}`, 'partition'), `${n}\n`);
    symlinkSync(path.relative(path.join(sys, 'class/block'), path.join(block, `${name}${n}`)), path.join(sys, 'class/block', `${name}${n}`));
  }
}

function nvmeDisk(controller: number, namespace: number, model: string) {
  const ctrl = path.join(sys, 'devices/pci0000:00/0000:00:00.0/nvme', `nvme${controller}`);
  const ns = path.join(ctrl, `nvme${controller}n${namespace}`);
  mkdirSync(ns, { recursive: true });
  writeFileSync(path.join(ctrl, 'model'), `${model.padEnd(40)}\n`);
  writeFileSync(path.join(ns, 'nsid'), `${namespace}\n`);
  symlinkSync(path.relative(path.join(sys, 'class/block'), ns), path.join(sys, 'class/block', `nvme${controller}n${namespace}`));
}

const GEN1_OS = { channel: '00000000-0000-8899-0000-000000000000', deviceId: '00000000-0000-8899-0000-000000000000', host: 0, lun: 0 };
const GEN1_RESOURCE = { channel: '00000000-0001-8899-0000-000000000000', deviceId: '00000000-0001-8899-0000-000000000000', host: 1, lun: 0 };
const GEN2 = { channel: 'f8b3781a-1e82-4818-a1c3-63d806ec15bb', deviceId: GEN2_SCSI0_DEVICE_ID, host: 0 };
const DATA = { channel: 'f8b3781b-1e82-4818-a1c3-63d806ec15bb', deviceId: 'f8b3781b-1e82-4818-a1c3-63d806ec15bb', host: 1 };

describe('findResourceDisk', () => {
  it('Gen1: the disk on the VMBus channel whose device id starts 00000000-0001-, not the OS disk on 00000000-0000-', () => {
    scsiDisk('sda', { ...GEN1_OS, partitions: 1 });
    scsiDisk('sdb', { ...GEN1_RESOURCE, partitions: 1 });
    expect(findResourceDisk(sys).disk).toMatchObject({ name: 'sdb', kind: 'gen1' });
  });

  it('Gen2: LUN 1 of SCSI controller 0, not LUN 0 (the OS disk) nor any LUN of the data controllers', () => {
    scsiDisk('sda', { ...GEN2, lun: 0, partitions: 2 });
    scsiDisk('sdb', { ...DATA, lun: 0 });
    scsiDisk('sdc', { ...DATA, lun: 1 });
    scsiDisk('sdd', { ...GEN2, lun: 1, partitions: 1 });
    expect(findResourceDisk(sys).disk).toMatchObject({ name: 'sdd', kind: 'gen2' });
  });

  it('a VM without a temporary disk: OS and data disks only, nothing found', () => {
    scsiDisk('sda', { ...GEN2, lun: 0 });
    scsiDisk('sdb', { ...DATA, lun: 1 });
    expect(findResourceDisk(sys)).toEqual({ disk: null, localNvme: [] });
  });

  it('a disk that is not a Msft Virtual Disk is never the resource disk, whatever its channel', () => {
    scsiDisk('sdb', { ...GEN1_RESOURCE, vendor: 'Msft', model: 'Virtual CD/ROM' });
    expect(findResourceDisk(sys).disk).toBeNull();
  });

  it('NVMe: no local disk is ever the temporary disk on its own; all of them are listed in kernel order, remote NVMe (MSFT NVMe Accelerator: OS and data disks) never', () => {
    nvmeDisk(0, 1, 'MSFT NVMe Accelerator v1.0');
    nvmeDisk(0, 2, 'MSFT NVMe Accelerator v1.0');
    for (const controller of [10, 1, 2]) nvmeDisk(controller, 1, 'Microsoft NVMe Direct Disk v2');
    expect(findResourceDisk(sys)).toEqual({ disk: null, localNvme: ['nvme1n1', 'nvme2n1', 'nvme10n1'] });
  });

  it('a SCSI resource disk is the temporary disk beside local NVMe disks (Lsv3 sizes have both)', () => {
    nvmeDisk(1, 1, 'Microsoft NVMe Direct Disk');
    scsiDisk('sdb', { ...GEN2, lun: 1 });
    expect(findResourceDisk(sys)).toEqual({ disk: expect.objectContaining({ name: 'sdb', kind: 'gen2' }), localNvme: ['nvme1n1'] });
  });

  it('no sysfs at all: nothing found, no error', () => {
    expect(findResourceDisk(path.join(sys, 'absent'))).toEqual({ disk: null, localNvme: [] });
  });
});
