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
// undici's HTTP parser is WebAssembly; its optimizing tier-up runs on a background thread that exit has to wait
// for and that costs ~36 MiB. Set before compiling so the flag hash in the code cache always matches.
setFlagsFromString('--liftoff-only');

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
