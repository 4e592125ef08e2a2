#!/usr/bin/env node
// Builds dist/bootstate: a Node single executable application (the running node binary with the CLI injected),
// so an image needs no Node.js. It carries the plain program's scripts (scripts/build/program.mjs, built here first
// into the same directory) with their code caches and Graphviz as assets, and the plain program's loader
// (scripts/build/loader.cjs) as its main script, which reads them from the assets when it runs inside the executable.
// `--arch arm64` on an amd64 machine builds it for arm64 (scripts/build/target.mjs) into dist/arm64/, with caches
// written by the arm64 node under qemu-user when that is installed (none without it). `--no-code-cache` leaves
// the caches out (to measure what they save: bench/arm64-code-cache.ts).
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'postject';
import { assets as bundledAssets, root, SCRIPTS, scriptFile, VIZ_FILE } from './bundle.mjs';
import { dropFromPageCache } from './page-cache.mjs';
import { writeEntry } from './snapshot.mjs';
import { distFor, isCross, nodeBinaryFor, qemuFor, runnerFor, stripFor, targetArch } from './target.mjs';

const arch = targetArch();
const dist = distFor(root, arch);
const node = nodeBinaryFor(root, arch);
const blob = join(dist, 'bootstate.blob');
const seaConfig = join(dist, 'sea-config.json');
const binary = join(dist, process.argv.includes('--snapshot') ? 'bootstate-snapshot-sea' : 'bootstate');
const FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const runner = runnerFor(arch);
const withCaches = !process.argv.includes('--no-code-cache') && runner !== null;
// `--snapshot`: the executable starts from a V8 startup snapshot of the program (scripts/build/snapshot.mjs), built
// by the SEA configuration's useSnapshot, as dist/bootstate-snapshot-sea beside dist/bootstate; measured, it does
// not pay (docs/performance.md#startup-snapshot), so it is not what the .deb ships.
const withSnapshot = process.argv.includes('--snapshot');

