// Every place where the program's scripts do not take a package, or Node, as it is: the one list of them, read by the
// bundler plugin in scripts/build/replacements.mjs, which fails the build when an entry did nothing.
//
// A stub replaces a module for the importers it names: `replaces` lists each importer (a file, or a directory ending
// in '/', from the repository root; none: any importer) with the specifier it writes (a string, or a RegExp), and
// `with` names the replacement, a file in scripts/build/stubs/, or `contents` gives its source. The build fails
// unless each of those importers had that specifier replaced at least once.
// A patch changes text in one file: `search` must be found exactly `count` times (1 unless given) in `file`, and
// the file must be part of the build.
import { promises } from 'node:fs';

export const STUBS = [
  {
    name: 'assert',
    why: 'undici and sonic-boom only call assert(value, message); the real node:assert loaded before the first IMDS request',
    replaces: [
      { importer: 'node_modules/undici/lib/', specifier: 'node:assert' },
      { importer: 'node_modules/sonic-boom/index.js', specifier: 'assert' },
    ],
    with: 'assert.cjs',
  },
  {
    name: 'undici-client-h2',
    why: "the fabric speaks HTTP/1.1 over plain TCP, and undici's HTTP/2 client loads node:http2",
    replaces: [{ importer: 'node_modules/undici/lib/dispatcher/client.js', specifier: './client-h2.js' }],
    with: 'undici-client-h2.cjs',
  },
  {
    name: 'undici-http',
    why: 'undici takes two small things from node:http, whose load was the largest part of what provision evaluated unused',
    replaces: [
      { importer: 'node_modules/undici/lib/dispatcher/client.js', specifier: 'node:http' },
      { importer: 'node_modules/undici/lib/core/util.js', specifier: 'node:http' },
    ],
    with: 'undici-http.cjs',
  },
  {
    name: 'llhttp-wasm',
    why: "undici's fallback HTTP parser as the bytes of a file beside the scripts, not 72 KB of base64 in their source",
    replaces: [{ importer: 'node_modules/undici/lib/dispatcher/client-h1.js', specifier: '../llhttp/llhttp-wasm.js' }],
    with: 'llhttp-wasm.cjs',
  },
  {
    name: 'undici-fetch-body',
    why: "undici's HTTP/1 client needs its fetch body code (~45 KB) for FormData bodies alone, which bootstate never sends",
    replaces: [{ importer: 'node_modules/undici/lib/dispatcher/client-h1.js', specifier: '../web/fetch/body.js' }],
    with: 'undici-fetch-body.cjs',
  },
  {
    name: 'pino-transport',
    why: "pino's transports run in worker threads; bootstate writes its logs synchronously and never starts one",
    replaces: [
      { importer: 'node_modules/pino/lib/tools.js', specifier: './transport' },
      { importer: 'node_modules/pino/pino.js', specifier: './lib/transport' },
    ],
    with: 'pino-transport.cjs',
  },
  {
    name: 'main-thread',
    why: 'pino asks worker_threads only whether it runs on the main thread, and bootstate has no other thread',
    replaces: [{ importer: 'node_modules/pino/lib/tools.js', specifier: 'worker_threads' }],
    with: 'main-thread.cjs',
  },
  {
    name: 'lazy-fs-promises',
    why: 'node:fs/promises brings readline, fs watchers and directory streams (~1.5 ms), and is first used after the first IMDS request',
    replaces: [{ specifier: /^(node:)?fs\/promises$/ }],
    // Loaded on first use of any of its exports: the names are those of the Node that runs the build, the one the
    // program's tests and caches are made with.
    contents: `'use strict';
let promises;
const load = () => (promises ??= require('node:fs').promises);
for (const name of ${JSON.stringify(Object.keys(promises))}) {
  Object.defineProperty(exports, name, { enumerable: true, get: () => load()[name] });
}
`,
  },
];

export const PATCHES = [
  {
    name: 'llhttp-from-loader',
    why: "undici compiled its HTTP parser on the main thread at its first connection (~4 ms); the loader compiles it in the background",
    file: 'node_modules/undici/lib/dispatcher/client-h1.js',
    // The loader answers bootstate-wasm:<file> with the module it started compiling as the provision script loaded.
    search: "new WebAssembly.Module(require('../llhttp/llhttp_simd-wasm.js'))",
    replace: "require('bootstate-wasm:llhttp_simd.wasm')",
  },
];
