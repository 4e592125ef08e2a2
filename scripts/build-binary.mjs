#!/usr/bin/env node
// Builds dist/bootstate: a Node single executable application (the running node binary with the CLI injected),
// so an image needs no Node.js. Node 20's SEA runs a CommonJS main script that may require only built-ins,
// hence a separate CJS bundle (dist/bootstate-sea.cjs) next to the ESM one.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { inject } from 'postject';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dist = process.env.BOOTSTATE_DIST ? resolve(process.env.BOOTSTATE_DIST) : join(root, 'dist');
const bundle = join(dist, 'bootstate-sea.cjs');
const blob = join(dist, 'bootstate.blob');
const seaConfig = join(dist, 'sea-config.json');
const binary = join(dist, 'bootstate');
const FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

mkdirSync(dist, { recursive: true });

await build({
  entryPoints: [join(root, 'src/cli.ts')],
  outfile: bundle,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  // The executable knows it is the entry point from node:sea; import.meta has no meaning in a CommonJS bundle.
  define: { 'import.meta.url': 'undefined' },
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
});

// The code cache saves V8 compiling the bundle on every start; it must be made by the same node that runs it.
writeFileSync(
  seaConfig,
  `${JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true }, null, 2)}\n`,
);
execFileSync(process.execPath, ['--experimental-sea-config', seaConfig], { stdio: 'pipe' });

rmSync(binary, { force: true });
copyFileSync(process.execPath, binary);
chmodSync(binary, 0o755);
stripDebugSymbols(binary);
await quietly(() => inject(binary, 'NODE_SEA_BLOB', readFileSync(blob), { sentinelFuse: FUSE }));

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
