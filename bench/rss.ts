/**
 * Peak resident memory (VmHWM, from GNU time's %M) of a whole `--scratch` provisioning against a loopback
 * fabric, next to `node -e 0`'s. Target: ≤ 60 MiB.
 *
 *   node --import tsx bench/rss.ts
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dropFromPageCache } from '../scripts/build/page-cache.mjs';
import { type Build, NODE_E0, type Row, builds, interleave, median, report, startFabric, timeProvisioning } from './harness.js';

const TIME = '/usr/bin/time';
const MARK = 'bench-max-rss-kib=';
if (!existsSync(TIME)) throw new Error(`${TIME} (GNU time) is needed for peak RSS: apt-get install time`);

const measured = (build: Build): Build => ({ name: build.name, argv: [TIME, '-f', `${MARK}%M`, ...build.argv] });
const peakMiB = (stderr: string) => {
  const kib = Number(new RegExp(`${MARK}(\\d+)`).exec(stderr)?.[1]);
  if (!Number.isFinite(kib)) throw new Error(`no peak RSS in: ${stderr.slice(-500)}`);
  return kib / 1024;
};

// The executable as a first boot finds it, on disk: mapped from the page cache a build or a copy wrote it through,
// its code comes in large folios, which adds several MiB to the figure (scripts/build/page-cache.mjs).
for (const build of builds()) if (build.argv[0] !== process.execPath) dropFromPageCache(build.argv[0]);

const fabric = await startFabric();
try {
  const variants: Record<string, () => Promise<number>> = {
    [NODE_E0.name]: async () => peakMiB(spawnSync(TIME, ['-f', `${MARK}%M`, ...NODE_E0.argv], { encoding: 'utf8' }).stderr),
  };
  for (const build of builds()) variants[build.name] = async () => peakMiB((await timeProvisioning(measured(build), fabric)).stderr);
  const samples = await interleave(variants);
  const floor = median(samples[NODE_E0.name]);
  const rows: Row[] = builds().map((build) => ({
    metric: `peak RSS of a provisioning run, ${build.name}`,
    median: median(samples[build.name]),
    unit: 'MiB',
    floor,
    floorName: NODE_E0.name,
    ratio: median(samples[build.name]) / floor,
    target: '≤ 60 MiB',
  }));
  report('rss', rows);
} finally {
  await fabric.close();
}
