#!/usr/bin/env node
// dist/bootstate.cjs (and dist/bootstate.mjs, a symlink to it): runs the CommonJS scripts beside it through
// vm.Script with V8's code cache (<script>.cache), so a start deserializes compiled code instead of parsing it.
// bootstate.bundle.js is the CLI (argument parsing, help, --version); bootstate-provision.bundle.js and
// bootstate-commands.bundle.js are read only when the CLI requires `bootstate-script:<script>/<module>` to run a
// subcommand (scripts/bundle.mjs); `bootstate-asset:<file>` is a file beside them, as bytes, and
// `bootstate-wasm:<file>` one compiled as WebAssembly, in the background from the moment the script that needs it
// starts to load (undici's HTTP parser for provision: ~4 ms off the main thread). A cache is used only
// when its key matches: this node binary, its version, arch and flags (NODE_OPTIONS too), and the script's size
// and mtime; V8 then checks its own version and flag hashes and may still reject it. A missing, stale or rejected
// cache costs one ordinary compile, after which the run rewrites it if the directory is writable.
// CommonJS, not an ES module: Node starts its ESM loader for an .mjs main (~5 ms of a 100 ms start) and resolves
// the symlink before it looks at the extension.
'use strict';
const { readFileSync, renameSync, statSync, unlinkSync, writeFileSync } = require('node:fs');
const { setFlagsFromString } = require('node:v8');
const { Script } = require('node:vm');

// V8 flags for a short run that must stay small, set before compiling so the flag hash in the code caches always
// matches (scripts/sea-main.cjs sets the same): undici's WebAssembly HTTP parser stays on its baseline tier
// (optimizing it ran on a background thread exit waited for, and cost ~36 MiB); no optimizing or baseline JIT
// (a first boot runs each function a few times; together −4 MiB). Each one is safe to set at run time;
// --single-threaded-gc is not (a full GC then aborts). The young generation grows as V8 likes: keeping it at its
// initial size (--semi-space-growth-factor=1) saved 1.2 MiB of peak RSS but cost ~9 ms of scavenges before the first
// request, since nearly everything a start allocates survives.
setFlagsFromString('--liftoff-only --no-opt --no-sparkplug');

const dir = __dirname;
const mode = process.env.BOOTSTATE_CODE_CACHE; // 'off' ignores the caches, 'write' always rewrites them
const nodeStat = statSync(process.execPath);
const runtimeKey = [process.version, process.arch, process.execPath, nodeStat.size, nodeStat.mtimeMs, process.execArgv, process.env.NODE_OPTIONS ?? ''];
const toWrite = [];
process.once('exit', () => {
  for (const loaded of toWrite) writeCache(loaded);
});

const SCRIPT = /^bootstate-script:([a-z]+)\/(.+)$/;
const scripts = new Map();
/** WebAssembly each script needs, compiled while the script loads and starts. */
const WASM_OF = { provision: ['llhttp_simd.wasm'] };
const wasm = new Map();
const cli = load('bootstate.bundle.js', answer);
cli.runAsProgram();

/** The loader's own require() names: another script's module, the CLI's exports, a file's bytes. */
function answer(id) {
  const script = SCRIPT.exec(id);
  if (script) {
    const [, name, path] = script;
    if (!scripts.has(name)) {
      for (const file of WASM_OF[name] ?? []) compileInBackground(file);
      scripts.set(name, load(`bootstate-${name}.bundle.js`, answer));
    }
    return scripts.get(name)[path]?.();
  }
  if (id === 'bootstate-cli') return cli;
  if (id.startsWith('bootstate-asset:')) return readFileSync(`${dir}/${id.slice('bootstate-asset:'.length)}`);
  if (id.startsWith('bootstate-wasm:')) return compiled(id.slice('bootstate-wasm:'.length));
  return undefined;
}

function compileInBackground(file) {
  if (wasm.has(file)) return;
  const entry = { module: null };
  wasm.set(file, entry);
  try {
    WebAssembly.compile(readFileSync(`${dir}/${file}`)).then((module) => (entry.module = module), () => {});
  } catch {
    // compiled() tries again, on the main thread, and reports what fails
  }
}

/** The compiled module: the background compile's when it has finished, else compiled now (throwing if it cannot be). */
function compiled(file) {
  return wasm.get(file)?.module ?? new WebAssembly.Module(readFileSync(`${dir}/${file}`));
}

/** Evaluates one script as a CommonJS module whose require() first asks `own` (undefined: Node's require). */
function load(name, own) {
  const file = `${dir}/${name}`;
  const stat = statSync(file);
  const key = JSON.stringify([...runtimeKey, stat.size, stat.mtimeMs]);
  let cachedData;
  if (mode !== 'off' && mode !== 'write') {
    try {
      const raw = readFileSync(`${file}.cache`);
      const newline = raw.indexOf(10);
      if (newline > 0 && raw.toString('latin1', 0, newline) === key) cachedData = raw.subarray(newline + 1);
    } catch {
      // no cache yet
    }
  }
  // The scripts are ASCII (esbuild escapes the rest), so latin1 makes the same string without UTF-8 decoding.
  const script = new Script(readFileSync(file, 'latin1'), { filename: file, cachedData, importModuleDynamically: undefined });
  // Written when the run ends, so the functions this run compiled are in it too.
  if (mode !== 'off' && (cachedData === undefined || script.cachedDataRejected)) toWrite.push({ file, key, script });
  const module = { exports: {} };
  const requireHere = (id) => own(id) ?? require(id);
  script.runInThisContext()(module.exports, Object.assign(requireHere, require), module, file, dir);
  return module.exports;
}

function writeCache({ file, key, script }) {
  const temp = `${file}.cache.${process.pid}.tmp`;
  try {
    writeFileSync(temp, Buffer.concat([Buffer.from(`${key}\n`), script.createCachedData()]), { mode: 0o644 });
    renameSync(temp, `${file}.cache`);
  } catch {
    // A read-only install runs without the cache.
    try {
      unlinkSync(temp);
    } catch {}
  }
}
