/**
 * AuthorizedKeysFile expansion: `%h %u %U %%` and relative paths under the home directory. Whatever the
 * pattern, a relative one must stay inside the home, and a bad one must be refused with a reason.
 */
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { expandAuthorizedKeysFile } from '../../src/os/ssh/authorized-keys-file.js';
import { FUZZ_RUNS, outcome, params, timeoutFor } from './support.js';

const context = { username: 'azureuser', home: '/home/azureuser', uid: 1000 };

const KNOWN = ['.ssh', 'authorized_keys', 'keys.d', '%u', '%U', '%%', '%h', '..', '.', '', 'a%%b', '~', '$HOME', 'é'];
const UNKNOWN = ['%', '%x', '%/', '%H', '%%%'];

const valueOf = (segments: string[]) => {
  const segment = fc.oneof(fc.constantFrom(...segments), fc.stringMatching(/^[a-z0-9._-]{1,12}$/));
  const pattern = fc
    .tuple(fc.constantFrom('', '/', '%h/', '//'), fc.array(segment, { minLength: 1, maxLength: 6 }))
    .map(([lead, parts]) => lead + parts.join('/'));
  return fc.array(pattern, { minLength: 1, maxLength: 3 }).map((patterns) => patterns.join(' '));
};

const inside = (root: string, p: string) => p === root || p.startsWith(`${root}/`);

describe(`AuthorizedKeysFile expansion on ${FUZZ_RUNS} values`, () => {
  it('refuses an unknown % token or a climb out of the home with a BootstateError that says which', { timeout: timeoutFor() }, () => {
    fc.assert(
      fc.property(valueOf([...KNOWN, ...UNKNOWN]), (v) => {
        const result = outcome(() => expandAuthorizedKeysFile(v, context));
        if (!result.ok) expect(JSON.stringify(result.error.data)).toMatch(/%|leaves the home directory/);
      }),
      params,
    );
  });

  it('yields absolute, normalised paths, a relative pattern always inside the home, or refuses with a reason', { timeout: timeoutFor() }, () => {
    fc.assert(
      fc.property(valueOf(KNOWN), (v) => {
        const result = outcome(() => expandAuthorizedKeysFile(v, context));
        if (!result.ok) return;
        const patterns = v.split(/\s+/).filter(Boolean);
        expect(result.value).toHaveLength(patterns.length);
        result.value.forEach((p, i) => {
          expect(path.posix.isAbsolute(p)).toBe(true);
          expect(path.posix.normalize(p)).toBe(p);
          if (!patterns[i]!.startsWith('/') && !patterns[i]!.startsWith('%h')) expect(inside(context.home, p), `${patterns[i]} → ${p}`).toBe(true);
        });
      }),
      params,
    );
  });
});
