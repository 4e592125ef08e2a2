/**
 * Same-run A/B against another build of bootstate: the first IMDS request and Ready of this checkout's builds and of
 * the builds in another checkout's dist/ (BENCH_BASELINE=<checkout>, BENCH_BASELINE_LABEL=<what it is>, e.g. a
 * commit), interleaved round by round against one loopback fabric, so both see the same machine load. Without
 * BENCH_BASELINE it measures nothing and says so.
 *
 *   BENCH_BASELINE=/work/wt-base BENCH_BASELINE_LABEL=e6e2b76 node --import tsx bench/ab.ts
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type Build, type Row, builds, interleave, report, startFabric, timeProvisioning, versus } from './harness.js';

const base = process.env.BENCH_BASELINE;
const label = process.env.BENCH_BASELINE_LABEL ?? base;
if (!base) {
  process.stderr.write('ab: BENCH_BASELINE is not set, nothing to compare against\n');
  report('ab', []);
} else {
  const pairs: { ours: Build; theirs: Build }[] = [];
  for (const ours of builds()) {
    const file = ours.argv.length > 1 ? ours.argv[1]!.replace(/^.*\/dist\//, 'dist/') : ours.argv[0]!.replace(/^.*\/dist\//, 'dist/');
    const path = join(base, file);
    if (!existsSync(path)) throw new Error(`ab: ${path} is absent: build the baseline first`);
    pairs.push({ ours, theirs: { name: `${ours.name} @ ${label}`, argv: ours.argv.length > 1 ? [ours.argv[0]!, path] : [path] } });
  }
  const fabric = await startFabric();
  try {
    const variants: Record<string, () => Promise<{ firstImds: number; ready: number }>> = {};
    for (const { ours, theirs } of pairs) {
      variants[ours.name] = () => timeProvisioning(ours, fabric);
      variants[theirs.name] = () => timeProvisioning(theirs, fabric);
    }
    const samples = await interleave(variants);
    const of = (name: string, key: 'firstImds' | 'ready') => samples[name]!.map((s) => s[key]);
    const rows: Row[] = [];
    for (const { ours, theirs } of pairs) {
      rows.push(versus(`first IMDS request, ${ours.name}`, of(ours.name, 'firstImds'), `the same @ ${label}`, of(theirs.name, 'firstImds')));
      rows.push(versus(`time to Ready (dry run), ${ours.name}`, of(ours.name, 'ready'), `the same @ ${label}`, of(theirs.name, 'ready')));
    }
    report('ab', rows);
  } finally {
    await fabric.close();
  }
}
