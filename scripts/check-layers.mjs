#!/usr/bin/env node
// Fails when a module of src/ or machines/ imports one from a layer above its own. The layers, lowest first, are the
// table below: a module may import its own layer and those under it, never one above, so a primitive never learns
// about what uses it (src/system/ knows nothing of provisioning; the charts know nothing of the commands). Type-only
// imports count too: an upward `import type` is still an arrow the wrong way. Circles inside a layer are
// scripts/check-cycles.mjs's to find. A file in no layer (a new top-level folder of src/) fails until it is given one.
//
//   node scripts/check-layers.mjs [--root DIR]      (npm run lint runs it on this repository)
import { relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { importGraph } from './check-cycles.mjs';

/** Lowest first. A folder ends in `/`; a single file is named whole. src/<folder>/README.md says what each holds. */
export const LAYERS = [
  ['src/core/'], // errors, secrets, metadata shapes, version: imports nothing of ours
  ['src/system/'], // exec, atomic writes, safe file access, paths, flock, sd_notify, the native addon
  ['src/config/'],
  ['src/kvp/', 'src/logging/'],
  ['src/azure/', 'src/os/'], // the protocol; the OS steps behind one provisioner interface
  ['machines/'], // the charts: no I/O, only shapes and pure helpers from below
  ['src/firewall/', 'src/resource-disk/', 'src/network/', 'src/observe/', 'src/inspect/', 'src/fabric/'],
  ['src/provision/', 'src/monitor/', 'src/doctor/'],
  ['src/gate/', 'src/deprovision/'], // they read (gate) or undo (deprovision) what the units below leave on a machine
  ['src/cli/'], // argv and option tables the commands share
  ['src/commands/'],
  ['src/cli.ts'],
];

/** Upward imports known and argued, each to be removed by the change its reason names; printed, not failed. */
export const EXCEPTIONS = [];

/** The layer index of a path relative to the root (`/` separated), or -1. */
export function layerOf(path) {
  let best = -1;
  let bestLength = 0;
  LAYERS.forEach((entries, index) => {
    for (const entry of entries) {
      const hit = entry.endsWith('/') ? path.startsWith(entry) : path === entry;
      if (hit && entry.length > bestLength) [best, bestLength] = [index, entry.length];
    }
  });
  return best;
}

/** Every import that goes up a layer, every module in no layer, and the exceptions seen, for the tree at `root`. */
export function layerViolations(root) {
  const graph = importGraph([resolve(root, 'src'), resolve(root, 'machines')], { types: true });
  const name = (file) => relative(root, file).split(sep).join('/');
  const excepted = new Map(EXCEPTIONS.map(([from, to, why]) => [`${from} ${to}`, why]));
  const upward = [];
  const unplaced = new Set();
  const seen = [];
  for (const [file, edges] of graph) {
    const from = name(file);
    const own = layerOf(from);
    if (own < 0) unplaced.add(from);
    for (const target of edges.keys()) {
      const to = name(target);
      const theirs = layerOf(to);
      if (theirs < 0) unplaced.add(to);
      if (own < 0 || theirs <= own) continue;
      if (excepted.has(`${from} ${to}`)) seen.push(`${from} → ${to} (${excepted.get(`${from} ${to}`)})`);
      else upward.push(`${from} (layer ${own}) → ${to} (layer ${theirs})`);
    }
  }
  return { modules: graph.size, upward: upward.sort(), unplaced: [...unplaced].sort(), excepted: seen.sort() };
}

function main() {
  const args = process.argv.slice(2);
  const at = args.indexOf('--root');
  const root = at >= 0 ? resolve(args[at + 1]) : resolve(fileURLToPath(import.meta.url), '..', '..');
  const { modules, upward, unplaced, excepted } = layerViolations(root);
  for (const line of excepted) process.stdout.write(`known upward import: ${line}\n`);
  for (const line of upward) process.stderr.write(`upward import: ${line}\n`);
  for (const path of unplaced) process.stderr.write(`in no layer: ${path} (give its folder a layer in scripts/check-layers.mjs)\n`);
  if (upward.length > 0 || unplaced.length > 0) {
    process.stderr.write(`${upward.length} upward import${upward.length === 1 ? '' : 's'}, ${unplaced.length} module${unplaced.length === 1 ? '' : 's'} in no layer, among ${modules} modules\n`);
    process.exit(1);
  }
  process.stdout.write(`no upward imports among ${modules} modules in ${LAYERS.length} layers\n`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
