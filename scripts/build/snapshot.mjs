#!/usr/bin/env node
// Builds a V8 startup snapshot of the program, opt-in (`npm run build:snapshot`; `node scripts/build/binary.mjs
// --snapshot` for the single executable): measured on Node 20.20 it costs more than it saves, so neither the plain
// program nor the `.deb` starts from one (docs/performance.md#startup-snapshot). It is kept to measure that again.
// The snapshot holds the loader (scripts/build/loader.cjs) with the CLI, provision, run and monitor scripts inlined
// and every one of their modules evaluated, so a process started from it deserializes that heap instead of
// reading, compiling and evaluating them. Nothing of the process that builds it is in it: the loader sets its V8
// flags, reads its environment, finds its files and starts undici's WebAssembly compile in the process that starts
// from it; evaluating the modules opens no file, socket or timer (Node refuses to build a snapshot with a handle
// open). The other subcommands' script and Graphviz stay files a run reads, with their code caches, when it needs them.
//   node scripts/build/snapshot.mjs [<dist>] [--entry-only]
// writes <dist>/bootstate-snapshot.cjs (the builder's entry) and, unless --entry-only, <dist>/bootstate.snapshot
// (built by this node with `--build-snapshot`) with its <dist>/bootstate.snapshot.cksum, and <dist>/bootstate-snapshot (the launcher,
// scripts/build/snapshot-launcher.sh, which falls back to the plain program when the snapshot cannot load).
// Reproducible up to Node's own build-time state: the entry is the same bytes from the same inputs; the blob,
// built with V8's random seed fixed, differs between two builds in a few dozen bytes even for an empty builder
// (test/scripts/snapshot.test.ts checks both, and that a run from it gives what a run without it gives).
import { execFileSync } from 'node:child_process';
import { chmodSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { moduleInputs, root, SCRIPTS, scriptFile, scriptsBuildOptions } from './bundle.mjs';

/** The scripts in the snapshot besides the CLI, each evaluated whole (every module it holds), in this order. */
export const SNAPSHOT_SCRIPTS = ['provision', 'run', 'monitor'];
export const ENTRY_FILE = 'bootstate-snapshot.cjs';
export const BLOB_FILE = 'bootstate.snapshot';
export const LAUNCHER_FILE = 'bootstate-snapshot';
/** V8's seed for the builder's randomness (heap layout); a process started from the snapshot reseeds its own. */
const BUILD_FLAGS = ['--random-seed=1'];

/**
 * The snapshot's own builds of its scripts: the program's (scripts/build/bundle.mjs), each also exporting every
 * module it holds, so the builder evaluates them all, the ones a run would import() on its way too. Name → text.
 */
async function snapshotScriptTexts(dist) {
  const wrapper = { banner: { js: '(function (exports, require, module, __filename, __dirname) {' }, footer: { js: '})' } };
  const options = await scriptsBuildOptions(dist);
  const texts = {};
  for (const [index, script] of SCRIPTS.entries()) {
    if (script !== 'cli' && !SNAPSHOT_SCRIPTS.includes(script)) continue;
    let scriptOptions = { ...options[index], ...wrapper, write: false };
    if (script !== 'cli') {
      const { metafile } = await build({ ...scriptOptions, metafile: true });
      const all = moduleInputs(metafile).map((path) => `${JSON.stringify(`all:${path}`)}: () => require(${JSON.stringify(`./${path}`)})`);
      const contents = scriptOptions.stdin.contents.replace(/\n\};\n$/, `,\n${all.join(',\n')}\n};\n`);
      scriptOptions = { ...scriptOptions, stdin: { ...scriptOptions.stdin, contents } };
    }
    const { outputFiles } = await build(scriptOptions);
    texts[scriptFile(script)] = outputFiles[0].text.trimEnd();
  }
  return texts;
}

/** Writes the builder's entry for the program in `dist`: the loader's text with `snapshotScripts` appended. */
export async function writeEntry(dist) {
  const loader = readFileSync(join(root, 'scripts/build/loader.cjs'), 'utf8').replace(/^#!.*\n/, '');
  const texts = await snapshotScriptTexts(dist);
  const sources = Object.entries(texts).map(([file, text]) => `    ${JSON.stringify(file)}: ${JSON.stringify(text)}`);
  const appended = `\nfunction snapshotScripts() {\n  return {\n    scripts: {\n${sources.join(',\n')}\n    },\n    warm: ${JSON.stringify(SNAPSHOT_SCRIPTS)},\n  };\n}\n`;
  const entry = join(dist, ENTRY_FILE);
  writeFileSync(entry, loader + appended, { mode: 0o644 });
  return entry;
}

/**
 * Builds `blob` from `entry` with `node` (under `runner`, e.g. qemu-user), and `<blob>.cksum`, what `cksum` says of
 * it, which the launcher compares before it runs node on the blob; throws with node's output when it fails.
 */
export function buildBlob(node, entry, blob, runner = []) {
  rmSync(blob, { force: true });
  rmSync(`${blob}.cksum`, { force: true });
  const [command, ...args] = [...runner, node, ...BUILD_FLAGS, '--snapshot-blob', blob, '--build-snapshot', entry];
  // An empty environment: nothing of the build's shell can reach the heap. Node warns about each built-in module
  // it has not verified in snapshots (node:sea, node:async_hooks): those are required, not used, while it builds.
  execFileSync(command, args, { cwd: resolve(entry, '..'), env: { PATH: '/usr/bin:/bin' }, stdio: ['ignore', 'ignore', 'pipe'] });
  writeFileSync(`${blob}.cksum`, execFileSync('cksum', [], { input: readFileSync(blob) }), { mode: 0o644 });
}

/** The launcher for the plain program in `dist`, running `node`. */
export function writeLauncher(dist, node) {
  const launcher = join(dist, LAUNCHER_FILE);
  const text = readFileSync(join(root, 'scripts/build/snapshot-launcher.sh'), 'utf8').replaceAll('@NODE@', node);
  writeFileSync(`${launcher}.tmp`, text, { mode: 0o755 });
  chmodSync(`${launcher}.tmp`, 0o755);
  renameSync(`${launcher}.tmp`, launcher);
  return launcher;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(root, 'scripts/build/snapshot.mjs')) {
  const args = process.argv.slice(2);
  const dist = resolve(args.find((arg) => !arg.startsWith('--')) ?? join(root, 'dist'));
  const entry = await writeEntry(dist);
  if (!args.includes('--entry-only')) {
    buildBlob(process.execPath, entry, join(dist, BLOB_FILE));
    writeLauncher(dist, process.execPath);
    process.stdout.write(`${join(dist, BLOB_FILE)}: built by node ${process.version}\n`);
  }
}
