/**
 * The rule for formatting the temporary disk: every row of the decision table in docs/resource-disk.md as one case
 * (the doc's table and these cases name the same rows), then properties over every disk layout: a disk is formatted
 * only when it reads as zeros or holds nothing but Azure's pristine NTFS; ours is mounted, never made again; anything
 * in use is left.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decide, MSR_TYPE, ntfsCandidate, unexpectedNames, zerosCandidate,
  type Decision, type DiskProbe, type NtfsListing, type PartitionProbe, type Row, type ZerosEvidence,
} from '../../src/resource-disk/decide.js';
import { REPO } from '../e2e/ns.js';

const LABEL = 'azure-resource';
const TARGET = { label: LABEL, mountPoint: '/mnt' };
const MiB = 1024 * 1024;
const BASIC_DATA = 'EBD0A0A2-B9E5-4433-87C0-68B6B72699C7';
const LINUX = '0FC63DAF-8483-4772-8E79-3D69D8477DE4';
const PRISTINE: NtfsListing = { names: ['DATALOSS_WARNING_README.txt'] };
const ZEROS: ZerosEvidence = { zeros: true, bytesRead: 12 * MiB };
const DATA: ZerosEvidence = { zeros: false, offset: 512 };

const part = (number: number, fields: Partial<PartitionProbe>): PartitionProbe => ({
  number, node: `/dev/sdb${number}`, fsType: null, label: null, gptName: null, typeId: LINUX, bytes: 1024 * MiB, ...fields,
});
const disk = (fields: Partial<DiskProbe>): DiskProbe => ({ device: '/dev/sdb', table: 'gpt', wholeDiskFs: null, partitions: [], mounts: [], inUse: null, ...fields });
const ntfs1 = part(1, { fsType: 'ntfs', label: 'Temporary Storage', typeId: '7' });
const msr = part(1, { typeId: MSR_TYPE, bytes: 16 * MiB, gptName: 'Microsoft reserved partition' });
const ntfs2 = part(2, { fsType: 'ntfs', label: 'Temporary Storage', typeId: BASIC_DATA });
const ourExt4 = part(1, { fsType: 'ext4', label: LABEL, gptName: LABEL });
const ourBare = part(1, { gptName: LABEL });

interface Case {
  row: Row;
  layout: string;
  probe: DiskProbe;
  listing?: NtfsListing;
  zeros?: ZerosEvidence;
  action: Decision['action'];
}

/** One case per row of the doc's table, in its order. */
const CASES: Case[] = [
  { row: 'in-use', layout: 'a partition is active swap', probe: disk({ partitions: [ourExt4], inUse: '/dev/sdb1 is active swap' }), action: 'leave' },
  { row: 'mounted-elsewhere', layout: 'a partition is mounted elsewhere', probe: disk({ table: 'dos', partitions: [ntfs1], mounts: [{ node: '/dev/sdb1', where: '/data' }] }), listing: PRISTINE, action: 'leave' },
  { row: 'ours-mounted', layout: 'our ext4, mounted at the mount point', probe: disk({ partitions: [ourExt4], mounts: [{ node: '/dev/sdb1', where: '/mnt' }] }), action: 'mount' },
  { row: 'ours', layout: 'our ext4', probe: disk({ partitions: [ourExt4] }), action: 'mount' },
  { row: 'ours-blank', layout: 'our partition, no filesystem, zeros', probe: disk({ partitions: [ourBare] }), zeros: ZEROS, action: 'make-filesystem' },
  { row: 'ours-damaged', layout: 'our partition, no filesystem recognised, data', probe: disk({ partitions: [ourBare] }), zeros: DATA, action: 'leave' },
  { row: 'ours-unread', layout: 'our partition, no filesystem, unreadable', probe: disk({ partitions: [ourBare] }), zeros: { error: 'EIO' }, action: 'leave' },
  { row: 'raw-zeros', layout: 'no table, no filesystem, zeros', probe: disk({ table: null }), zeros: ZEROS, action: 'format' },
  { row: 'raw-data', layout: 'no table, no filesystem, data', probe: disk({ table: null }), zeros: DATA, action: 'leave' },
  { row: 'raw-unread', layout: 'no table, no filesystem, unreadable', probe: disk({ table: null }), zeros: { error: 'short read' }, action: 'leave' },
  { row: 'whole-disk-fs', layout: 'a filesystem on the whole disk', probe: disk({ table: null, wholeDiskFs: 'xfs' }), action: 'leave' },
  { row: 'no-partitions', layout: 'a table without partitions', probe: disk({}), action: 'leave' },
  { row: 'too-many-partitions', layout: 'three partitions', probe: disk({ partitions: [msr, ntfs2, part(3, {})] }), listing: PRISTINE, action: 'leave' },
  { row: 'first-not-msr', layout: 'two partitions, the first not an MSR', probe: disk({ partitions: [part(1, { typeId: BASIC_DATA, bytes: 16 * MiB }), ntfs2] }), listing: PRISTINE, action: 'leave' },
  { row: 'not-ntfs', layout: 'one ext4 partition, not ours', probe: disk({ partitions: [part(1, { fsType: 'ext4', label: 'data' })] }), action: 'leave' },
  { row: 'ntfs-wrong-type', layout: 'NTFS in a Linux partition', probe: disk({ partitions: [part(1, { fsType: 'ntfs', typeId: LINUX })] }), listing: PRISTINE, action: 'leave' },
  { row: 'ntfs-unread', layout: 'NTFS that cannot be listed', probe: disk({ table: 'dos', partitions: [ntfs1] }), listing: { error: 'ntfs-3g could not mount it read-only' }, action: 'leave' },
  { row: 'ntfs-user-files', layout: 'NTFS with a user file', probe: disk({ table: 'dos', partitions: [ntfs1] }), listing: { names: ['DATALOSS_WARNING_README.txt', 'a\nDATALOSS_WARNING_README.txt'] }, action: 'leave' },
  { row: 'ntfs-pristine', layout: 'Azure\'s pristine NTFS', probe: disk({ table: 'dos', partitions: [ntfs1] }), listing: PRISTINE, action: 'format' },
];

