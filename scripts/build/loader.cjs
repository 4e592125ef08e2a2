#!/usr/bin/env node
// The program's entry: dist/bootstate.cjs (dist/bootstate.mjs is a symlink to it), and the single executable's main
// script (scripts/build/binary.mjs), where the same files are the executable's assets instead of files beside it. It
// runs the CommonJS scripts through vm.Script with V8's code cache (<script>.cache), so a start deserializes compiled
// code instead of parsing it: bootstate.bundle.js is the CLI (argument parsing, help, usage errors; `--version` alone
// is answered here, before any script); bootstate-provision.bundle.js and bootstate-commands.bundle.js are read only
// when the CLI imports `bootstate-import:<script>/<module>` to run a subcommand, and bootstate-run.bundle.js only when
// the provision script imports it once its first IMDS request is written; the run script's static imports of the
// provision script's modules are `bootstate-script:provision/<module>`, so both use the same instances
// (scripts/build/bundle.mjs). `bootstate-asset:<file>` is a file's bytes, and `bootstate-wasm:<file>` one compiled as
// WebAssembly, in the background from the moment the script that needs it starts to load (undici's HTTP parser for
// provision, compiled off the main thread).
// A cache file is used only when its key line matches: this node binary, its version, arch and flags (NODE_OPTIONS
// too), and the script's size and mtime; V8 then checks its own version and flag hashes and may still reject it. A
// missing, stale or rejected cache costs one ordinary compile, after which the run rewrites it if the directory is
// writable. The executable's caches are the ones the build's runs wrote for the plain program (same node, same
// flags), their key lines padded for where the blob puts them (scripts/build/binary.mjs): V8's own checks decide.
// The same text, with the scripts appended, is the builder of the opt-in V8 startup snapshot
// (scripts/build/snapshot.mjs): there it evaluates them into the heap, and a process started from that snapshot
// runs `start` with what it reads of its own process.
// CommonJS, not an ES module: Node starts its ESM loader for an .mjs main (a measurable part of a start) and
// resolves the symlink before it looks at the extension.
'use strict';
const { closeSync, fstatSync, openSync, readFileSync, readSync, renameSync, statSync, unlinkSync, writeFileSync, writeSync } = require('node:fs');
// node:sea and node:v8 are read on first use: loading them is a few percent of Node's own start, which `--version`
// does not need.
const sea = () => require('node:sea');
const setFlagsFromString = (flags) => require('node:v8').setFlagsFromString(flags);
// The package's version, written here by the build (scripts/build/program.mjs) from package.json, which a test keeps
// equal to the CLI's: `bootstate --version` alone is answered before V8's flags, the CLI script or its code cache
// are read. Anything else, or a failed write, goes to the CLI, which gives the same line and the usage errors.
const VERSION = '@BOOTSTATE_VERSION@';

// V8 flags, set here and nowhere else. A run of the agent is short and must stay small; its flags are set before
// compiling, so the flag hash in the code caches always matches: undici's WebAssembly HTTP parser stays on its
// baseline tier (optimizing it ran on a background thread that exit waited for, and cost tens of MiB); no optimizing
// or baseline JIT (a first boot runs each function a few times; both cost memory for no speed). Each one is safe to
// set at run time; --single-threaded-gc is not (a full GC then aborts). The young generation grows as V8 likes:
// keeping it at its initial size (--semi-space-growth-factor=1) saved a little peak RSS but cost scavenges before
// the first request, since nearly everything a start allocates survives (docs/performance.md has the figures).
const SHORT_RUN = '--liftoff-only --no-opt --no-sparkplug';
// `bootstate trace`, an offline pass over a journal of any length, asks for the JITs back once its scripts are
// loaded (require('bootstate-v8:long-run')): on a long journal they nearly halve its time.
const LONG_RUN = '--opt --sparkplug';

let inExecutable = false;
let dir = __dirname;
/** A file's bytes: beside the loader, or the executable's asset (a view of its own mapped bytes, not a copy). */
let bytes = (name) => readFileSync(`${dir}/${name}`);
let mode = 'off'; // 'off' ignores the caches, 'write' always rewrites them
let runtimeKey = null;
const toWrite = [];