mkdirSync(dist, { recursive: true });
execFileSync(process.execPath, [join(root, 'scripts/build/program.mjs')], { env: { ...process.env, BOOTSTATE_DIST: dist }, stdio: 'inherit' });
if (withSnapshot && isCross(arch)) throw new Error(`--snapshot: a snapshot is built by the target's own node; not for ${arch} here`);
const snapshotEntry = withSnapshot ? await writeEntry(dist) : null;
// The caches program.mjs wrote are this machine's V8's, of no use to (and crashing) another architecture's: that
// one's node writes its own, running the plain program under qemu-user as the build's runs do natively.
if (isCross(arch) && withCaches) {
  for (const script of SCRIPTS) rmSync(join(dist, `${scriptFile(script)}.cache`), { force: true });
  const warm = [join(root, 'scripts/build/warm-code-cache.ts'), join(dist, 'bootstate.cjs'), ...runner, node];
  execFileSync(process.execPath, ['--import', 'tsx', ...warm], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
}

// Every script, the caches the build's provisioning run wrote, the files the scripts read as bytes, Graphviz.
const assets = {};
// The executable runs on one architecture only: one native addon.
const ownAddon = (name) => !name.startsWith('native-') || name === `native-${arch}.node`;
for (const name of [...SCRIPTS.map(scriptFile), ...Object.keys(bundledAssets()).filter(ownAddon), VIZ_FILE]) assets[name] = join(dist, name);
// The caches go in as copies whose key lines the loop below pads (the loader reads them up to the newline).
const caches = mkdtempSync(join(tmpdir(), 'bootstate-sea-caches-'));
try {
  for (const script of withCaches ? SCRIPTS : []) {
    const name = `${scriptFile(script)}.cache`;
    assets[name] = join(caches, name);
    copyFileSync(join(dist, name), assets[name]);
  }
  // V8 reads a code cache where it lies only when it starts at a pointer-aligned address, and copies it otherwise
  // (scripts/build/loader.cjs). The executable's assets lie where the blob puts them, in a segment mapped at an address
  // congruent to its file offset modulo the page size: so each cache's key line is padded until the cache starts at
  // a multiple of 8 bytes into the binary, in file order, counting what the padding before it moved it by.
  for (let round = 1; ; round++) {
    await buildExecutable();
    const image = readFileSync(binary);
    const placed = Object.entries(assets)
      .filter(([name]) => name.endsWith('.cache'))
      .map(([name, file]) => ({ name, file, ...placement(image, readFileSync(file)) }))
      .sort((a, b) => a.at - b.at);
    let moved = 0;
    for (const { file, at, header } of placed) {
      const shift = (at + moved + header) % 8;
      if (shift === 0) continue;
      const cache = readFileSync(file);
      writeFileSync(file, Buffer.concat([cache.subarray(0, header - 1), Buffer.alloc(8 - shift, ' '), cache.subarray(header - 1)]));
      moved += 8 - shift;
    }
    if (moved === 0) break;
    if (round === 3) throw new Error(`code caches still misaligned in ${binary}: ${placed.map(({ name }) => name).join(', ')}`);
  }
} finally {
  rmSync(caches, { recursive: true, force: true });
}

/** Where a cache file's bytes start in `image`, and the length of its key line with the newline; throws if absent. */
function placement(image, cache) {
  const at = image.indexOf(cache.subarray(0, Math.min(cache.length, 4096)));
  if (at < 0 || !image.subarray(at, at + cache.length).equals(cache)) throw new Error(`a code cache is missing from ${binary}`);
  return { at, header: cache.indexOf(10) + 1 };
}

/** The blob from the assets, injected into a copy of the target's node binary (this one for this machine). */
async function buildExecutable() {
  // The main script is the loader as program.mjs wrote it (its version filled in), a few hundred lines run once: V8's
  // code cache for it would save next to nothing.
  writeFileSync(
    seaConfig,
    `${JSON.stringify({ main: snapshotEntry ?? join(dist, 'bootstate.cjs'), output: blob, disableExperimentalSEAWarning: true, useCodeCache: false, useSnapshot: snapshotEntry !== null, assets }, null, 2)}\n`,
  );
  // With useSnapshot this node runs the main script as the snapshot's builder: V8's seed fixed as in snapshot.mjs.
  execFileSync(process.execPath, [...(snapshotEntry ? ['--random-seed=1'] : []), '--experimental-sea-config', seaConfig], { stdio: 'pipe' });
  rmSync(binary, { force: true });
  copyFileSync(node, binary);
  chmodSync(binary, 0o755);
  stripDebugSymbols(binary, stripFor(arch));
  await quietly(() => inject(binary, 'NODE_SEA_BLOB', readFileSync(blob), { sentinelFuse: FUSE }));
}

// Last: the binary is left as an image holds it, on disk only, not in the page cache the build wrote it through.
dropFromPageCache(binary);
if (runner === null) {
  process.stdout.write(`${binary}: built for ${arch}; not run (${qemuFor(arch)} is not installed)\n`);
} else {
  const [command, ...args] = [...runner, binary, '--version'];
  const version = execFileSync(command, args, { env: { PATH: '/nonexistent' }, encoding: 'utf8' }).trim();
  process.stdout.write(`${binary} (${arch}): ${version}\n`);
}

/** postject's ELF writer warns about every note section it rewrites; those warnings say nothing about the result. */
async function quietly(task) {
  const warn = console.warn;
  console.warn = () => {};
  try {
    return await task();
  } finally {
    console.warn = warn;
  }
}

/** Node builds ship their symbol tables; an image has no use for them. Skipped when strip is absent. */
function stripDebugSymbols(file, strip) {
  try {
    execFileSync(strip, ['--strip-all', file], { stdio: 'ignore' });
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
  }
}
