#!/usr/bin/env node
// Builds dist/bootstate: a Node single executable application (the running node binary with the CLI injected),
// so an image needs no Node.js. It carries the plain program's scripts (scripts/build.mjs, built here first into
// the same directory) with their code caches and Graphviz as assets, and the plain program's loader
// (scripts/loader.cjs) as its main script, which reads them from the assets when it runs inside the executable.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'postject';
import { assets as bundledAssets, SCRIPTS, scriptFile, VIZ_FILE } from './bundle.mjs';
import { dropFromPageCache } from './page-cache.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dist = process.env.BOOTSTATE_DIST ? resolve(process.env.BOOTSTATE_DIST) : join(root, 'dist');
const blob = join(dist, 'bootstate.blob');
const seaConfig = join(dist, 'sea-config.json');
const binary = join(dist, 'bootstate');
const FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

mkdirSync(dist, { recursive: true });
execFileSync(process.execPath, [join(root, 'scripts/build.mjs')], { env: { ...process.env, BOOTSTATE_DIST: dist }, stdio: 'inherit' });

// Every script, the caches the build's provisioning run wrote, the files the scripts read as bytes, Graphviz.
const assets = {};
// The executable runs on its build's architecture only: one flock addon.
const ownAddon = (name) => !name.startsWith('flock-') || name === `flock-${process.arch}.node`;
for (const name of [...SCRIPTS.map(scriptFile), ...Object.keys(bundledAssets()).filter(ownAddon), VIZ_FILE]) assets[name] = join(dist, name);
for (const script of SCRIPTS) assets[`${scriptFile(script)}.cache`] = join(dist, `${scriptFile(script)}.cache`);
// The main script is a few lines: V8's code cache for it would save nothing.
writeFileSync(
  seaConfig,
  `${JSON.stringify({ main: join(root, 'scripts/loader.cjs'), output: blob, disableExperimentalSEAWarning: true, useCodeCache: false, assets }, null, 2)}\n`,
);
execFileSync(process.execPath, ['--experimental-sea-config', seaConfig], { stdio: 'pipe' });

rmSync(binary, { force: true });
copyFileSync(process.execPath, binary);
chmodSync(binary, 0o755);
stripDebugSymbols(binary);
await quietly(() => inject(binary, 'NODE_SEA_BLOB', readFileSync(blob), { sentinelFuse: FUSE }));

// Last: the binary is left as an image holds it, on disk only, not in the page cache the build wrote it through.
dropFromPageCache(binary);
const version = execFileSync(binary, ['--version'], { env: { PATH: '/nonexistent' }, encoding: 'utf8' }).trim();
process.stdout.write(`dist/bootstate: ${version}\n`);

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

/** Node builds ship their symbol tables (~13 MB); an image has no use for them. Skipped when strip is absent. */
function stripDebugSymbols(file) {
  try {
    execFileSync('strip', ['--strip-all', file], { stdio: 'ignore' });
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
  }
}
