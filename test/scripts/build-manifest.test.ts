/**
 * The build's stubs and patches (scripts/build/manifest.mjs) are checked as applied: the manifest's plugin, run by
 * esbuild on a small package made here, replaces what an entry names, and fails the build, naming the entry, when a
 * stub's importer is not part of it, a patch's text is missing or found too often, or a patch's file is never read.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';
import { PATCHES, STUBS } from '../../scripts/build/manifest.mjs';
import { replacements, type Patch, type Stub } from '../../scripts/build/replacements.mjs';

const dir = mkdtempSync(join(tmpdir(), 'bootstate-manifest-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// A package whose index imports a heavy module and names a mode twice, and a stub for the heavy one.
mkdirSync(join(dir, 'node_modules/dep'), { recursive: true });
mkdirSync(join(dir, 'stubs'));
writeFileSync(join(dir, 'node_modules/dep/heavy.js'), "module.exports = 'heavy';\n");
writeFileSync(join(dir, 'node_modules/dep/index.js'), "const heavy = require('./heavy.js');\nmodule.exports = [heavy, 'mode: slow', 'mode: slow'];\n");
writeFileSync(join(dir, 'stubs/light.cjs'), "module.exports = 'light';\n");

const stub = (importer: string): Stub => ({ name: 'heavy', why: 'test', replaces: [{ importer, specifier: './heavy.js' }], with: 'light.cjs' });
const patch = (search: string, count?: number, file = 'node_modules/dep/index.js'): Patch => ({ name: 'fast', why: 'test', file, search, replace: "'mode: fast'", count });

/** Bundles the package with the manifest's plugin: the output's text and the check to run after it. */
async function bundle(stubs: Stub[], patches: Patch[]): Promise<{ text: string; check(): void }> {
  const { plugin, check } = replacements({ stubs, patches }, join(dir, 'stubs'));
  const result = await build({ absWorkingDir: dir, entryPoints: ['node_modules/dep/index.js'], bundle: true, platform: 'node', format: 'cjs', write: false, logLevel: 'silent', plugins: [plugin] });
  return { text: result.outputFiles[0].text, check };
}

describe('the build manifest', () => {
  it('replaces what its entries name and passes its check', async () => {
    const { text, check } = await bundle([stub('node_modules/dep/index.js')], [patch("'mode: slow'", 2)]);
    expect(text).toContain('"light"');
    expect(text).not.toContain('"heavy"');
    expect(text).toContain('"mode: fast"');
    expect(text).not.toContain('slow');
    expect(check).not.toThrow();
  });

  it('fails the check, naming the entry, when a stub replaced nothing because its importer is not in the build', async () => {
    const { text, check } = await bundle([stub('node_modules/dep/moved.js')], []);
    expect(text).toContain('"heavy"');
    expect(check).toThrow("stub 'heavy': node_modules/dep/moved.js → ./heavy.js");
  });

  it('fails the check when a stub for a directory of importers, or for any importer, replaced nothing', async () => {
    const { check } = await bundle([{ ...stub('node_modules/other/'), name: 'dir' }, { name: 'any', why: 'test', replaces: [{ specifier: /^node:http2$/ }], contents: '' }], []);
    expect(check).toThrow(/stub 'dir': node_modules\/other\/ → \.\/heavy\.js\n {2}stub 'any': any importer → \/\^node:http2\$\//);
  });

  it("fails the build, naming the patch, when its text is not in the file (the package's source changed)", async () => {
    await expect(bundle([], [patch("'mode: slower'")])).rejects.toThrow(`patch 'fast': "'mode: slower'" found 0 times in node_modules/dep/index.js, expected 1`);
  });

  it('fails the build when a patch finds its text more often than it expects', async () => {
    await expect(bundle([], [patch("'mode: slow'")])).rejects.toThrow(`patch 'fast': "'mode: slow'" found 2 times in node_modules/dep/index.js, expected 1`);
  });

  it('fails the check when the file a patch changes was never part of the build', async () => {
    const { check } = await bundle([], [patch("'mode: slow'", 1, 'node_modules/dep/gone.js')]);
    expect(check).toThrow("patch 'fast': node_modules/dep/gone.js");
  });

  it('refuses an entry whose replacement file does not exist', () => {
    expect(() => replacements({ stubs: [{ ...stub('node_modules/dep/index.js'), with: 'absent.cjs' }], patches: [] }, join(dir, 'stubs'))).toThrow(
      `stub 'heavy': ${join(dir, 'stubs/absent.cjs')} does not exist`,
    );
  });

  it("gives every one of the program's own entries a one-line reason", () => {
    for (const entry of [...STUBS, ...PATCHES]) expect(entry.why, entry.name).toMatch(/^[^\n]{10,}$/);
  });
});
