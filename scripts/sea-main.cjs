// The single executable's main script (scripts/build-binary.mjs): the plain program's loader (scripts/loader.mjs)
// reading the same scripts from the executable's assets instead of files. The CLI script runs alone for --version,
// --help and usage errors; the subcommands' script and Graphviz are compiled only when asked for. Each script's
// code cache is the one the build's provisioning run wrote for the plain program (same node, same flags), minus
// its key line; V8 checks its version and flag hashes and compiles normally when it rejects one.
'use strict';
const { getRawAsset } = require('node:sea');
const { setFlagsFromString } = require('node:v8');
const { Script } = require('node:vm');

// The flags scripts/loader.mjs sets, and why; the same, so its code caches match.
setFlagsFromString('--liftoff-only --no-opt --no-sparkplug --semi-space-growth-factor=1');

let commands;
const cli = load('bootstate.bundle.js', (id) => {
  if (!id.startsWith('bootstate-commands:')) return undefined;
  commands ??= load('bootstate-commands.bundle.js', (name) => {
    if (name === 'bootstate-cli') return cli;
    // Graphviz is an ordinary CommonJS file, required by `graph` and `trace` only.
    if (name === './bootstate-viz.cjs') return load(name, () => undefined, true);
    return undefined;
  });
  return commands[id.slice('bootstate-commands:'.length)]?.();
});
cli.runAsProgram();

/** Evaluates one asset as a CommonJS module whose require() first asks `own`, then Node's (built-ins only here). */
function load(name, own, unwrapped = false) {
  const bytes = Buffer.from(getRawAsset(name.replace(/^\.\//, '')));
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
  script.runInThisContext()(module.exports, (id) => own(id) ?? require(id), module, name, '.');
  return module.exports;
}