const SCRIPT = /^bootstate-(import|script):([a-z]+)\/(.+)$/;
const scripts = new Map();
/** WebAssembly each script needs, compiled while the script loads and starts (once per run). */
const WASM_OF = { provision: ['llhttp_simd.wasm'], monitor: ['llhttp_simd.wasm'] };
const wasm = new Map();
const begun = new Set();
let cli = null;
/** While a snapshot is built: the scripts it holds (file name → the script's function); then null. */
let inlined = null;
let building = false;
// A startup snapshot's builder (scripts/build/snapshot.mjs) appends `snapshotScripts` to this file: it evaluates
// the scripts into the heap the snapshot keeps and runs the program when a process starts from that snapshot.
// eslint-disable-next-line no-undef -- defined only in the snapshot builder's copy of this file
if (typeof snapshotScripts === 'function') buildSnapshot(snapshotScripts());
else if (!answeredVersion()) start(__dirname);

/** Whether the command line was `--version` or `-V` alone and its line was written to stdout. */
function answeredVersion() {
  const argv = process.argv.slice(2);
  if (VERSION.startsWith('@') || argv.length !== 1 || (argv[0] !== '--version' && argv[0] !== '-V')) return false;
  const line = Buffer.from(`bootstate ${VERSION}\n`);
  try {
    return writeSync(1, line) === line.length;
  } catch {
    return false;
  }
}

/** Sets what a run reads of its process (V8 flags, the executable, the caches) and runs the CLI on its argv. */
function start(directory) {
  setFlagsFromString(SHORT_RUN);
  inExecutable = sea().isSea();
  dir = directory;
  if (inExecutable) bytes = (name) => Buffer.from(sea().getRawAsset(name));
  mode = inExecutable ? 'read-only' : process.env.BOOTSTATE_CODE_CACHE;
  runtimeKey = inExecutable ? null : keyOfRuntime();
  process.once('exit', () => {
    for (const loaded of toWrite) writeCache(loaded);
  });
  cli ??= load('bootstate.bundle.js');
  cli.runAsProgram();
}

/** The loader's own require() names: another script's module, the CLI's exports, V8 flags, a file's bytes, Graphviz. */
function answer(id) {
  const script = SCRIPT.exec(id);
  if (script) {
    const [, how, name, path] = script;
    let compiling = false;
    if (!building && !begun.has(name)) {
      begun.add(name);
      for (const file of WASM_OF[name] ?? []) compiling = compileInBackground(file) || compiling;
    }
    if (!scripts.has(name)) scripts.set(name, load(`bootstate-${name}.bundle.js`));
    const evaluate = scripts.get(name)[path];
    if (evaluate === undefined) return undefined;
    return how === 'script' ? evaluate() : imported(evaluate, compiling);
  }
  if (id === 'bootstate-cli') return cli;
  if (id === 'bootstate-v8:long-run') {
    setFlagsFromString(LONG_RUN);
    return {};
  }
  if (id.startsWith('bootstate-asset:')) return bytes(id.slice('bootstate-asset:'.length));
  if (id.startsWith('bootstate-wasm:')) return compiled(id.slice('bootstate-wasm:'.length));
  // Graphviz, required by `graph` and `trace` only: an ordinary CommonJS file, which Node's require finds in dist/.
  if (id === './bootstate-viz.cjs' && inExecutable) return load('bootstate-viz.cjs', true);
  return undefined;
}

/**
 * What an import() of another script's module is answered with: a promise-like that the import's promise takes the
 * module from (the bundle's import() is a require() inside a promise). When loading the script started a
 * background compile, the module is evaluated one event-loop turn later: V8 moves such a compile on only from a
 * task run on the main thread, and a first boot has nothing asynchronous before its first connection, so without
 * the turn that connection compiled undici's parser again on the main thread, before the first IMDS request.
 */
