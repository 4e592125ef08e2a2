// Builds the plain-Node program in dist/, which runs with no node_modules beside it:
//   bootstate.mjs            the entry (`bin`): a small loader, scripts/loader.mjs
//   bootstate.bundle.js      everything else, one minified CommonJS bundle wrapped as a function for vm.Script
//   bootstate.bundle.js.cache  V8's code cache for it, made here by one run of the built program
// One bundle rather than esbuild's split ESM chunks: Node 20 can only give a code cache to a vm.Script, and with
// the cache V8 never parses the parts a run does not call (graph rendering, the inspector), so they cost only
// their bytes on disk; the subcommands other than `provision` are still evaluated only when asked for.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { bundleOptions, root } from './bundle.mjs';
import { buildNativeAddons } from './build-native.mjs';

const dist = join(root, 'dist');
mkdirSync(dist, { recursive: true });
buildNativeAddons();
const bundle = join(dist, 'bootstate.bundle.js');
await build({
  ...bundleOptions(bundle),
  banner: { js: '(function (exports, require, module, __filename, __dirname) {' },
  footer: { js: '})' },
});

const entry = join(dist, 'bootstate.mjs');
copyFileSync(join(root, 'scripts/loader.mjs'), entry);
// `bin` points here: installed as a command, it runs through its shebang.
chmodSync(entry, 0o755);

rmSync(`${bundle}.cache`, { force: true });
execFileSync(process.execPath, [entry, '--version'], { env: { ...process.env, BOOTSTATE_CODE_CACHE: 'write' }, stdio: 'ignore' });
