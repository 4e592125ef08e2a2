/**
 * loadConfig on generated TOML files: known and unknown sections and keys, values of every TOML type, azure-init
 * aliases, prototype-pollution keys, and text that is not TOML. The result is a complete valid Config or a
 * CONFIG_INVALID that names the file.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import * as v from 'valibot';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { loadConfig } from '../../src/config/load.js';
import { ConfigSchema } from '../../src/config/schema.js';
import { FUZZ_RUNS, hostileString, outcomeAsync, params, timeoutFor } from './support.js';

const dir = mkdtempSync(join(tmpdir(), 'bootstate-fuzz-config-'));
const file = join(dir, 'fuzz.toml');

const SECTIONS = [...Object.keys(DEFAULT_CONFIG), 'azure_init_data_dir', 'azure_init_log_path', 'azure_proxy_agent', '__proto__', 'constructor', 'bogus'];
const keysOf = (section: string) => Object.keys((DEFAULT_CONFIG as unknown as Record<string, Record<string, unknown>>)[section] ?? {});
const ALL_KEYS = [...new Set([...SECTIONS.flatMap(keysOf), 'kvp_diagnostics', 'kvp_filter', '__proto__', 'polluted', 'path'])];

const bareKey = (k: string) => (/^[A-Za-z0-9_-]+$/.test(k) ? k : JSON.stringify(k));

/** A TOML value literal of any type, plausible or not. */
const tomlValue = fc.oneof(
  fc.integer({ min: -5, max: 100_000 }).map(String),
  fc.double({ noNaN: false }).map((n) => (Number.isFinite(n) ? String(n).replace(/^(-?\d+)$/, '$1.0') : Number.isNaN(n) ? 'nan' : n > 0 ? 'inf' : '-inf')),
  fc.boolean().map(String),
  hostileString().map((s) => JSON.stringify(s)),
  fc.constantFrom('"http://127.0.0.1:1/x"', '"/var/lib/x"', '"relative/path"', '["useradd"]', '[]', '[1, "a"]', '{ a = 1 }', '1979-05-27T07:32:00Z', '"ftp://x"', '0.0', '-1', '1e400'),
);

const line = fc.tuple(fc.constantFrom(...ALL_KEYS), tomlValue).map(([k, value]) => `${bareKey(k)} = ${value}`);
const table = fc.tuple(fc.constantFrom(...SECTIONS), fc.array(line, { maxLength: 5 })).map(([s, lines]) => `[${bareKey(s)}]\n${lines.join('\n')}`);
const document = fc.oneof(
  { weight: 6, arbitrary: fc.array(table, { maxLength: 4 }).map((tables) => tables.join('\n\n')) },
  { weight: 1, arbitrary: fc.array(line, { maxLength: 3 }).map((lines) => lines.join('\n')) },
  { weight: 1, arbitrary: hostileString() },
  { weight: 1, arbitrary: fc.tuple(fc.array(table, { minLength: 1, maxLength: 3 }), fc.nat()).map(([t, at]) => { const s = t.join('\n'); return s.slice(0, at % (s.length + 1)); }) },
);

describe(`loadConfig on ${FUZZ_RUNS} generated files`, () => {
  it('returns a complete, valid config or a CONFIG_INVALID that names the file, and pollutes nothing', { timeout: timeoutFor(5) }, async () => {
    await fc.assert(
      fc.asyncProperty(document, async (text) => {
        writeFileSync(file, text);
        const result = await outcomeAsync(() => loadConfig({ systemFile: join(dir, 'absent.toml'), dropinDir: join(dir, 'absent.d'), override: file, env: {} }));
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
        expect(Object.prototype.hasOwnProperty.call(Object.prototype, 'path')).toBe(false);
        if (!result.ok) {
          expect(result.error.code).toBe('CONFIG_INVALID');
          expect(result.error.data).toContainEqual(['file', expect.any(String)]);
          return;
        }
        expect(v.safeParse(ConfigSchema, result.value.config).success).toBe(true);
        expect(Object.keys(result.value.config).sort()).toEqual(Object.keys(DEFAULT_CONFIG).sort());
      }),
      params,
    );
  });
});