function imported(evaluate, afterATurn) {
  return {
    then(resolve, reject) {
      const settle = () => {
        try {
          resolve(evaluate());
        } catch (error) {
          reject(error);
        }
      };
      if (afterATurn) setImmediate(settle);
      else settle();
    },
  };
}

/** Starts compiling `file` on V8's background threads; whether it did (false: started before, or no such file). */
function compileInBackground(file) {
  if (wasm.has(file)) return false;
  const entry = { module: null };
  wasm.set(file, entry);
  try {
    WebAssembly.compile(bytes(file)).then((module) => (entry.module = module), () => {});
    return true;
  } catch {
    // compiled() tries again, on the main thread, and reports what fails
    return false;
  }
}

/**
 * The compiled module: the background compile's once its promise has settled, else compiled now (throwing if it
 * cannot be). V8 finishes a background compile only in tasks run on the main thread, so its promise often has not
 * settled at the first connection; compiling the same bytes then takes V8's module from that compile if it is done.
 */
function compiled(file) {
  return wasm.get(file)?.module ?? new WebAssembly.Module(bytes(file));
}

/** Evaluates one script as a CommonJS module whose require() first asks `answer`, then Node's. */
function load(name, unwrapped = false) {
  const file = inExecutable ? name : `${dir}/${name}`;
  const module = { exports: {} };
  const requireHere = (id) => answer(id) ?? require(id);
  Object.assign(requireHere, require);
  if (inlined?.[name]) {
    // Compiled here, with every function compiled at once (buildSnapshot), so the snapshot holds their bytecode.
    const compiledScript = (0, eval)(`${inlined[name]}\n//# sourceURL=${file}`);
    compiledScript(module.exports, requireHere, module, file, inExecutable ? '.' : dir);
    return module.exports;
  }
  const key = runtimeKey && keyOf(file);
  const useCache = mode !== 'off' && mode !== 'write';
  const { text, cache } = inExecutable ? { text: bytes(name).toString('latin1'), cache: useCache ? asset(`${name}.cache`) : null } : readScript(file, useCache);
  let cachedData;
  if (cache) {
    const newline = cache.indexOf(10);
    if (newline > 0 && (key === null || cache.toString('latin1', 0, newline).trimEnd() === key)) cachedData = cache.subarray(newline + 1);
  }
  const source = unwrapped ? `(function (exports, require, module, __filename, __dirname) {${text}\n})` : text;
  const { Script } = require('node:vm');
  const script = new Script(source, { filename: file, cachedData, importModuleDynamically: undefined });
  // Written when the run ends, so the functions this run compiled are in it too.
  if (key !== null && mode !== 'off' && (cachedData === undefined || script.cachedDataRejected)) toWrite.push({ file, key, script });
  script.runInThisContext()(module.exports, requireHere, module, file, inExecutable ? '.' : dir);
  return module.exports;
}

/**
 * Builds the snapshot: evaluates the CLI and every module of the `warm` scripts into the heap, with no flags set,
 * nothing compiled in the background and nothing of the process read, and makes the program's start the function
 * a process started from the snapshot runs. The directory of the files beside it is that process's: the
 * blob's (--snapshot-blob) for the plain program.
 */
function buildSnapshot({ scripts: functions, warm }) {
  const { startupSnapshot } = require('node:v8');
  inlined = functions;
  building = true;
  // Eagerly compiled: V8 keeps a function's bytecode in the snapshot only if it was compiled when it was built, and
  // what a run would compile lazily it would compile from source, with no code cache. The flag goes back before
  // the heap is serialized: V8 refuses a snapshot whose flags differ from the running process's.
  setFlagsFromString('--no-lazy');
  cli = load('bootstate.bundle.js');
  for (const name of warm) {
    if (!scripts.has(name)) scripts.set(name, load(`bootstate-${name}.bundle.js`));
    for (const evaluate of Object.values(scripts.get(name))) evaluate();
  }
  setFlagsFromString('--lazy');
  inlined = null;
  building = false;
  startupSnapshot.setDeserializeMainFunction(() => {
    const directory = blobDirectory();
    // `node --snapshot-blob <blob> -- <arguments>` has no script in its argv: the CLI reads its arguments from argv[2].
    if (!sea().isSea()) process.argv.splice(1, 0, `${directory}/bootstate-snapshot`);
    start(directory);
  });
}

