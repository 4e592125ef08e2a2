/**
 * The validators for values that end up in commands and files: usernames, hostnames and SSH key lines. An
 * accepted value must be harmless wherever it is used; a rejected one must say why.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SSH_KEY_TYPES, usernameProblem, validateHostname, validateSshKey, validateUsername } from '../../src/os/validate.js';
import { keyLine } from '../os/keys.js';
import { FUZZ_RUNS, hostileString, outcome, outcomeAsync, params, timeoutFor } from './support.js';

const nameLike = fc.oneof(
  hostileString(),
  fc.stringMatching(/^[a-z_][a-z0-9_-]{0,40}\$?$/),
  fc.stringMatching(/^[A-Za-z0-9-]{1,70}(\.[A-Za-z0-9-]{0,70}){0,5}\.?$/),
  fc.array(fc.constantFrom('a', 'Z', '0', '-', '_', '.', '$', '/', ' ', '\n', 'é', '%'), { maxLength: 40 }).map((a) => a.join('')),
);

describe(`username and hostname validation on ${FUZZ_RUNS} names each`, () => {
  it('accepts only names of 1–32 bytes of letters, digits, ".", "_", "-" that cannot be an option, a path, a uid or a system account', { timeout: timeoutFor() }, async () => {
    await fc.assert(
      fc.asyncProperty(nameLike, async (name) => {
        const result = await outcomeAsync(() => validateUsername(name));
        expect(result.ok).toBe(usernameProblem(name) === null);
        if (!result.ok) return void expect(result.error.code).toBe('INVALID_USERNAME');
        expect(name).toMatch(/^[A-Za-z0-9_.-]{1,32}\$?$/);
        expect(name).not.toMatch(/^(-|[0-9]+$|\.\.?$)/);
        expect(name.length).toBeLessThanOrEqual(32);
        expect(['root', 'sshd', 'nobody']).not.toContain(name);
      }),
      params,
    );
  });

  it('accepts only RFC 1123 host names of at most 253 characters', { timeout: timeoutFor() }, () => {
    fc.assert(
      fc.property(nameLike, (name) => {
        const result = outcome(() => validateHostname(name));
        if (!result.ok) return void expect(result.error.code).toBe('INVALID_HOSTNAME');
        expect(name.length).toBeLessThanOrEqual(253);
        for (const label of name.replace(/\.$/, '').split('.')) {
          expect(label).toMatch(/^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/);
        }
      }),
      params,
    );
  });
});

const validKey = fc
  .tuple(fc.constantFrom(...SSH_KEY_TYPES), fc.option(fc.string({ maxLength: 30 }), { nil: null }))
  .map(([type, comment]) => keyLine(type, comment?.replace(/\s+/g, '_') || null));

/** Key lines with options, wrong types, broken base64, control characters and cut-offs. */
const keyLike = fc.oneof(
  validKey,
  fc.tuple(fc.constantFrom('from="10.0.0.1",no-pty ', 'command="echo \\"hi\\"" ', 'restrict,command="x ', '"', ''), validKey).map(([o, k]) => o + k),
  fc.tuple(validKey, fc.nat(), fc.nat({ max: 20 }), hostileString()).map(([k, at, n, s]) => k.slice(0, at % k.length) + s + k.slice((at % k.length) + n)),
  fc.tuple(validKey, fc.constantFrom('\n', '\r', '\0', '\x1b', '\n' + 'ssh-rsa AAAA injected')).map(([k, c]) => k.replace(' ', ` ${c}`)),
  hostileString(),
);

describe(`ssh key validation on ${FUZZ_RUNS} key lines`, () => {
  it('returns a single normalised line of a known type with matching key data, or rejects with the problem', { timeout: timeoutFor() }, () => {
    fc.assert(
      fc.property(keyLike, (input) => {
        const result = outcome(() => validateSshKey(input));
        if (!result.ok) return void expect(result.error.code).toBe('INVALID_SSH_KEY');
        const key = result.value;
        expect(key.line).not.toMatch(/[\0-\x08\n\r\x0b-\x1f\x7f]/);
        expect(SSH_KEY_TYPES.has(key.type)).toBe(true);
        const blob = Buffer.from(key.base64, 'base64');
        expect(blob.subarray(4, 4 + blob.readUInt32BE(0)).toString('latin1')).toBe(key.type);
        expect(validateSshKey(key.line).line).toBe(key.line);
      }),
      params,
    );
  });
});