/** Rows the pass itself decides after the rule (prepare.ts), tested on loop devices (resource-disk*.test.ts). */
const PASS_ROWS = ['stale-kernel', 'ours-does-not-mount', 'mount-point-busy'];

/** The row ids in the first column of the decision table in docs/resource-disk.md. */
function documentedRows(): string[] {
  const doc = readFileSync(path.join(REPO, 'docs/resource-disk.md'), 'utf8');
  const table = doc.slice(doc.indexOf('## The decision table'));
  return [...table.matchAll(/^\| `([a-z-]+)` \|/gm)].map((m) => m[1]!);
}

/** The evidence decide() is given, as the pass gathers it: only for the candidates the rule names. */
function decideAsPassDoes(c: Pick<Case, 'probe' | 'listing' | 'zeros'>): Decision {
  const listing = ntfsCandidate(c.probe, LABEL) ? (c.listing ?? null) : null;
  const zeros = zerosCandidate(c.probe, LABEL) ? (c.zeros ?? null) : null;
  return decide(c.probe, TARGET, listing, zeros);
}

describe('the decision table', () => {
  it('every row of docs/resource-disk.md has a case here or a loop-device test, and every case a row', () => {
    const rows = documentedRows();
    expect(rows.length).toBeGreaterThan(CASES.length);
    expect(rows).toEqual([...CASES.map((c) => c.row), ...PASS_ROWS]);
    const loopTests = ['resource-disk.test.ts', 'keeps-data.test.ts'].map((f) => readFileSync(path.join(REPO, 'test/resource-disk', f), 'utf8')).join('\n');
    for (const row of [...PASS_ROWS, 'raw-data', 'ours-damaged', 'ntfs-user-files', 'first-not-msr', 'ntfs-pristine', 'raw-zeros', 'ours-blank']) {
      expect(loopTests, `a loop-device test for row ${row}`).toContain(`[${row}]`);
    }
  });

  it.each(CASES)('[$row] $layout → $action', (c) => {
    const decision = decideAsPassDoes(c);
    expect(decision).toMatchObject({ row: c.row, action: c.action });
  });
});

