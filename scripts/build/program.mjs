// Builds the plain-Node program in dist/, which runs with no node_modules beside it:
//   bootstate.cjs                  the entry: a small loader, scripts/build/loader.cjs
//   bootstate.mjs                  a symlink to it, the entry's documented name and `bin`
//   bootstate.bundle.js            the CLI: argument parsing, help, usage errors (scripts/build/bundle.mjs)
//   bootstate-provision.bundle.js  `bootstate provision` up to its first IMDS request, read only when it runs
//   bootstate-run.bundle.js        the rest of `bootstate provision`, read once that request is on its way
//   bootstate-commands.bundle.js   every other subcommand, read only when one of them runs
//   bootstate-otel.bundle.js       the OpenTelemetry SDK, read only by a run that exports its trace
//   *.bundle.js.cache              V8's code cache for each script, written by runs of the built program
//                                  (scripts/build/warm-code-cache.ts): one provisioning, one `report`
//   llhttp*.wasm, native-*.node    files the scripts read as bytes: undici's HTTP parser, the native addons (flock, sd_notify)
//   bootstate-viz.cjs              Graphviz (WebAssembly, the largest file), required only by `graph` and `trace`
// CommonJS scripts rather than esbuild's split ESM chunks: Node 20 can only give a code cache to a vm.Script. V8
// deserializes a script's cache whole, so a run pays for every function the cache holds: the scripts are split by
// what a run does, and what stays in a script unused costs only its bytes of source.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { assets, manifest, moduleInputs, nodeBundle, root, SCRIPTS, scriptsBuildOptions, VIZ_FILE } from './bundle.mjs';
import { buildNativeAddons } from './native.mjs';

// BOOTSTATE_DIST: another output directory (scripts/build/binary.mjs passes its own).
const dist = process.env.BOOTSTATE_DIST ? resolve(process.env.BOOTSTATE_DIST) : join(root, 'dist');
mkdirSync(dist, { recursive: true });
buildNativeAddons();
// Wrapped as a function for vm.Script, like Node wraps a CommonJS module.
const wrapper = { banner: { js: '(function (exports, require, module, __filename, __dirname) {' }, footer: { js: '})' } };
const scripts = await scriptsBuildOptions(dist);
const inputs = {};
for (const [index, options] of scripts.entries()) inputs[SCRIPTS[index]] = moduleInputs((await build({ ...options, ...wrapper, metafile: true })).metafile);
// Every stub and patch of scripts/build/manifest.mjs did its part in one of the scripts.
manifest.check();
// The run script must use the provision script's modules, never copies: a second http.ts would be a second set of
// connections that closeAll() does not close, a second marker store, a second of each.
const copied = inputs.run.filter((path) => inputs.provision.includes(path));
if (copied.length > 0) throw new Error(`modules in both the provision and the run script: ${copied.join(', ')}`);
// Graphviz for `graph` and `trace`, required from the commands script only when one of them renders SVG.
await build({ ...nodeBundle(join(dist, VIZ_FILE)), entryPoints: ['@viz-js/viz'] });
for (const [name, bytes] of Object.entries(assets())) writeFileSync(join(dist, name), bytes, { mode: 0o644 });

const entry = join(dist, 'bootstate.cjs');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const loader = readFileSync(join(root, 'scripts/build/loader.cjs'), 'utf8');
if (!loader.includes("'@BOOTSTATE_VERSION@'")) throw new Error('scripts/build/loader.cjs has no @BOOTSTATE_VERSION@ to fill');
writeFileSync(entry, loader.replace("'@BOOTSTATE_VERSION@'", JSON.stringify(version).replace(/"/g, "'")));
// Installed as a command, it runs through its shebang.
chmodSync(entry, 0o755);
const documented = join(dist, 'bootstate.mjs');
rmSync(documented, { force: true });
symlinkSync('bootstate.cjs', documented);

// The caches hold what a first boot compiles: runs against a fake fabric on loopback write them.
for (const options of scripts) rmSync(`${options.outfile}.cache`, { force: true });
execFileSync(process.execPath, ['--import', 'tsx', join(root, 'scripts/build/warm-code-cache.ts'), entry], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
