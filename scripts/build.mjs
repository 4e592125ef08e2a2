// Builds the plain-Node program in dist/, which runs with no node_modules beside it:
//   bootstate.mjs            the entry (`bin`): a small loader, scripts/loader.mjs
//   bootstate.bundle.js      everything else, one minified CommonJS bundle wrapped as a function for vm.Script
//   bootstate.bundle.js.cache  V8's code cache for it, made here by one run of the built program
//   bootstate-viz.cjs        Graphviz (WebAssembly, 1.5 MB), required only by `graph` and `trace`
// CommonJS files rather than esbuild's split ESM chunks: Node 20 can only give a code cache to a vm.Script. With
// the cache V8 never parses what a run does not call; what stays in the bundle unused (the inspector) costs only
// its bytes of source, and the subcommands other than `provision` are evaluated only when asked for. Graphviz
// alone is big enough to keep apart, since V8 holds a script's whole source in memory.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { bundleOptions, nodeBundle, root, VIZ_FILE } from './bundle.mjs';
import { buildNativeAddons } from './build-native.mjs';

const dist = join(root, 'dist');
mkdirSync(dist, { recursive: true });
buildNativeAddons();
const bundle = join(dist, 'bootstate.bundle.js');
await build({
  ...bundleOptions(bundle, { vizApart: true }),
  banner: { js: '(function (exports, require, module, __filename, __dirname) {' },
  footer: { js: '})' },
});
// Graphviz for `graph` and `trace`, required from the bundle only when one of them renders SVG.
await build({ ...nodeBundle(join(dist, VIZ_FILE)), entryPoints: ['@viz-js/viz'] });

const entry = join(dist, 'bootstate.mjs');
copyFileSync(join(root, 'scripts/loader.mjs'), entry);
// `bin` points here: installed as a command, it runs through its shebang.
chmodSync(entry, 0o755);

rmSync(`${bundle}.cache`, { force: true });
execFileSync(process.execPath, [entry, '--version'], { env: { ...process.env, BOOTSTATE_CODE_CACHE: 'write' }, stdio: 'ignore' });
