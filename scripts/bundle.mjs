// The esbuild options every bundle shares (dist/bootstate.cjs, the SEA's main script, the size report). The stubs
// replace modules the provision path would otherwise evaluate without ever using: undici's HTTP/2 client (it
// loads node:http2) and pino's worker-thread transports.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const stubs = join(root, 'scripts/stubs');

/** [importer path suffix, import specifier, stub file]. */
const STUBS = [
  ['node_modules/undici/lib/dispatcher/client.js', './client-h2.js', 'undici-client-h2.cjs'],
  ['node_modules/pino/lib/tools.js', './transport', 'pino-transport.cjs'],
  ['node_modules/pino/pino.js', './lib/transport', 'pino-transport.cjs'],
  ['node_modules/pino/lib/tools.js', 'worker_threads', 'main-thread.cjs'],
];

const stubPlugin = {
  name: 'bootstate-stubs',
  setup(build) {
    build.onResolve({ filter: /^(\.\/client-h2\.js|\.\/transport|\.\/lib\/transport|worker_threads)$/ }, (args) => {
      const stub = STUBS.find(([importer, specifier]) => args.importer.endsWith(importer) && args.path === specifier);
      return stub ? { path: join(stubs, stub[2]) } : undefined;
    });
  },
};

/** build/native/flock-<arch>.node (scripts/build-native.mjs) as base64 per architecture, for src/native/flock-addon.ts. */
function embeddedAddons() {
  const dir = join(root, 'build/native');
  const addons = {};
  for (const name of existsSync(dir) ? readdirSync(dir) : []) {
    const arch = /^flock-(\w+)\.node$/.exec(name)?.[1];
    if (arch) addons[arch] = readFileSync(join(dir, name)).toString('base64');
  }
  return addons;
}

/** Graphviz (1.5 MB, two thirds of everything) is only ever needed by `graph` and `trace`. */
export const VIZ_FILE = 'bootstate-viz.cjs';
const vizApart = {
  name: 'bootstate-viz-apart',
  setup(build) {
    build.onResolve({ filter: /^@viz-js\/viz$/ }, () => ({ path: `./${VIZ_FILE}`, external: true }));
  },
};

/** One minified CommonJS file for Node 20: minified source is what V8 reads (and, uncached, parses) on every start. */
export function nodeBundle(outfile) {
  return { outfile, bundle: true, platform: 'node', target: 'node20', format: 'cjs', minify: true, legalComments: 'none', logLevel: 'warning' };
}

/**
 * esbuild options for one CommonJS bundle of `src/cli.ts` that needs nothing but Node's built-ins. With
 * `vizApart`, Graphviz is left out and `import('@viz-js/viz')` becomes `require('./bootstate-viz.cjs')`, a
 * second file beside it (the plain program); without, everything is in the one file (the SEA).
 */
export function bundleOptions(outfile, { vizApart: apart = false } = {}) {
  return {
    ...nodeBundle(outfile),
    define: { __BOOTSTATE_FLOCK_ADDONS__: JSON.stringify(embeddedAddons()) },
    entryPoints: [join(root, 'src/cli.ts')],
    // `import.meta.url` in src/cli.ts only tells `tsx src/cli.ts` it is the program; a bundle never needs it.
    logOverride: { 'empty-import-meta': 'silent' },
    plugins: apart ? [stubPlugin, vizApart] : [stubPlugin],
    // A vm.Script has no ESM loader behind it: dynamic imports of files beside the bundle become require().
    supported: { 'dynamic-import': false },
  };
}