const partition = fc.record({
  fsType: fc.constantFrom(null, 'ntfs', 'ext4', 'xfs', 'vfat', 'swap'),
  label: fc.constantFrom(null, LABEL, 'Temporary Storage', 'data'),
  gptName: fc.constantFrom(null, LABEL, 'Microsoft reserved partition', 'Basic data partition'),
  typeId: fc.constantFrom('7', '83', MSR_TYPE, BASIC_DATA, LINUX),
  bytes: fc.constantFrom(16 * MiB, 128 * MiB, 17 * MiB, 4096 * MiB),
});

const probeArb: fc.Arbitrary<DiskProbe> = fc
  .record({
    table: fc.constantFrom(null, 'gpt', 'dos'),
    wholeDiskFs: fc.constantFrom(null, 'ext4', 'LVM2_member', 'ntfs'),
    parts: fc.array(partition, { maxLength: 4 }),
    mounted: fc.constantFrom(null, '/mnt', '/data'),
    inUse: fc.constantFrom(null, '/dev/sdb1 is active swap'),
  })
  .map(({ table, wholeDiskFs, parts, mounted, inUse }) => {
    const partitions = table === null ? [] : parts.map((p, i) => ({ ...p, number: i + 1, node: `/dev/sdb${i + 1}` }));
    return {
      device: '/dev/sdb',
      table,
      wholeDiskFs: table === null ? wholeDiskFs : null,
      partitions,
      mounts: mounted && partitions[0] ? [{ node: partitions[0].node, where: mounted }] : [],
      inUse,
    };
  });

const names = fc.array(fc.constantFrom('DATALOSS_WARNING_README.txt', 'dataloss_warning_readme.txt', 'System Volume Information', 'photos', 'db.sqlite', '$MFT', '\n', 'a\nDATALOSS_WARNING_README.txt'), { maxLength: 5 });
const listingArb: fc.Arbitrary<NtfsListing> = fc.oneof(names.map((n) => ({ names: n })), fc.constant({ error: 'ntfs-3g could not mount it read-only' }));
const zerosArb: fc.Arbitrary<ZerosEvidence> = fc.oneof(fc.constant(ZEROS), fc.nat().map((offset) => ({ zeros: false as const, offset })), fc.constant({ error: 'EIO' }));

