// Builds the plain-Node program in dist/, which runs with no node_modules beside it:
//   bootstate.mjs               the entry (`bin`): a small loader, scripts/loader.mjs
//   bootstate.bundle.js         the CLI: argument parsing, help, --version (scripts/bundle.mjs, cliScriptOptions)
//   bootstate-commands.bundle.js  every subcommand's code, read only when a subcommand runs
//   *.bundle.js.cache           V8's code cache for each, made here by one provisioning run of the built program
//   bootstate-viz.cjs           Graphviz (WebAssembly, 1.5 MB), required only by `graph` and `trace`
// CommonJS scripts rather than esbuild's split ESM chunks: Node 20 can only give a code cache to a vm.Script. With
// the cache V8 never parses what a run does not call; what stays in a script unused costs only its bytes of
// source, which V8 holds in memory. Graphviz alone is big enough to keep apart.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { cliScriptOptions, commandsScriptOptions, nodeBundle, root, VIZ_FILE } from './bundle.mjs';
import { buildNativeAddons } from './build-native.mjs';

// BOOTSTATE_DIST: another output directory (scripts/build-binary.mjs passes its own).
const dist = process.env.BOOTSTATE_DIST ? resolve(process.env.BOOTSTATE_DIST) : join(root, 'dist');
mkdirSync(dist, { recursive: true });
buildNativeAddons();
// Wrapped as a function for vm.Script, like Node wraps a CommonJS module.
const wrapper = { banner: { js: '(function (exports, require, module, __filename, __dirname) {' }, footer: { js: '})' } };
const scripts = [
  cliScriptOptions(join(dist, 'bootstate.bundle.js')),
  commandsScriptOptions(join(dist, 'bootstate-commands.bundle.js')),
];
for (const options of scripts) await build({ ...options, ...wrapper });
// Graphviz for `graph` and `trace`, required from the commands script only when one of them renders SVG.
await build({ ...nodeBundle(join(dist, VIZ_FILE)), entryPoints: ['@viz-js/viz'] });

const entry = join(dist, 'bootstate.mjs');
copyFileSync(join(root, 'scripts/loader.mjs'), entry);
// `bin` points here: installed as a command, it runs through its shebang.
chmodSync(entry, 0o755);

// The caches hold what a first boot compiles: one provisioning run against a fake fabric on loopback writes them.
for (const options of scripts) rmSync(`${options.outfile}.cache`, { force: true });
execFileSync(process.execPath, ['--import', 'tsx', join(root, 'scripts/warm-code-cache.ts'), entry], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
