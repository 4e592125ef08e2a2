/**
 * The layering check of `npm run lint` (scripts/check-layers.mjs): a module imports its own layer and those below,
 * never one above (type-only imports count), and a module in no layer fails until its folder is given one.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** Writes `files` (path → source) under a new root and runs the check on it. */
function check(files: Record<string, string>): { code: number | null; out: string } {
  dir = mkdtempSync(join(tmpdir(), 'bootstate-layers-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const run = spawnSync(process.execPath, ['scripts/check-layers.mjs', '--root', dir], { encoding: 'utf8' });
  return { code: run.status, out: run.stdout + run.stderr };
}

describe('scripts/check-layers.mjs', () => {
  it('passes imports of the same layer and of the layers below', () => {
    const run = check({
      'src/core/errors.ts': 'export const e = 1;\n',
      'src/system/exec.ts': "import { e } from '../core/errors.js';\nexport const x = e;\n",
      'src/system/paths.ts': "import { x } from './exec.js';\nexport const p = x;\n",
      'src/provision/run.ts': "import { p } from '../system/paths.js';\nimport { s } from '../monitor/a.js';\nexport const r = p + s;\n",
      'src/monitor/a.ts': 'export const s = 2;\n',
      'machines/chart.ts': "import { e } from '../src/core/errors.js';\nexport const c = e;\n",
    });
    expect(run).toEqual({ code: 0, out: 'no upward imports among 6 modules in 12 layers\n' });
  });

  it('names an upward import, a type-only one too, and exits 1', () => {
    const run = check({
      'src/core/errors.ts': "import type { X } from '../system/exec.js';\nexport type E = X;\n",
      'src/system/exec.ts': "import { r } from '../provision/run.js';\nexport type X = number;\nexport const x = r;\n",
      'src/provision/run.ts': 'export const r = 1;\n',
      'machines/chart.ts': "export const load = () => import('../src/commands/index.js');\n",
      'src/commands/index.ts': 'export {};\n',
    });
    expect(run.code).toBe(1);
    expect(run.out).toMatch(/^upward import: src\/core\/errors\.ts \(layer 0\) → src\/system\/exec\.ts \(layer 1\)$/m);
    expect(run.out).toMatch(/^upward import: src\/system\/exec\.ts \(layer 1\) → src\/provision\/run\.ts \(layer 7\)$/m);
    expect(run.out).toMatch(/^upward import: machines\/chart\.ts \(layer 5\) → src\/commands\/index\.ts \(layer 10\)$/m);
    expect(run.out).toMatch(/^3 upward imports, 0 modules in no layer, among 5 modules$/m);
  });

  it('fails a module in a folder that has no layer', () => {
    const run = check({ 'src/newfolder/a.ts': 'export const a = 1;\n' });
    expect(run.code).toBe(1);
    expect(run.out).toMatch(/^in no layer: src\/newfolder\/a\.ts/m);
  });

  it('passes this repository', () => {
    const run = spawnSync(process.execPath, ['scripts/check-layers.mjs'], { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });
});
