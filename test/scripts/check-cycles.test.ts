/**
 * The import-circle check of `npm run lint` (scripts/check-cycles.mjs): which imports tie two modules together
 * (static, re-exports, `import()`, `require()`), which do not (what the compiler erases), and what it prints.
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

/** Writes `files` (path → source) under a new directory and runs the check on it. */
function check(files: Record<string, string>, ...flags: string[]): { code: number | null; out: string } {
  dir = mkdtempSync(join(tmpdir(), 'bootstate-cycles-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const run = spawnSync(process.execPath, ['scripts/check-cycles.mjs', ...flags, dir], { encoding: 'utf8' });
  return { code: run.status, out: run.stdout + run.stderr };
}

describe('scripts/check-cycles.mjs', () => {
  it('passes a graph without circles', () => {
    const run = check({ 'a.ts': "import { b } from './b.js';\nexport const a = b;\n", 'b.ts': 'export const b = 1;\n' });
    expect(run).toEqual({ code: 0, out: 'no import circles among 2 modules\n' });
  });

  it('names a circle of static imports, re-exports, import() and require(), and exits 1', () => {
    const run = check({
      'a.ts': "import { b } from './b.js';\nexport const a = b;\n",
      'b.ts': "export { c as b } from './sub/c.js';\n",
      'sub/c.ts': "export const c = 1;\nexport const load = () => import('../a.js');\n",
      'x.cjs': "require('./y.cjs');\n",
      'y.cjs': "require('./x.cjs');\n",
    });
    expect(run.code).toBe(1);
    expect(run.out).toMatch(/^import circle: \S*a\.ts → \S*b\.ts → \S*sub\/c\.ts →\(import\(\)\) \S*a\.ts$/m);
    expect(run.out).toMatch(/^import circle: \S*x\.cjs →\(require\) \S*y\.cjs →\(require\) \S*x\.cjs$/m);
    expect(run.out).toMatch(/^2 import circles among 5 modules$/m);
  });

  it('leaves out what the compiler erases, unless --types asks for it', () => {
    const files = {
      'a.ts': "import type { B } from './b.js';\nimport { type B2 } from './b.js';\nexport type A = B | B2 | typeof import('./b.js');\nexport const a = 1;\n",
      'b.ts': "import { a } from './a.js';\nexport type B = number;\nexport type B2 = string;\nexport const b = a;\n",
    };
    expect(check(files).code).toBe(0);
    const typed = check(files, '--types');
    expect(typed.code).toBe(1);
    expect(typed.out).toMatch(/^import circle: \S*a\.ts → \S*b\.ts → \S*a\.ts$/m);
  });
});
