/**
 * The SSH key policy: one bad key must not cost the VM. Every valid key is installed, every other one is skipped
 * and named; only "keys given, none usable, password logins off" fails, naming the keys.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BootstateError } from '../../../src/core/errors.js';
import { keepKeysSshdAccepts, selectSshKeys, sshdAcceptsKeyType } from '../../../src/os/ssh/key-policy.js';
import { keyLine } from '../keys.js';

describe('selectSshKeys', () => {
  it('keeps the valid key and skips the invalid one, naming it and saying why', () => {
    const good = keyLine();
    const { keys, skipped } = selectSshKeys([good, 'ssh-rsa not-base64!'], false);
    expect(keys).toEqual([good]);
    expect(skipped).toEqual([{ key: 'ssh-rsa not-base64!', problem: 'key data is not base64' }]);
  });

  it('skips a DSA key, a type current sshd no longer accepts', () => {
    const { keys, skipped } = selectSshKeys([keyLine('ssh-dss'), keyLine('ecdsa-sha2-nistp256')], false);
    expect(keys).toHaveLength(1);
    expect(skipped[0]!.problem).toBe('does not name a known key type');
  });

  it('reads a keyData of several lines as several keys, each checked, blank and comment lines ignored', () => {
    const [a, b] = [keyLine('ssh-ed25519', 'a@x'), keyLine('ssh-rsa', 'b@x')];
    const { keys, skipped } = selectSshKeys([`${a}\r\n\n# laptop\n${b}\nssh-ed25519 AAAA\n`], false);
    expect(keys).toEqual([a, b]);
    expect(skipped.map((s) => s.key)).toEqual(['ssh-ed25519 AAAA']);
  });

  it('keeps options such as command= and from= verbatim', () => {
    const key = keyLine();
    const line = `from="10.0.0.0/8,!10.0.0.1",command="/usr/bin/rrsync -ro /srv",no-pty ${key}`;
    expect(selectSshKeys([line], false).keys).toEqual([line]);
  });

  it('installs a key given twice once', () => {
    const key = keyLine();
    expect(selectSshKeys([key, `${key}\n`, `  ${key}  `], false).keys).toEqual([key]);
  });

  it('escapes a hostile key in what it reports, so no control character reaches a log or KVP', () => {
    const { skipped } = selectSshKeys(['ssh-ed25519 \x1b[31mred\x07'], true);
    expect(skipped[0]!.key).toBe('ssh-ed25519 \\x1b[31mred\\x07');
  });

  it('fails with INVALID_SSH_KEY naming the keys when none is usable and password logins are off', () => {
    const error = (() => {
      try {
        selectSshKeys(['ssh-ed25519 AAAA', 'not a key'], false);
      } catch (e) {
        return e;
      }
      return null;
    })();
    expect(error).toBeInstanceOf(BootstateError);
    const e = error as BootstateError;
    expect([e.code, e.exitCode]).toEqual(['INVALID_SSH_KEY', 78]);
    const data = new Map(e.data);
    expect(data.get('problem')).toMatch(/no usable ssh key and password logins are off/);
    expect([data.get('key_1'), data.get('key_2')]).toEqual(['ssh-ed25519 AAAA', 'not a key']);
  });

  it('does not fail when password logins are on, or when no key was given at all', () => {
    expect(selectSshKeys(['not a key'], true)).toMatchObject({ keys: [], skipped: [{ key: 'not a key' }] });
    expect(selectSshKeys([], false)).toEqual({ keys: [], skipped: [] });
  });

  it('for any mix of valid and invalid lines: every valid key is kept, every other line is named once', () => {
    const line = fc.oneof(fc.constant(null).map(() => keyLine()), fc.string({ maxLength: 30 }).filter((s) => !/[\r\n]/.test(s) && s.trim() !== '' && !s.trim().startsWith('#')));
    fc.assert(
      fc.property(fc.array(line, { maxLength: 6 }), (lines) => {
        const { keys, skipped } = selectSshKeys(lines, true);
        expect(keys.length + skipped.length).toBe(lines.length);
      }),
    );
  });
});

describe('keys against the algorithms sshd accepts', () => {
  it('lets an RSA key through on SHA-2 signatures alone, as OpenSSH 8.8 and later accept it', () => {
    expect(sshdAcceptsKeyType('ssh-rsa', ['rsa-sha2-512', 'rsa-sha2-256'])).toBe(true);
    expect(sshdAcceptsKeyType('ssh-rsa', ['ssh-ed25519'])).toBe(false);
    expect(sshdAcceptsKeyType('ecdsa-sha2-nistp256', ['ssh-ed25519', 'ecdsa-sha2-nistp256'])).toBe(true);
  });

  it('skips keys sshd would ignore, naming them, and fails only when none is left and password logins are off', () => {
    const [ok, refused] = [keyLine('ssh-ed25519'), keyLine('ecdsa-sha2-nistp384')];
    const { keys, skipped } = keepKeysSshdAccepts([ok, refused], ['ssh-ed25519'], false);
    expect(keys).toEqual([ok]);
    expect(skipped[0]!.problem).toMatch(/ecdsa-sha2-nistp384, which this image's sshd does not accept/);
    expect(keepKeysSshdAccepts([refused], ['ssh-ed25519'], true).keys).toEqual([]);
    expect(() => keepKeysSshdAccepts([refused], ['ssh-ed25519'], false)).toThrow(expect.objectContaining({ code: 'INVALID_SSH_KEY' }));
  });
});
