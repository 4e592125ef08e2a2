/**
 * What every fuzz property shares: the run count (small in `npm test`, 100k from `scripts/fuzz.ts`), hostile
 * string generators, and the one acceptable way to fail — a BootstateError with a reason and supporting data.
 */
import fc from 'fast-check';
import { expect } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';

/** Cases per property: FUZZ_RUNS, default 300. */
export const FUZZ_RUNS = Number(process.env.FUZZ_RUNS ?? 300);

/** fast-check parameters for every property; the seed is printed on failure by fast-check itself. */
export const params = { numRuns: FUZZ_RUNS } as const;

/** Vitest timeout scaled to the run count (about 2 ms a case, with a floor). */
export const timeoutFor = (msPerCase = 2) => Math.max(30_000, FUZZ_RUNS * msPerCase);

/** Strings an attacker would try: control characters, separators, unicode, huge, and pollution keys. */
export const hostileString = (): fc.Arbitrary<string> =>
  fc.oneof(
    fc.string({ unit: 'grapheme', maxLength: 40 }),
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.constantFrom('', ' ', '-', '.', '..', '../..', '/', '\0', '\n', '\r\n', '\t', '$', '%', '%h', '%u', '%%', '\u202e', '\uFEFF',
      '\uD800', '__proto__', 'constructor', 'prototype', 'root', '-oProxyCommand=x', '$(reboot)', '`id`', ';', '|', '"', "'",
      '\\', '&amp;', '<', '>', 'ÄÖÜ', '日本', '😀'),
    fc.tuple(fc.constantFrom('a', 'Z', '\u00e9', '😀', '\0'), fc.integer({ min: 1, max: 70_000 })).map(([c, n]) => c.repeat(n)),
  );

export type Outcome<T> = { ok: true; value: T } | { ok: false; error: BootstateError };

/** Runs `fn`, asserting that anything it throws is a BootstateError with a non-empty reason and data. */
export function outcome<T>(fn: () => T): Outcome<T> {
  let value: T;
  try {
    value = fn();
  } catch (error) {
    return { ok: false, error: checkedRejection(error) };
  }
  return { ok: true, value };
}

/** The async form of `outcome`. */
export async function outcomeAsync<T>(fn: () => Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: true, value: await fn() };
  } catch (error) {
    return { ok: false, error: checkedRejection(error) };
  }
}

function checkedRejection(error: unknown): BootstateError {
  expect(error, `threw ${String((error as Error)?.stack ?? error)}`).toBeInstanceOf(BootstateError);
  const e = error as BootstateError;
  expect(e.reason).toMatch(/\S/);
  expect(e.reason).not.toBe('unhandled error');
  expect(e.data.length).toBeGreaterThan(0);
  for (const [key, value] of e.data) {
    expect(key).toMatch(/\S/);
    expect(typeof value).toBe('string');
  }
  return e;
}
