// The esbuild options of the program's scripts (scripts/build/program.mjs; the SEA carries the same): how the program
// is split into scripts that load each other through the loader (scripts/build/loader.cjs), which files stay apart
// as bytes, and, from scripts/build/manifest.mjs, every stub and patch, checked as applied once the scripts are built.
import { readFileSync } from 'node:fs';
import { build as esbuildBuild } from 'esbuild';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PATCHES, STUBS } from './manifest.mjs';
import { replacements } from './replacements.mjs';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The manifest's plugin, shared by every build of the scripts; `manifest.check()` once they are built. */
export const manifest = replacements({ stubs: STUBS, patches: PATCHES }, join(root, 'scripts/build/stubs'));

/*
 * Files the scripts read as bytes, beside them in dist/ (the SEA: its assets): `require('bootstate-asset:<name>')`,
 * answered by the loader (scripts/build/loader.cjs). Kept out of the scripts' source because as
 * base64 there (254 KB of 881 KB) every start read them, copied them into V8's heap twice (the source string and the
 * code cache's constants) and decoded them, before the first request.
 */
const require = createRequire(import.meta.url);

/** The assets: name → bytes. The native addons are what scripts/build/native.mjs compiled, per architecture. */
export function assets() {
  const llhttp = join(root, 'node_modules/undici/lib/llhttp');
  const files = {
    'llhttp_simd.wasm': require(join(llhttp, 'llhttp_simd-wasm.js')),
    'llhttp.wasm': require(join(llhttp, 'llhttp-wasm.js')),
  };
  for (const arch of ['x64', 'arm64']) {
    try {
      files[`native-${arch}.node`] = readFileSync(join(root, `build/native/native-${arch}.node`));
    } catch (error) {
      if (error.code !== 'ENOENT') throw error;
    }
  }
  return files;
}

/** The loader's names for files' bytes, compiled WebAssembly and V8 flags (scripts/build/loader.cjs). */
const loaderNames = {
  name: 'bootstate-loader-names',
  setup(build) {
    build.onResolve({ filter: /^bootstate-(asset|wasm|v8):/ }, (args) => ({ path: args.path, external: true }));
  },
};

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

/*
 * The program is six scripts, each V8 deserializes whole from its code cache, so each run reads only the code
 * of what it does, and only when it needs it:
 *   cli        src/cli.ts with the subcommand table (src/commands/index.ts) and src/cli/argv.ts: `--version`, `--help`, usage errors;
 *   provision  `bootstate provision` up to its first IMDS request: the config, the instance lock, the markers and
 *              the HTTP client (src/provision/provision.ts);
 *   run        the rest of `provision`, read once that request is on its way: the chart, its actors, logging, KVP,
 *              the OS steps (src/provision/run-chart.ts). It holds none of the provision script's modules: its imports
 *              of them are that script's modules, so both share one HTTP client, one marker store, one of each;
 *   commands   every other subcommand, and the live inspector client a `provision --inspect` asks for;
 *   otel       the OpenTelemetry SDK and OTLP exporters, read only by a run (or a monitor cycle) with an OTLP endpoint,
 *              after READY=1 (src/observe/trace-export.ts): 300 KB no other run reads.
 * Each `import()` of a module another script holds becomes require('bootstate-import:<script>/<path>'), a static
 * import of one (the run script's, of the provision script's modules) require('bootstate-script:<script>/<path>'),
 * and imports of src/cli/argv.ts from the other scripts become require('bootstate-cli'), so all share one
 * UsageError. The loader (scripts/build/loader.cjs) answers those names: the script's exports hold a function per
 * module that evaluates it on first call; an import gets a promise-like for the module, which the loader may
 * settle an event-loop turn later.
 */
const IMPORT_PREFIX = 'bootstate-import:';
const SCRIPT_PREFIX = 'bootstate-script:';
const CLI_MODULE = 'bootstate-cli';
const subcommandTable = join(root, 'src/commands/index.ts');
const argvModule = join(root, 'src/cli/argv.ts');
const PROVISION = 'src/commands/provision.ts';
/** The OpenTelemetry SDK and exporter: only a run with an OTLP endpoint loads them (src/observe/trace-export.ts). */
const OTLP_EXPORT = 'src/observe/otlp-export.ts';
const MONITOR = 'src/commands/monitor.ts';

/** `import('./x.js')` in `dir` → the TypeScript file's path from the repository root. */
const sourceOf = (dir, specifier) => relative(root, join(dir, specifier).replace(/\.js$/, '.ts'));

