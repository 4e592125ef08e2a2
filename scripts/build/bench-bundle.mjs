#!/usr/bin/env node
// Shows what the program's four scripts are made of (scripts/build/bundle.mjs): bytes per package (or source folder),
// largest first, because every byte of a script is read and held in memory whenever that script runs.
// Usage: node scripts/build/bench-bundle.mjs [--top 20]
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { manifest, scriptsBuildOptions } from './bundle.mjs';

const { values } = parseArgs({ options: { top: { type: 'string', default: '20' } } });

for (const options of await scriptsBuildOptions('dist')) {
  const result = await build({ ...options, write: false, metafile: true });
  const output = Object.values(result.metafile.outputs)[0];
  const groups = new Map();
  for (const [file, { bytesInOutput }] of Object.entries(output.inputs)) {
    groups.set(groupOf(file), (groups.get(groupOf(file)) ?? 0) + bytesInOutput);
  }
  const rows = [...groups].sort((a, b) => b[1] - a[1]);
  process.stdout.write(`total ${kib(output.bytes)} KiB in ${options.outfile}\n`);
  for (const [group, bytes] of rows.slice(0, Number(values.top))) {
    process.stdout.write(`${kib(bytes).padStart(7)} KiB  ${((100 * bytes) / output.bytes).toFixed(1).padStart(5)} %  ${group}\n`);
  }
}
manifest.check();

/** `node_modules/@scope/name/…` → `@scope/name`; `src/os/…` → `src/os`. */
function groupOf(file) {
  const parts = file.split('/');
  const at = parts.lastIndexOf('node_modules');
  if (at >= 0) return parts[at + 1].startsWith('@') ? `${parts[at + 1]}/${parts[at + 2]}` : parts[at + 1];
  return parts.slice(0, 2).join('/');
}

function kib(bytes) {
  return (bytes / 1024).toFixed(0);
}
