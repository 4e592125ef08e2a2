#!/usr/bin/env node
// dist/bootstate.mjs: runs the CommonJS bundle next to it (bootstate.bundle.js) through vm.Script with V8's code cache
// (bootstate.bundle.js.cache), so a start deserializes compiled code instead of parsing 0.8 MB of JavaScript. The
// cache is used only when its key matches: this node binary, its version, arch and flags (NODE_OPTIONS too), and
// the bundle's size and mtime; V8 then checks its own version and flag hashes and may still reject it. A missing, stale or rejected
// cache costs one ordinary compile, after which the run rewrites it if the directory is writable.
import { readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { Script } from 'node:vm';

const bundle = fileURLToPath(new URL('./bootstate.bundle.js', import.meta.url));
const cacheFile = `${bundle}.cache`;
// undici's HTTP parser is WebAssembly; its optimizing tier-up runs on a background thread that exit has to wait
// for and that costs ~36 MiB. Set before compiling so the flag hash in the code cache always matches.
setFlagsFromString('--liftoff-only');

const mode = process.env.BOOTSTATE_CODE_CACHE; // 'off' ignores the cache, 'write' always rewrites it
const bundleStat = statSync(bundle);
const nodeStat = statSync(process.execPath);
const key = JSON.stringify([
  process.version,
  process.arch,
  process.execPath,
  nodeStat.size,
  nodeStat.mtimeMs,
  process.execArgv,
  process.env.NODE_OPTIONS ?? '',
  bundleStat.size,
  bundleStat.mtimeMs,
]);

let cachedData;
if (mode !== 'off' && mode !== 'write') {
  try {
    const raw = readFileSync(cacheFile);
    const newline = raw.indexOf(10);
    if (newline > 0 && raw.toString('utf8', 0, newline) === key) cachedData = raw.subarray(newline + 1);
  } catch {
    // no cache yet
  }
}

const script = new Script(readFileSync(bundle, 'utf8'), { filename: bundle, cachedData, importModuleDynamically: undefined });
if (mode !== 'off' && (cachedData === undefined || script.cachedDataRejected)) {
  // Written when the run ends, so the functions this run compiled are in it too.
  process.once('exit', () => writeCache(script));
}
const module = { exports: {} };
script.runInThisContext()(module.exports, createRequire(bundle), module, bundle, fileURLToPath(new URL('.', import.meta.url)));
module.exports.runAsProgram();

function writeCache(compiled) {
  const temp = `${cacheFile}.${process.pid}.tmp`;
  try {
    writeFileSync(temp, Buffer.concat([Buffer.from(`${key}\n`), compiled.createCachedData()]), { mode: 0o644 });
    renameSync(temp, cacheFile);
  } catch {
    // A read-only install runs without the cache.
    try {
      unlinkSync(temp);
    } catch {}
  }
}
