/**
 * What the markers' fsyncs cost (docs/durability.md): the report-pending marker (file + directory fsync, before
 * Ready) and the provisioned marker (one directory fsync, after Ready), each against the way both used to be
 * written — an atomic temp file + rename with its own fsyncs, and a directory fsync after removing report-pending.
 * Runs in a directory on the file system of /var/lib, where data_dir lives.
 *
 *   node --import tsx bench/markers.ts
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { syncDir, writeFileAtomic } from '../src/system/atomic.js';
import { FileMarkerStore } from '../src/provision/marker.js';
import { interleave, report, RUNS, versus } from './harness.js';

const base = mkdtempSync(join('/var/lib', 'bootstate-bench-markers-'));
const timed = async (fn: () => Promise<void>) => {
  const start = performance.now();
  await fn();
  return performance.now() - start;
};

try {
  const store = new FileMarkerStore(join(base, 'data'));
  const atomicDir = join(base, 'atomic');
  let vmId = randomUUID();
  const variants = {
    pending: () => timed(() => store.markReportPending((vmId = randomUUID()))),
    provisioned: () => timed(() => store.markProvisioned(vmId)),
    atomicPending: () => timed(() => writeFileAtomic(join(atomicDir, `${(vmId = randomUUID())}.report-pending`), '', { mode: 0o600 })),
    atomicProvisioned: () =>
      timed(async () => {
        await writeFileAtomic(join(atomicDir, `${vmId}.provisioned`), '', { mode: 0o600 });
        await rm(join(atomicDir, `${vmId}.report-pending`), { force: true });
        await syncDir(atomicDir);
      }),
  };
  mkdirSync(atomicDir, { recursive: true });
  const pending = await interleave({ ours: variants.pending, atomic: variants.atomicPending }, RUNS);
  // A provisioned marker follows the pending one of the same VM id, as in a run; only the former is timed.
  const provisioned = await interleave(
    {
      ours: async () => (await variants.pending(), variants.provisioned()),
      atomic: async () => (await variants.atomicPending(), variants.atomicProvisioned()),
    },
    RUNS,
  );
  report('markers', [
    versus('report-pending marker, before Ready (file + directory fsync)', pending.ours, 'temp file + rename, 2 fsyncs', pending.atomic),
    versus('provisioned marker, after Ready (directory fsync; removal unsynced)', provisioned.ours, 'temp file + rename + synced removal, 3 fsyncs', provisioned.atomic),
  ]);
} finally {
  rmSync(base, { recursive: true, force: true });
}