describe('decide', () => {
  it('formats only a disk that reads as zeros or Azure\'s pristine NTFS: never one in use, with data, user files or other filesystems', () => {
    fc.assert(
      fc.property(probeArb, listingArb, zerosArb, (probe, listing, zeros) => {
        const decision = decideAsPassDoes({ probe, listing, zeros });
        expect(CASES.map((c) => c.row)).toContain(decision.row);
        if (decision.action === 'make-filesystem') expect([zerosCandidate(probe, LABEL), zeros]).toEqual([decision.partition, ZEROS]);
        if (decision.action !== 'format') return;
        expect(probe.inUse).toBeNull();
        expect(probe.mounts).toEqual([]);
        if (probe.table === null) {
          expect(probe.wholeDiskFs).toBeNull();
          expect(zeros).toEqual(ZEROS);
          return;
        }
        expect(probe.partitions.length).toBeGreaterThanOrEqual(1);
        expect(probe.partitions.length).toBeLessThanOrEqual(2);
        expect(probe.partitions.at(-1)!.fsType).toBe('ntfs');
        expect(['7', BASIC_DATA]).toContain(probe.partitions.at(-1)!.typeId);
        if (probe.partitions.length === 2) {
          expect(probe.table).toBe('gpt');
          expect(probe.partitions[0]).toMatchObject({ fsType: null, typeId: MSR_TYPE });
          expect([16 * MiB, 128 * MiB]).toContain(probe.partitions[0]!.bytes);
        }
        expect('names' in listing && unexpectedNames(listing.names)).toEqual([]);
      }),
      { numRuns: 3000 },
    );
  });

  it('a disk that is ours (one ext4 partition with our label) is mounted, never formatted, and left when mounted elsewhere', () => {
    fc.assert(
      fc.property(fc.constantFrom('gpt', 'dos'), fc.constantFrom(null, LABEL, 'other'), fc.constantFrom(null, '/mnt', '/data'), (table, gptName, mounted) => {
        const node = '/dev/sdb1';
        const probe = disk({ table, partitions: [part(1, { fsType: 'ext4', label: LABEL, gptName })], mounts: mounted ? [{ node, where: mounted }] : [] });
        expect(decide(probe, TARGET, null).action).toBe(mounted === '/data' ? 'leave' : 'mount');
      }),
    );
  });

  it.each([
    ['pristine', ['DATALOSS_WARNING_README.txt'], []],
    ['with System Volume Information', ['DATALOSS_WARNING_README.txt', 'System Volume Information'], []],
    ['empty', [], []],
    ['a user file', ['DATALOSS_WARNING_README.txt', 'notes.txt'], ['notes.txt']],
    ['a user file named like a metafile (readdir never lists NTFS\'s own)', ['$MFT'], ['$MFT']],
    ['a name holding a newline and Azure\'s name', ['a\nDATALOSS_WARNING_README.txt'], ['a\nDATALOSS_WARNING_README.txt']],
    ['a name that is a newline', ['\n', 'DATALOSS_WARNING_README.txt'], ['\n']],
    ['Azure\'s name twice, in two cases (POSIX namespace)', ['DATALOSS_WARNING_README.txt', 'dataloss_warning_readme.txt'], ['dataloss_warning_readme.txt']],
  ])('an NTFS root %s, listed as %j, holds what Azure never puts there', (_, listed, extra) => {
    expect(unexpectedNames(listed)).toEqual(extra);
  });

  it('the Microsoft reserved partition is checked by type and size (16 or 128 MiB) before a pristine NTFS', () => {
    const twoParts = (first: Partial<PartitionProbe>, table = 'gpt') => decideAsPassDoes({ probe: disk({ table, partitions: [{ ...msr, ...first }, ntfs2] }), listing: PRISTINE });
    expect(twoParts({})).toMatchObject({ action: 'format', row: 'ntfs-pristine' });
    expect(twoParts({ bytes: 128 * MiB })).toMatchObject({ action: 'format', row: 'ntfs-pristine' });
    expect(twoParts({ bytes: 17 * MiB })).toMatchObject({ action: 'leave', row: 'first-not-msr', why: expect.stringContaining('17 MiB') });
    expect(twoParts({ typeId: LINUX })).toMatchObject({ action: 'leave', row: 'first-not-msr', why: expect.stringContaining(LINUX) });
    expect(twoParts({ fsType: 'vfat' })).toMatchObject({ action: 'leave', row: 'first-not-msr' });
    expect(twoParts({ typeId: '7' }, 'dos')).toMatchObject({ action: 'leave', row: 'first-not-msr' });
  });

  it('a damaged own partition is never made again, and the warning names the partition and e2fsck -b', () => {
    expect(decideAsPassDoes({ probe: disk({ partitions: [ourBare] }), zeros: DATA })).toEqual({
      action: 'leave',
      row: 'ours-damaged',
      why: expect.stringMatching(/^partition 1 \(\/dev\/sdb1\) is bootstate's .*byte 512 is not zero.* e2fsck -b 32768 \/dev\/sdb1/),
    });
  });
});
