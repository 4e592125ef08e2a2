/**
 * The configuration tables say what the code does: docs/configuration.md has one row for every setting of
 * DEFAULT_CONFIG and none for a setting that does not exist, and every row there and in the README shows the
 * default the code has. The README's example configuration loads without an error or a warning.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseToml } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { loadConfig } from '../../src/config/load.js';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const read = (page: string) => readFileSync(resolve(REPO, page), 'utf8');

/** Table rows whose first cell is one backquoted `section.key`: [line, key, default cell]. */
function settingRows(markdown: string): Array<[number, string, string]> {
  const rows: Array<[number, string, string]> = [];
  markdown.split('\n').forEach((line, index) => {
    const m = /^\| `([a-z_]+\.[a-z_]+)` \| (.*?) \|/.exec(line);
    if (m) rows.push([index + 1, m[1], m[2]]);
  });
  return rows;
}

/** How a default is written in a table: numbers and booleans bare, strings and lists as TOML in backquotes. */
function shown(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value === 'string') return value === '' ? '`""`' : `\`${value}\``;
  if (Array.isArray(value)) return `\`[${value.map((item) => JSON.stringify(item)).join(', ')}]\``;
  throw new Error(`no table form for ${JSON.stringify(value)}`);
}

const settings = Object.entries(DEFAULT_CONFIG).flatMap(([section, values]) =>
  Object.entries(values as Record<string, unknown>).map(([key, value]) => [`${section}.${key}`, value] as const),
);
const defaults = new Map<string, unknown>(settings);

describe('docs/configuration.md', () => {
  const rows = settingRows(read('docs/configuration.md'));

  it('has one row for every setting, and none for a setting that does not exist', () => {
    const keys = rows.map(([, key]) => key);
    expect(settings.map(([key]) => key).filter((key) => !keys.includes(key)), 'settings without a row').toEqual([]);
    expect(keys.filter((key) => !defaults.has(key)), 'rows naming no setting').toEqual([]);
    expect(keys.filter((key, i) => keys.indexOf(key) !== i), 'settings with two rows').toEqual([]);
  });

  it.each(['docs/configuration.md', 'README.md'])('%s shows the default the code has in every row', (page) => {
    const wrong = settingRows(read(page))
      .filter(([, key, cell]) => defaults.has(key) && cell !== shown(defaults.get(key)))
      .map(([line, key, cell]) => `${page}:${line}  ${key}: ${cell}, the code's default is ${shown(defaults.get(key))}`);
    expect(wrong).toEqual([]);
  });
});

describe("the README's example configuration", () => {
  it('loads as a drop-in with no error and no warning, and sets what it shows', async () => {
    const readme = read('README.md');
    const toml = /```toml\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(toml).toBeDefined();
    const dir = mkdtempSync(join(tmpdir(), 'bootstate-readme-config-'));
    try {
      const file = join(dir, '50-image.toml');
      writeFileSync(file, toml!);
      const loaded = await loadConfig({ systemFile: join(dir, 'none.toml'), dropinDir: join(dir, 'none.d'), override: file, env: {} });
      expect(loaded.warnings).toEqual([]);
      expect(loaded.sources).toEqual([file]);
      const written = Object.entries(parseToml(toml!)).flatMap(([section, values]) => Object.keys(values as object).map((key) => `${section}.${key}`));
      expect(Object.keys(loaded.origins).sort()).toEqual(written.sort());
      expect(written.length).toBeGreaterThan(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
