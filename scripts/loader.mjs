#!/usr/bin/env node
// dist/bootstate.mjs: runs the CommonJS scripts next to it through vm.Script with V8's code cache (<script>.cache),
// so a start deserializes compiled code instead of parsing it. bootstate.bundle.js is the CLI (argument parsing,
// help, --version); bootstate-commands.bundle.js, every subcommand's code, is read only when the CLI requires
// `bootstate-commands:<module>` to run one (scripts/bundle.mjs). A cache is used only when its key matches: this
// node binary, its version, arch and flags (NODE_OPTIONS too), and the script's size and mtime; V8 then checks its
// own version and flag hashes and may still reject it. A missing, stale or rejected cache costs one ordinary compile,
// after which the run rewrites it if the directory is writable.
import { readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { setFlagsFromString } from 'node:v8';
import { Script } from 'node:vm';

const dir = import.meta.dirname;
// V8 flags for a short run that must stay small, set before compiling so the flag hash in the code caches always
// matches (scripts/sea-main.cjs sets the same): undici's WebAssembly HTTP parser stays on its baseline tier
// (optimizing it ran on a background thread exit waited for, and cost ~36 MiB); no optimizing or baseline JIT
// (a first boot runs each function a few times; together −4 MiB); the young generation keeps its initial size
// (−2 MiB). Each one is safe to set at run time; --single-threaded-gc is not (a full GC then aborts).
setFlagsFromString('--liftoff-only --no-opt --no-sparkplug --semi-space-growth-factor=1');

const mode = process.env.BOOTSTATE_CODE_CACHE; // 'off' ignores the caches, 'write' always rewrites them
const nodeStat = statSync(process.execPath);
const runtimeKey = [process.version, process.arch, process.execPath, nodeStat.size, nodeStat.mtimeMs, process.execArgv, process.env.NODE_OPTIONS ?? ''];
const toWrite = [];
process.once('exit', () => {
  for (const loaded of toWrite) writeCache(loaded);
});

let commands;
const cli = load('bootstate.bundle.js', (id) => {
  if (!id.startsWith('bootstate-commands:')) return undefined;
  commands ??= load('bootstate-commands.bundle.js', (name) => (name === 'bootstate-cli' ? cli : undefined));
  return commands[id.slice('bootstate-commands:'.length)]?.();
});
cli.runAsProgram();

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
  const nodeRequire = createRequire(file);
  const require = Object.assign((id) => own(id) ?? nodeRequire(id), nodeRequire);
  const module = { exports: {} };
  script.runInThisContext()(module.exports, require, module, file, dir);
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
