/**
 * The rule for formatting the temporary disk, as properties over every disk layout: a disk is formatted only when it
 * is blank or holds nothing but Azure's pristine NTFS; ours is mounted, never reformatted; anything in use is left.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decide, ntfsCandidate, unexpectedNames, type DiskProbe, type NtfsListing } from '../../src/os/resource-disk/decide.js';

const LABEL = 'azure-resource';
const TARGET = { label: LABEL, mountPoint: '/mnt' };

const partition = fc.record({
  fsType: fc.constantFrom(null, 'ntfs', 'ext4', 'xfs', 'vfat', 'swap'),
  label: fc.constantFrom(null, LABEL, 'Temporary Storage', 'data'),
  gptName: fc.constantFrom(null, LABEL, 'Microsoft reserved partition', 'Basic data partition'),
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

const names = fc.array(fc.constantFrom('.', '..', '$MFT', '$Volume', 'DATALOSS_WARNING_README.txt', 'dataloss_warning_readme.txt', 'System Volume Information', 'photos', 'db.sqlite', '$MyFile'), { maxLength: 5 });
const listingArb: fc.Arbitrary<NtfsListing> = fc.oneof(names.map((n) => ({ names: n })), fc.constant({ error: 'ntfsls: corrupt' }));

describe('decide', () => {
  it('formats only a blank disk or Azure\'s pristine NTFS: never a disk in use, with user files or with other filesystems', () => {
    fc.assert(
      fc.property(probeArb, listingArb, (probe, listing) => {
        const candidate = ntfsCandidate(probe, LABEL);
        const decision = decide(probe, TARGET, candidate ? listing : null);
        if (decision.action !== 'format') return;
        expect(probe.inUse).toBeNull();
        expect(probe.mounts).toEqual([]);
        if (probe.table === null) {
          expect(probe.wholeDiskFs).toBeNull();
          return;
        }
        expect(probe.partitions.length).toBeGreaterThanOrEqual(1);
        expect(probe.partitions.length).toBeLessThanOrEqual(2);
        expect(probe.partitions.at(-1)!.fsType).toBe('ntfs');
        if (probe.partitions.length === 2) expect(probe.partitions[0]!.fsType).toBeNull();
        expect(candidate).toBe(probe.partitions.at(-1));
        expect('names' in listing && unexpectedNames(listing.names)).toEqual([]);
      }),
      { numRuns: 2000 },
    );
  });

  it('a disk that is ours (one ext4 partition with our label) is mounted, never formatted, and left when mounted elsewhere', () => {
    fc.assert(
      fc.property(fc.constantFrom('gpt', 'dos'), fc.constantFrom(null, LABEL, 'other'), fc.constantFrom(null, '/mnt', '/data'), (table, gptName, mounted) => {
        const node = '/dev/sdb1';
        const probe: DiskProbe = {
          device: '/dev/sdb',
          table,
          wholeDiskFs: null,
          partitions: [{ number: 1, node, fsType: 'ext4', label: LABEL, gptName }],
          mounts: mounted ? [{ node, where: mounted }] : [],
          inUse: null,
        };
        expect(decide(probe, TARGET, null).action).toBe(mounted === '/data' ? 'leave' : 'mount');
      }),
    );
  });

  it.each([
    ['pristine NTFS', ['.', '..', '$MFT', 'DATALOSS_WARNING_README.txt'], 'format'],
    ['pristine NTFS with System Volume Information', ['DATALOSS_WARNING_README.txt', 'System Volume Information'], 'format'],
    ['NTFS with a user file', ['DATALOSS_WARNING_README.txt', 'notes.txt'], 'leave'],
    ['NTFS with a user file named like a metafile', ['DATALOSS_WARNING_README.txt', '$notes'], 'leave'],
  ])('%s → %s', (_, listed, action) => {
    const probe: DiskProbe = { device: '/dev/sdb', table: 'dos', wholeDiskFs: null, partitions: [{ number: 1, node: '/dev/sdb1', fsType: 'ntfs', label: 'Temporary Storage', gptName: null }], mounts: [], inUse: null };
    expect(decide(probe, TARGET, { names: listed }).action).toBe(action);
  });

  it('our own partition without a filesystem (a pass cut short after partitioning) gets its filesystem', () => {
    const probe: DiskProbe = { device: '/dev/sdb', table: 'gpt', wholeDiskFs: null, partitions: [{ number: 1, node: '/dev/sdb1', fsType: null, label: null, gptName: LABEL }], mounts: [], inUse: null };
    expect(decide(probe, TARGET, null)).toEqual({ action: 'make-filesystem', partition: '/dev/sdb1', why: expect.stringContaining('no filesystem yet') });
  });
});
