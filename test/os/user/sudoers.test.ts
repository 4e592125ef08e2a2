/**
 * The sudoers drop-in's name and rule for every name validateUsername accepts: sudo's includedir silently skips a
 * file whose name has a dot, so a name like `john.doe` must still yield a file sudo reads.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { includesSudoersDir, sudoersFileName, sudoersRule, sudoRuleFor } from '../../../src/os/user/sudoers.js';
import { usernameProblem } from '../../../src/os/validate.js';

const accepted = fc.stringMatching(/^[A-Za-z0-9_.-]{1,31}\$?$/).filter((n) => usernameProblem(n) === null);

describe('sudoersFileName', () => {
  it('keeps a plain name as it is, e.g. 90-bootstate-azureuser and 90-bootstate-AzureAdmin', () => {
    expect(sudoersFileName('azureuser')).toBe('90-bootstate-azureuser');
    expect(sudoersFileName('AzureAdmin')).toBe('90-bootstate-AzureAdmin');
  });

  it('gives john.doe a name without a dot, distinct from john_doe', () => {
    const dotted = sudoersFileName('john.doe');
    expect(dotted).toMatch(/^90-bootstate-john_doe-[0-9a-f]{8}$/);
    expect(dotted).not.toBe(sudoersFileName('john_doe'));
  });

  it('never contains a dot, a slash or a trailing ~, and differs for different names', () => {
    fc.assert(
      fc.property(accepted, accepted, (a, b) => {
        const name = sudoersFileName(a);
        expect(name).toMatch(/^90-bootstate-[A-Za-z0-9_-]+$/);
        if (a !== b) expect(name).not.toBe(sudoersFileName(b));
      }),
    );
  });
});

describe('sudoersRule', () => {
  it('quotes the user name so a dot or a $ cannot change the rule', () => {
    expect(sudoersRule('john.doe', 'nopasswd')).toBe('"john.doe" ALL=(ALL) NOPASSWD: ALL\n');
    expect(sudoersRule('machine$', 'nopasswd')).toBe('"machine$" ALL=(ALL) NOPASSWD: ALL\n');
  });

  it('writes the rule that asks for the password without NOPASSWD', () => {
    expect(sudoersRule('azureuser', 'password')).toBe('"azureuser" ALL=(ALL) ALL\n');
    expect(sudoersRule('john.doe', 'password')).toBe('"john.doe" ALL=(ALL) ALL\n');
  });
});

describe('sudoRuleFor', () => {
  it('auto gives NOPASSWD to an admin without a password and asks for the password when one was provisioned', () => {
    expect(sudoRuleFor('auto', false)).toEqual({ rule: 'nopasswd', why: 'sudo = "auto", no password provisioned' });
    expect(sudoRuleFor('auto', true)).toEqual({ rule: 'password', why: 'sudo = "auto", a password was provisioned' });
  });

  it('nopasswd and password force their rule whatever was provisioned, none gives no rule', () => {
    for (const passwordProvided of [false, true]) {
      expect(sudoRuleFor('nopasswd', passwordProvided).rule).toBe('nopasswd');
      expect(sudoRuleFor('password', passwordProvided).rule).toBe('password');
      expect(sudoRuleFor('none', passwordProvided)).toEqual({ rule: null, why: 'sudo = "none"' });
    }
  });
});

describe('includesSudoersDir', () => {
  it('recognises both @includedir and #includedir spellings', () => {
    expect(includesSudoersDir('@includedir /etc/sudoers.d\n', '/etc/sudoers.d')).toBe(true);
    expect(includesSudoersDir('#includedir /etc/sudoers.d/\n', '/etc/sudoers.d')).toBe(true);
    expect(includesSudoersDir('# includedir /etc/sudoers.d\n', '/etc/sudoers.d')).toBe(false);
  });
});
