// The esbuild options of the program's two scripts (scripts/build.mjs; the SEA carries the same). The stubs
// replace modules the provision path would otherwise evaluate without ever using: undici's HTTP/2 client (it
// loads node:http2), undici's use of node:http, pino's worker-thread transports, and node:assert where undici and
// sonic-boom only call assert(value).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const stubs = join(root, 'scripts/stubs');

/** [importer path suffix, or a directory ending in '/', import specifier, stub file]. */
const STUBS = [
  ['node_modules/undici/lib/', 'node:assert', 'assert.cjs'],
  ['node_modules/sonic-boom/index.js', 'assert', 'assert.cjs'],
  ['node_modules/undici/lib/dispatcher/client.js', './client-h2.js', 'undici-client-h2.cjs'],
  ['node_modules/undici/lib/dispatcher/client.js', 'node:http', 'undici-http.cjs'],
  ['node_modules/undici/lib/core/util.js', 'node:http', 'undici-http.cjs'],
  ['node_modules/pino/lib/tools.js', './transport', 'pino-transport.cjs'],
  ['node_modules/pino/pino.js', './lib/transport', 'pino-transport.cjs'],
  ['node_modules/pino/lib/tools.js', 'worker_threads', 'main-thread.cjs'],
];

const stubPlugin = {
  name: 'bootstate-stubs',
  setup(build) {
    build.onResolve({ filter: /^(\.\/client-h2\.js|\.\/transport|\.\/lib\/transport|worker_threads|node:http|(node:)?assert)$/ }, (args) => {
      const from = (importer) => (importer.endsWith('/') ? args.importer.includes(importer) : args.importer.endsWith(importer));
      const stub = STUBS.find(([importer, specifier]) => from(importer) && args.path === specifier);
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

/** The options every bundle of the CLI shares: the addons embedded, the stubs, no dynamic import(). */
function cliBundle(outfile, plugins) {
  return {
    ...nodeBundle(outfile),
    define: { __BOOTSTATE_FLOCK_ADDONS__: JSON.stringify(embeddedAddons()) },
    // `import.meta.url` in src/cli.ts only tells `tsx src/cli.ts` it is the program; a bundle never needs it.
    logOverride: { 'empty-import-meta': 'silent' },
    plugins: [stubPlugin, ...plugins],
    // A vm.Script has no ESM loader behind it: dynamic imports of files beside the bundle become require().
    supported: { 'dynamic-import': false },
  };
}

/*
 * The program is two scripts, so `--version`, `--help` and usage errors never read the subcommands' code:
 *   the CLI   src/cli.ts with the subcommand table and src/cli/argv.ts; each `import()` in
 *             src/cli/subcommands.ts becomes require('bootstate-commands:<specifier>');
 *   the rest  a function per module those imports name, keyed by the specifier, that evaluates it on first call;
 *             its imports of src/cli/argv.ts become require('bootstate-cli'), so both scripts share one UsageError.
 * The loaders (scripts/loader.mjs, scripts/sea-main.cjs) answer those two require() names with the other script.
 */
const COMMANDS_PREFIX = 'bootstate-commands:';
const CLI_MODULE = 'bootstate-cli';
const subcommandTable = join(root, 'src/cli/subcommands.ts');
const argvModule = join(root, 'src/cli/argv.ts');

/** The specifiers src/cli/subcommands.ts imports on demand, e.g. `./provision-command.js`. */
function subcommandModules() {
  return [...new Set([...readFileSync(subcommandTable, 'utf8').matchAll(/\bimport\('([^']+)'\)/g)].map((m) => m[1]))];
}

/** esbuild options for the CLI script. */
export function cliScriptOptions(outfile) {
  const commandsApart = {
    name: 'bootstate-commands-apart',
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) =>
        args.kind === 'dynamic-import' && args.importer === subcommandTable ? { path: `${COMMANDS_PREFIX}${args.path}`, external: true } : undefined,
      );
    },
  };
  return {
    ...cliBundle(outfile, [commandsApart]),
    stdin: { contents: "export * from './cli.ts';\nexport * from './cli/argv.ts';\n", resolveDir: join(root, 'src'), loader: 'ts' },
  };
}

/** esbuild options for the subcommands' script; Graphviz stays in its own file beside it. */
export function commandsScriptOptions(outfile) {
  const argvFromCli = {
    name: 'bootstate-argv-from-cli',
    setup(build) {
      build.onResolve({ filter: /argv\.js$/ }, (args) =>
        args.importer && join(dirname(args.importer), args.path).replace(/\.js$/, '.ts') === argvModule ? { path: CLI_MODULE, external: true } : undefined,
      );
    },
  };
  // require() of an ES module makes esbuild evaluate it (and what it imports) on the first call only.
  const entries = subcommandModules().map((specifier) => `${JSON.stringify(specifier)}: () => require(${JSON.stringify(specifier)})`);
  const contents = `module.exports = {\n${entries.join(',\n')}\n};\n`;
  return { ...cliBundle(outfile, [vizApart, argvFromCli]), stdin: { contents, resolveDir: dirname(subcommandTable), loader: 'js' } };
}
