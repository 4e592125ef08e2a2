import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import {
  machineHostname,
  validateHostname,
  validatePassword,
  validateSshKey,
  validateUsername,
} from '../../src/os/validate.js';
import { keyLine } from './keys.js';

/** Runs `f`; it must either return or throw a BootstateError of `code` whose data names a problem. */
function acceptsOrExplains(code: string, f: () => unknown): boolean {
  try {
    f();
    return true;
  } catch (error) {
    expect(error).toBeInstanceOf(BootstateError);
    const e = error as BootstateError;
    expect(e.code).toBe(code);
    expect(e.data.find(([k]) => k === 'problem')?.[1]).toBeTruthy();
    return false;
  }
}

describe('validateUsername', () => {
  it('accepts the names Azure sends and useradd creates: upper case, dots, digits first, 32 bytes', async () => {
    // AzureAdmin (azure-init's IMDS fixture carries MinProvAgentUser), john.doe (azure-cli lets it through).
    for (const name of ['azureuser', 'AzureAdmin', 'MinProvAgentUser', 'UserName', 'john.doe', '_svc', 'a', 'user-1', 'machine$', '1abc', 'a'.repeat(32)]) {
      await expect(validateUsername(name)).resolves.toBe(name);
    }
  });

  it('rejects empty, too long, hyphen-led, separator, blank, control, dot-only, digit-only and hostile names, escaped', async () => {
    const cases: Array<[string, RegExp]> = [
      ['', /empty/], ['a'.repeat(33), /32 bytes/], ['é'.repeat(17), /32 bytes/], ['-rf', /hyphen/], ['a:b', /":"/],
      ['a/b', /":"/], ['a,b', /":"/], ['a b', /whitespace/], ['ev\nil', /control/], ['.', /directory/], ['..', /directory/],
      ['123', /digits/], ['x;rm', /not a user name/], ['ünï', /not a user name/], ['a$b', /not a user name/],
    ];
    for (const [name, why] of cases) {
      const error = await validateUsername(name).catch((e: unknown) => e);
      expect(error, JSON.stringify(name)).toMatchObject({ code: 'INVALID_USERNAME' });
      const data = new Map((error as BootstateError).data);
      expect(data.get('problem'), JSON.stringify(name)).toMatch(why);
      expect(data.get('username') ?? '').not.toMatch(/[\n\u0080-\u2025\u2027-\uffff]/);
    }
  });

  it('rejects reserved accounts such as root even without a passwd file', async () => {
    await expect(validateUsername('root')).rejects.toMatchObject({ code: 'INVALID_USERNAME' });
  });

  it('rejects an existing system account from the passwd file but accepts an existing regular user', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'passwd-'));
    const passwdFile = path.join(dir, 'passwd');
    await writeFile(passwdFile, 'svcacct:x:998:998::/var/lib/svc:/usr/sbin/nologin\nalice:x:1000:1000::/home/alice:/bin/bash\n');
    await expect(validateUsername('svcacct', { passwdFile })).rejects.toMatchObject({ code: 'INVALID_USERNAME' });
    await expect(validateUsername('alice', { passwdFile })).resolves.toBe('alice');
    await rm(dir, { recursive: true });
  });

  it('never throws anything but INVALID_USERNAME with a reason, for any string', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 40 }), async (name) => {
        const outcome = await validateUsername(name).then(() => null, (e: unknown) => e);
        if (outcome === null) return /^[A-Za-z0-9_.-]+\$?$/.test(name) && !/^(-|[0-9]+$|\.\.?$)/.test(name) && name.length <= 32;
        return outcome instanceof BootstateError && outcome.code === 'INVALID_USERNAME' && outcome.data.some(([k]) => k === 'problem');
      }),
    );
  });
});

