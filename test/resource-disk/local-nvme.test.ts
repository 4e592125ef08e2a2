/**
 * Indexing the local NVMe disks: by azure-vm-utils' /dev/disk/azure/local/by-index/<N> links (made from each disk's own
 * Identify Namespace data, N from 1, not in kernel order) when every disk has its own, else 1, 2, … in kernel order.
 * The device directory is a temporary tree with the links laid out as azure-vm-utils' rule makes them (relative).
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BY_INDEX_DIR, localDisks } from '../../src/resource-disk/local-nvme.js';

let dev: string;
beforeEach(() => {
  dev = mkdtempSync(path.join(tmpdir(), 'bootstate-dev-'));
  mkdirSync(path.join(dev, BY_INDEX_DIR), { recursive: true });
});
afterEach(() => rmSync(dev, { recursive: true, force: true }));

function node(name: string) {
  writeFileSync(path.join(dev, name), '');
}
function byIndex(index: string, name: string) {
  symlinkSync(`../../../../${name}`, path.join(dev, BY_INDEX_DIR, index));
}

describe('localDisks', () => {
  it('orders and shows the disks by azure-vm-utils\' index when every one has its own (as on a D16alds_v6: nvme3n1 is index 1)', () => {
    for (const n of ['nvme1n1', 'nvme2n1', 'nvme3n1', 'nvme4n1', 'nvme1n1p1']) node(n);
    byIndex('2', 'nvme1n1');
    byIndex('3', 'nvme2n1');
    byIndex('1', 'nvme3n1');
    byIndex('4', 'nvme4n1');
    byIndex('1-part1', 'nvme1n1p1');
    const local = localDisks(['nvme1n1', 'nvme2n1', 'nvme3n1', 'nvme4n1'], dev);
    expect(local.orderedBy).toBe('azure-vm-utils index');
    expect(local.disks.map((d) => [d.index, d.name])).toEqual([[1, 'nvme3n1'], [2, 'nvme1n1'], [3, 'nvme2n1'], [4, 'nvme4n1']]);
    expect(local.disks[0]).toEqual({ name: 'nvme3n1', device: path.join(dev, 'nvme3n1'), index: 1, shown: `${path.join(dev, BY_INDEX_DIR, '1')} (${path.join(dev, 'nvme3n1')})` });
  });

  it.each([
    ['no by-index links at all (no azure-vm-utils, or Lsv3 disks without an index)', [] as Array<[string, string]>],
    ['a disk without its own index', [['1', 'nvme2n1']] as Array<[string, string]>],
    ['two links to one disk', [['1', 'nvme1n1'], ['2', 'nvme1n1']] as Array<[string, string]>],
    ['a dangling link', [['1', 'nvme9n1'], ['2', 'nvme2n1']] as Array<[string, string]>],
  ])('falls back to kernel order, numbered from 1, with %s', (_, links) => {
    for (const n of ['nvme1n1', 'nvme2n1']) node(n);
    for (const [index, name] of links) byIndex(index, name);
    const local = localDisks(['nvme1n1', 'nvme2n1'], dev);
    expect(local).toEqual({
      orderedBy: 'kernel order',
      disks: [
        { name: 'nvme1n1', device: path.join(dev, 'nvme1n1'), index: 1, shown: path.join(dev, 'nvme1n1') },
        { name: 'nvme2n1', device: path.join(dev, 'nvme2n1'), index: 2, shown: path.join(dev, 'nvme2n1') },
      ],
    });
  });
});
