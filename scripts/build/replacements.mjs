// The manifest's stubs and patches (scripts/build/manifest.mjs) as one esbuild plugin, which counts what each entry
// did, and the check that fails a build in which one did nothing: a stub whose importer moved or no longer imports
// what it replaces, a patch whose text changed or appears more often than it did.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';

const escape = (text) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/** `{ plugin, check }` for the manifest `{ stubs, patches }`, whose stub files are in `stubDir`. */
export function replacements({ stubs, patches }, stubDir) {
  for (const stub of stubs) {
    if ((stub.with === undefined) === (stub.contents === undefined)) throw new Error(`stub '${stub.name}': give either \`with\` or \`contents\``);
    if (stub.with !== undefined && !existsSync(join(stubDir, stub.with))) throw new Error(`stub '${stub.name}': ${join(stubDir, stub.with)} does not exist`);
  }
  // What each entry must have done at least once, and how often it did: a stub's importer each, a patch's file.
  const pairs = stubs.flatMap((stub) =>
    stub.replaces.map((target) => ({ stub, ...target, done: 0, what: `stub '${stub.name}': ${target.importer ?? 'any importer'} → ${target.specifier}` })),
  );
  const edits = patches.map((patch) => ({ patch, done: 0, what: `patch '${patch.name}': ${patch.file}` }));
  const specifiers = pairs.map(({ specifier }) => (typeof specifier === 'string' ? `^${escape(specifier)}$` : specifier.source));
  const patched = new Set(patches.map((patch) => patch.file));

  const plugin = {
    name: 'bootstate-manifest',
    setup(build) {
      const root = build.initialOptions.absWorkingDir ?? process.cwd();
      const matches = (importer, from) => importer === undefined || (importer.endsWith('/') ? from.startsWith(importer) : from === importer);
      if (pairs.length > 0) {
        build.onResolve({ filter: new RegExp(specifiers.join('|')) }, (args) => {
          const from = relative(root, args.importer);
          const pair = pairs.find(({ importer, specifier }) => matches(importer, from) && (typeof specifier === 'string' ? args.path === specifier : specifier.test(args.path)));
          if (!pair) return undefined;
          pair.done++;
          return pair.stub.with === undefined ? { path: pair.stub.name, namespace: 'bootstate-stub' } : { path: join(stubDir, pair.stub.with) };
        });
        build.onLoad({ filter: /.*/, namespace: 'bootstate-stub' }, (args) => ({
          contents: stubs.find((stub) => stub.name === args.path).contents,
          loader: 'js',
          resolveDir: stubDir,
        }));
      }
      if (patches.length > 0) {
        build.onLoad({ filter: new RegExp(`/(${[...patched].map(escape).join('|')})$`) }, async (args) => {
          const file = relative(root, args.path);
          if (!patched.has(file)) return undefined;
          let source = await readFile(args.path, 'utf8');
          for (const edit of edits.filter(({ patch }) => patch.file === file)) {
            const { name, search, replace, count = 1 } = edit.patch;
            const found = source.split(search).length - 1;
            if (found !== count) throw new Error(`patch '${name}': ${JSON.stringify(search)} found ${found} times in ${file}, expected ${count}`);
            source = source.replaceAll(search, () => replace);
            edit.done++;
          }
          return { contents: source, loader: 'js' };
        });
      }
    },
  };

  /** Throws, naming each entry of the manifest that did nothing in the builds that used `plugin` so far. */
  function check() {
    const idle = [...pairs, ...edits].filter(({ done }) => done === 0).map(({ what }) => what);
    if (idle.length > 0) {
      throw new Error(`scripts/build/manifest.mjs: ${idle.length === 1 ? 'an entry' : 'entries'} that did nothing in this build (importer or file moved?):\n  ${idle.join('\n  ')}`);
    }
  }
  return { plugin, check };
}