describe('validateHostname', () => {
  it('accepts RFC 1123 names and gives the machine the first label', () => {
    expect(validateHostname('web-01')).toBe('web-01');
    expect(validateHostname('1st.example.com')).toBe('1st.example.com');
    expect(machineHostname('web-01.internal.example')).toBe('web-01');
    expect(validateHostname(`${'a'.repeat(63)}.b`)).toBeTruthy();
  });

  it('rejects empty labels, long labels, bad characters and leading or trailing hyphens', () => {
    for (const name of ['', 'a..b', 'a'.repeat(64), '-web', 'web-', 'we_b', 'web 01', 'host;reboot', `${'a.'.repeat(127)}aa`]) {
      expect(() => validateHostname(name), name).toThrow(expect.objectContaining({ code: 'INVALID_HOSTNAME' }));
    }
  });

  it('every rejection is an INVALID_HOSTNAME with a reason, for any string', () => {
    fc.assert(fc.property(fc.string({ maxLength: 300 }), (name) => {
      acceptsOrExplains('INVALID_HOSTNAME', () => validateHostname(name));
    }));
  });
});

describe('validateSshKey', () => {
  it('accepts each known key type and normalises surrounding whitespace and CR/LF', () => {
    for (const type of ['ssh-rsa', 'ssh-ed25519', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521', 'sk-ssh-ed25519@openssh.com']) {
      const line = keyLine(type);
      expect(validateSshKey(`  ${line}\r\n`).line).toBe(line);
    }
  });

  it('joins a key whose base64 was wrapped across lines', () => {
    const line = keyLine('ssh-ed25519', null);
    const [type, data] = line.split(' ');
    expect(validateSshKey(`${type} ${data!.slice(0, 20)}\r\n${data!.slice(20)}`).line).toBe(line);
  });

  it('accepts an options field with quoted spaces', () => {
    const key = validateSshKey(`from="10.0.0.1",command="echo hi there" ${keyLine('ssh-ed25519', 'c')}`);
    expect(key.options).toBe('from="10.0.0.1",command="echo hi there"');
    expect(key.type).toBe('ssh-ed25519');
  });

  it('rejects unknown types, bad base64, a blob naming another type and control characters', () => {
    const bad = [
      '',
      'ssh-dss AAAAB3NzaC1kc3M=',
      'ssh-ed25519 not*base64',
      keyLine('ssh-ed25519', null, 'ssh-rsa'),
      `${keyLine('ssh-ed25519', null)} comment\u0007bell`,
      'ssh-ed25519',
      'command="unterminated ssh-ed25519 AAAA',
    ];
    for (const line of bad) expect(() => validateSshKey(line), line).toThrow(expect.objectContaining({ code: 'INVALID_SSH_KEY' }));
  });

  it('every rejection is an INVALID_SSH_KEY with a reason, for arbitrary and mutated lines', () => {
    const mutated = fc.tuple(fc.constantFrom(keyLine(), keyLine('ssh-rsa')), fc.nat(), fc.string({ maxLength: 3 })).map(([line, at, insert]) => {
      const i = at % (line.length + 1);
      return line.slice(0, i) + insert + line.slice(i);
    });
    fc.assert(fc.property(fc.oneof(fc.string(), mutated), (line) => {
      acceptsOrExplains('INVALID_SSH_KEY', () => validateSshKey(line));
    }));
  });
});

describe('validatePassword', () => {
  it('accepts 72 characters and rejects 73 without the value in message or data', () => {
    expect(() => validatePassword('p'.repeat(72))).not.toThrow();
    const secret = 'S3cret!'.repeat(11);
    try {
      validatePassword(secret);
      expect.unreachable();
    } catch (error) {
      const e = error as BootstateError;
      expect(e.code).toBe('PASSWORD_TOO_LONG');
      expect(e.data).toEqual([['length', '77'], ['max_length', '72']]);
      expect(JSON.stringify({ m: e.message, d: e.data, f: e.toFailure() })).not.toContain('S3cret');
    }
  });
});