/** Script name → the modules it holds that others load on demand (paths from the repository root). */
function scriptModules() {
  const subcommands = [...new Set([...readFileSync(subcommandTable, 'utf8').matchAll(/\bimport\('([^']+)'\)/g)].map((m) => sourceOf(dirname(subcommandTable), m[1])))];
  for (const path of [PROVISION, MONITOR]) if (!subcommands.includes(path)) throw new Error(`${subcommandTable} no longer imports ${path}`);
  return {
    provision: [PROVISION],
    run: [PROVISION_RUN],
    monitor: [MONITOR],
    commands: [...subcommands.filter((path) => path !== PROVISION && path !== MONITOR), 'src/inspect/live.ts'],
    otel: [OTLP_EXPORT],
  };
}

/** The program's scripts, by name. */
export const SCRIPTS = ['cli', 'provision', 'run', 'monitor', 'commands', 'otel'];

/** Scripts that are the second part of another one: only that one loads them; any other holds their modules itself. */
const PART_OF = { run: 'provision' };
const PROVISION_RUN = 'src/provision/run-chart.ts';

/** The file name of a script in dist/ and among the SEA's assets. */
export const scriptFile = (script) => (script === 'cli' ? 'bootstate.bundle.js' : `bootstate-${script}.bundle.js`);

/** Dynamic imports of modules another script holds stay out of `script` and load through the loader. */
function otherScriptsApart(script) {
  const owners = new Map(Object.entries(scriptModules()).flatMap(([owner, paths]) => paths.map((path) => [path, owner])));
  return {
    name: 'bootstate-other-scripts-apart',
    setup(build) {
      build.onResolve({ filter: /^\./ }, (args) => {
        if (args.kind !== 'dynamic-import') return undefined;
        const path = sourceOf(args.resolveDir, args.path);
        const owner = owners.get(path);
        const apart = owner && owner !== script && (PART_OF[owner] ?? script) === script;
        return apart ? { path: `${IMPORT_PREFIX}${owner}/${path}`, external: true } : undefined;
      });
    },
  };
}

/** The options every script shares: the manifest's stubs and patches, the loader's names, no dynamic import(). */
function scriptOptions(script, outfile, plugins) {
  return {
    ...nodeBundle(outfile),
    // Input paths in metafiles relative to the repository root, as the loader's names of modules are.
    absWorkingDir: root,
    define: { __BOOTSTATE_BUNDLED__: 'true' },
    // `import.meta.url` in src/cli.ts only tells `tsx src/cli.ts` it is the program; a bundle never needs it.
    logOverride: { 'empty-import-meta': 'silent' },
    plugins: [manifest.plugin, loaderNames, otherScriptsApart(script), ...plugins],
    // A vm.Script has no ESM loader behind it: dynamic imports of files beside the bundle become require().
    supported: { 'dynamic-import': false },
  };
}

/** esbuild options for the CLI script. */
function cliScriptOptions(outfile) {
  return {
    ...scriptOptions('cli', outfile, []),
    stdin: { contents: "export * from './cli.ts';\nexport * from './cli/argv.ts';\n", resolveDir: join(root, 'src'), loader: 'ts' },
  };
}

/** The modules a build's metafile says its one output holds (paths from the repository root; virtual ones left out). */
export function moduleInputs(metafile) {
  return Object.keys(Object.values(metafile.outputs)[0].inputs).filter((path) => !path.includes(':') && path !== '<stdin>');
}

/** In a part's build: an import of a module the whole script holds is that script's module, not a copy. */
function sharedWithWhole(whole, modules, used) {
  const shared = new Set(modules);
  return {
    name: 'bootstate-shared-with-whole',
    setup(build) {
      build.onResolve({ filter: /.*/ }, async (args) => {
        if (args.pluginData?.sharing || args.kind === 'entry-point' || args.path.startsWith('bootstate-')) return undefined;
        const resolved = await build.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, namespace: args.namespace, pluginData: { sharing: true } });
        if (resolved.errors.length > 0 || resolved.external || resolved.namespace !== 'file') return undefined;
        const path = relative(root, resolved.path);
        if (!shared.has(path)) return undefined;
        used.add(path);
        return { path: `${SCRIPT_PREFIX}${whole}/${path}`, external: true };
      });
    },
  };
}

/**
 * esbuild options for every script of SCRIPTS, in that order, written to `dir`. The part (run) imports the modules
 * its whole script (provision) holds from it, and the whole script exports exactly those: exporting all of its
 * modules would keep whole every module they are in (a package's index included), where the bundle keeps only what
 * is used. Finding them takes one build of each without output.
 */
export async function scriptsBuildOptions(dir) {
  const [part, whole] = Object.entries(PART_OF)[0];
  const wholeAlone = await esbuildBuild({ ...onDemandScriptOptions(whole, join(dir, scriptFile(whole))), write: false, metafile: true });
  const used = new Set();
  const partOptions = onDemandScriptOptions(part, join(dir, scriptFile(part)), [], [sharedWithWhole(whole, moduleInputs(wholeAlone.metafile), used)]);
  await esbuildBuild({ ...partOptions, write: false });
  return SCRIPTS.map((script) => {
    if (script === part) return partOptions;
    if (script === whole) return onDemandScriptOptions(script, join(dir, scriptFile(script)), [...used].sort());
    return script === 'cli' ? cliScriptOptions(join(dir, scriptFile(script))) : onDemandScriptOptions(script, join(dir, scriptFile(script)));
  });
}

/** esbuild options for one of the scripts loaded on demand (`provision`, `commands`); Graphviz stays in its own file. */
function onDemandScriptOptions(script, outfile, exported = [], extraPlugins = []) {
  const argvFromCli = {
    name: 'bootstate-argv-from-cli',
    setup(build) {
      build.onResolve({ filter: /argv\.js$/ }, (args) =>
        args.importer && join(dirname(args.importer), args.path).replace(/\.js$/, '.ts') === argvModule ? { path: CLI_MODULE, external: true } : undefined,
      );
    },
  };
  // require() of an ES module makes esbuild evaluate it (and what it imports) on the first call only.
  const entries = [...new Set([...scriptModules()[script], ...exported])].map((path) => `${JSON.stringify(path)}: () => require(${JSON.stringify(`./${path}`)})`);
  const contents = `module.exports = {\n${entries.join(',\n')}\n};\n`;
  const options = scriptOptions(script, outfile, [vizApart, argvFromCli]);
  // First, so that what the other plugins would resolve (stubs included) is shared too.
  return { ...options, plugins: [...extraPlugins, ...options.plugins], stdin: { contents, resolveDir: root, loader: 'js' } };
}
