/**
 * parseInstanceMetadata against mutated IMDS documents: wrong types, missing members, huge and hostile strings,
 * prototype-pollution keys, and text that is not JSON at all.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseInstanceMetadata } from '../../src/azure/imds.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { FUZZ_RUNS, hostileString, outcome, params, timeoutFor } from './support.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Every path to a member of the example document, so mutations hit real fields as often as random ones. */
function paths(value: Json, prefix: string[] = []): string[][] {
  if (value === null || typeof value !== 'object') return [prefix];
  const keys = Array.isArray(value) ? value.map((_, i) => String(i)) : Object.keys(value);
  return [prefix, ...keys.flatMap((k) => paths((value as Record<string, Json>)[k], [...prefix, k]))];
}

const EXAMPLE = exampleImdsDocument() as Json;
const PATHS = paths(EXAMPLE).filter((p) => p.length > 0);

const replacement = fc.oneof(
  fc.jsonValue() as fc.Arbitrary<Json>,
  hostileString(),
  fc.constant(undefined),
  fc.constantFrom<Json>([], {}, 'true', 'false', 0, -1, 1e308, true, null),
);

/** Applies `[path, value]` edits to a copy; `undefined` deletes the member. */
function mutate(edits: Array<[string[], Json | undefined]>): Json {
  const doc = structuredClone(EXAMPLE) as Record<string, Json>;
  for (const [path, value] of edits) {
    let parent: Record<string, Json> | undefined = doc;
    for (const key of path.slice(0, -1)) {
      const next: Json | undefined = parent?.[key];
      parent = next !== null && typeof next === 'object' ? (next as Record<string, Json>) : undefined;
    }
    if (!parent) continue;
    const last = path.at(-1)!;
    if (value === undefined) delete parent[last];
    // A copy: constant arbitraries hand out one shared instance, which a later edit could make circular.
    else parent[last] = structuredClone(value);
  }
  return doc;
}

const POLLUTION = ['"__proto__":{"polluted":"yes","adminUsername":"evil"},', '"constructor":{"prototype":{"polluted":"yes"}},'];

/** Inserts a pollution member right after the `{` that opens the object at `at` in the JSON text. */
function pollute(text: string, at: number, member: string): string {
  const braces = [...text.matchAll(/\{/g)].map((m) => m.index!);
  if (braces.length === 0) return text;
  const i = braces[at % braces.length]! + 1;
  return text.slice(0, i) + member + text.slice(i);
}

const documents = fc.oneof(
  { weight: 6, arbitrary: fc.array(fc.tuple(fc.constantFrom(...PATHS), replacement), { minLength: 1, maxLength: 4 }).map((e) => JSON.stringify(mutate(e))) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.array(fc.tuple(fc.constantFrom(...PATHS), replacement), { maxLength: 2 }), fc.nat(), fc.constantFrom(...POLLUTION))
      .map(([edits, at, member]) => pollute(JSON.stringify(mutate(edits)), at, member)),
  },
  { weight: 1, arbitrary: fc.json() },
  { weight: 1, arbitrary: hostileString() },
);

describe(`parseInstanceMetadata on ${FUZZ_RUNS} mutated documents`, () => {
  it('returns well-typed metadata or rejects with an IMDS reason (the key at fault, not retryable; retryable only for text that is no JSON), never anything else', { timeout: timeoutFor(4) }, () => {
    fc.assert(
      fc.property(documents, (text) => {
        const result = outcome(() => parseInstanceMetadata(text));
        if (!result.ok) {
          expect(['IMDS_PARSE', 'IMDS_INVALID']).toContain(result.error.code);
          expect(result.error.retryable).toBe(result.error.code === 'IMDS_PARSE');
          if (result.error.code === 'IMDS_INVALID') expect(result.error.data[0]).toEqual(['key', expect.stringMatching(/\S/)]);
          return;
        }
        const m = result.value;
        expect(Object.getPrototypeOf(m)).toBe(Object.prototype);
        expect(typeof m.adminUsername).toBe('string');
        expect(typeof m.computerName).toBe('string');
        expect(typeof m.disablePasswordAuthentication).toBe('boolean');
        expect(m.publicKeys.every((k) => typeof k === 'string')).toBe(true);
        expect(m.vmId === null || typeof m.vmId === 'string').toBe(true);
        expect(typeof m.hasCustomData).toBe('boolean');
        expect(typeof m.ppsType).toBe('string');
      }),
      params,
    );
  });

  it('never lets a __proto__ or constructor member reach Object.prototype', { timeout: timeoutFor(4) }, () => {
    fc.assert(
      fc.property(fc.nat(), fc.constantFrom(...POLLUTION), (at, member) => {
        const result = outcome(() => parseInstanceMetadata(pollute(JSON.stringify(EXAMPLE), at, member)));
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
        if (result.ok) expect(result.value.adminUsername).not.toBe('evil');
      }),
      params,
    );
  });
});