/** The directory of the snapshot blob this process started from (the plain program's dist/), else the executable's. */
function blobDirectory() {
  const args = process.execArgv;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--snapshot-blob' && i + 1 < args.length) return require('node:path').dirname(require('node:path').resolve(args[i + 1]));
    if (args[i].startsWith('--snapshot-blob=')) return require('node:path').dirname(require('node:path').resolve(args[i].slice('--snapshot-blob='.length)));
  }
  return require('node:path').dirname(process.execPath);
}

/** The executable's asset, or null when it has none of that name. */
function asset(name) {
  try {
    return bytes(name);
  } catch {
    return null;
  }
}

/**
 * A script's source as a string and its cache file's bytes (null when there is none), read through one buffer: the
 * source is copied out of it into V8's heap before the cache is read over it, so a start touches the memory of the
 * larger file only, not both (every fresh page is a page fault).
 * The scripts are ASCII (esbuild escapes the rest), so latin1 makes the same string without UTF-8 decoding.
 */
function readScript(file, withCache) {
  const sourceFd = openSync(file, 'r');
  let cacheFd = -1;
  try {
    if (withCache) {
      try {
        cacheFd = openSync(`${file}.cache`, 'r');
      } catch {
        // no cache yet
      }
    }
    const sourceSize = fstatSync(sourceFd).size;
    const cacheSize = cacheFd < 0 ? 0 : fstatSync(cacheFd).size;
    // A fresh buffer of its own (not a slice of Node's pool), so offset 0 is as aligned as malloc makes it.
    const buffer = Buffer.allocUnsafeSlow(Math.max(sourceSize, cacheSize));
    const text = buffer.latin1Slice(0, readFully(sourceFd, buffer, sourceSize));
    const cache = cacheFd < 0 ? null : buffer.subarray(0, readFully(cacheFd, buffer, cacheSize));
    return { text, cache };
  } finally {
    closeSync(sourceFd);
    if (cacheFd >= 0) closeSync(cacheFd);
  }
}

/** Reads up to `size` bytes from the start of `fd` into `buffer`; how many it read (fewer if the file shrank). */
function readFully(fd, buffer, size) {
  let done = 0;
  while (done < size) {
    const n = readSync(fd, buffer, done, size - done, done);
    if (n === 0) break;
    done += n;
  }
  return done;
}

function keyOfRuntime() {
  const node = statSync(process.execPath);
  return [process.version, process.arch, process.execPath, node.size, node.mtimeMs, process.execArgv, process.env.NODE_OPTIONS ?? ''];
}

function keyOf(file) {
  const stat = statSync(file);
  return JSON.stringify([...runtimeKey, stat.size, stat.mtimeMs]);
}

/**
 * V8 uses a code cache where it lies only when its first byte is pointer-aligned; otherwise it copies it first: for
 * the provision script that was a few hundred more page faults in every start. The key line is padded with
 * spaces so the cache starts at a multiple of CACHE_ALIGN bytes into the file, and so into the buffer readScript
 * reads it into. The executable's copies are padded for where its blob puts them (scripts/build/binary.mjs).
 */
const CACHE_ALIGN = 16;

function writeCache({ file, key, script }) {
  const temp = `${file}.cache.${process.pid}.tmp`;
  try {
    const header = `${key}\n`.length;
    const padding = (CACHE_ALIGN - (header % CACHE_ALIGN)) % CACHE_ALIGN;
    writeFileSync(temp, Buffer.concat([Buffer.from(`${key}${' '.repeat(padding)}\n`), script.createCachedData()]), { mode: 0o644 });
    renameSync(temp, `${file}.cache`);
  } catch {
    // A read-only install runs without the cache.
    try {
      unlinkSync(temp);
    } catch {}
  }
}
