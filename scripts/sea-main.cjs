// The single executable's main script (scripts/build-binary.mjs): the plain program's loader (scripts/loader.cjs)
// reading the same scripts and files from the executable's assets instead of dist/. The CLI script runs alone for
// --version, --help and usage errors; the provision and commands scripts and Graphviz are compiled only when asked
// for. Each script's code cache is the one the build's provisioning run wrote for the plain program (same node,
// same flags), minus its key line; V8 checks its version and flag hashes and compiles normally when it rejects one.
'use strict';
const { getRawAsset } = require('node:sea');
const { setFlagsFromString } = require('node:v8');
const { Script } = require('node:vm');

// The flags scripts/loader.cjs sets, and why; the same, so its code caches match.
setFlagsFromString('--liftoff-only --no-opt --no-sparkplug');

const SCRIPT = /^bootstate-script:([a-z]+)\/(.+)$/;
const scripts = new Map();
/** WebAssembly each script needs, compiled in the background while the script loads and starts (as the loader). */
const WASM_OF = { provision: ['llhttp_simd.wasm'] };
const wasm = new Map();
const cli = load('bootstate.bundle.js');
cli.runAsProgram();

/** The loader's own require() names: another script's module, the CLI's exports, an asset's bytes, Graphviz. */
function answer(id) {
  const script = SCRIPT.exec(id);
  if (script) {
    const [, name, path] = script;
    if (!scripts.has(name)) {
      for (const file of WASM_OF[name] ?? []) compileInBackground(file);
      scripts.set(name, load(`bootstate-${name}.bundle.js`));
    }
    return scripts.get(name)[path]?.();
  }
  if (id === 'bootstate-cli') return cli;
  // A view of the executable's own mapped bytes, not a copy.
  if (id.startsWith('bootstate-asset:')) return Buffer.from(getRawAsset(id.slice('bootstate-asset:'.length)));
  if (id.startsWith('bootstate-wasm:')) {
    const file = id.slice('bootstate-wasm:'.length);
    return wasm.get(file)?.module ?? new WebAssembly.Module(getRawAsset(file));
  }
  // Graphviz is an ordinary CommonJS file, required by `graph` and `trace` only.
  if (id === './bootstate-viz.cjs') return load('bootstate-viz.cjs', true);
  return undefined;
}

function compileInBackground(file) {
  if (wasm.has(file)) return;
  const entry = { module: null };
  wasm.set(file, entry);
  try {
    WebAssembly.compile(getRawAsset(file)).then((module) => (entry.module = module), () => {});
  } catch {
    // compiled again on the main thread when asked for, which reports what fails
  }
}

/** Evaluates one asset as a CommonJS module whose require() first asks `answer`, then Node's (built-ins only here). */
function load(name, unwrapped = false) {
  const bytes = Buffer.from(getRawAsset(name));
  const source = unwrapped ? `(function (exports, require, module, __filename, __dirname) {${bytes.toString('latin1')}\n})` : bytes.toString('latin1');
  let cachedData;
  try {
    const cache = Buffer.from(getRawAsset(`${name}.cache`));
    cachedData = cache.subarray(cache.indexOf(10) + 1);
  } catch {
    // no cache for this asset
  }
  const script = new Script(source, { filename: name, cachedData, importModuleDynamically: undefined });
  const module = { exports: {} };
  script.runInThisContext()(module.exports, (id) => answer(id) ?? require(id), module, name, '.');
  return module.exports;
}
