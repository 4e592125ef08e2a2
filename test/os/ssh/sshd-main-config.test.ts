/**
 * PasswordAuthentication in an sshd_config without an Include of sshd_config.d. The text transform is checked
 * against an oracle written from sshd's rule (the first value read wins; a Match block ends the global section; an
 * Include may set the keyword before a later line), for any mix of lines; the file write against real files: the
 * original's owner and mode kept, the original kept once as a backup, restore puts it back.
 */
import { chmod, chown, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { setMainConfigPasswordAuthentication, sshdKeyword, withPasswordAuthentication } from '../../../src/os/ssh/sshd-main-config.js';

/**
 * The oracle: the global PasswordAuthentication sshd ends up with, `'include-first'` when an Include comes before any
 * global setting (its files could set it), null when nothing sets it.
 */
function globalValue(text: string): string | null {
  for (const line of text.split('\n')) {
    const m = /^\s*(\w+)(?:\s*=\s*|\s+)(\S+)/.exec(line);
    if (!m || line.trim().startsWith('#')) continue;
    const key = m[1]!.toLowerCase();
    if (key === 'match') return null;
    if (key === 'include') return 'include-first';
    if (key === 'passwordauthentication') return m[2]!.toLowerCase();
  }
  return null;
}

/** The lines from the first Match on (sshd applies them to matching connections only). */
const matchSection = (text: string) => {
  const lines = text.split('\n');
  const at = lines.findIndex((l) => /^\s*match\s/i.test(l));
  return at < 0 ? [] : lines.slice(at);
};

const configLine = fc.constantFrom(
  '', '# PasswordAuthentication yes', 'PasswordAuthentication yes', 'PasswordAuthentication no', '  passwordauthentication=no',
  'PasswordAuthentication\tyes', 'Include /etc/crypto-policies/back-ends/opensshserver.config', 'UsePAM yes', 'Port 22',
  'Match User alice', 'Match Address 10.0.0.0/8', '  PasswordAuthentication yes', 'Subsystem sftp /usr/libexec/openssh/sftp-server',
);
const configText = fc.array(configLine, { maxLength: 12 }).map((lines) => `${lines.join('\n')}\n`);
const value = fc.constantFrom('yes' as const, 'no' as const);

describe('withPasswordAuthentication', () => {
  it('makes the first global value the wanted one, with no Include before it, for any sshd_config', () => {
    fc.assert(fc.property(configText, value, (text, want) => {
      expect(globalValue(withPasswordAuthentication(text, want))).toBe(want);
    }));
  });

  it('leaves every Match block as it was', () => {
    fc.assert(fc.property(configText, value, (text, want) => {
      expect(matchSection(withPasswordAuthentication(text, want))).toEqual(matchSection(text));
    }));
  });

  it('is idempotent and a later value replaces an earlier one in place (no line piles up across boots)', () => {
    fc.assert(
      fc.property(configText, value, value, (text, first, second) => {
        const once = withPasswordAuthentication(text, first);
        expect(withPasswordAuthentication(once, first)).toBe(once);
        expect(withPasswordAuthentication(once, second)).toBe(withPasswordAuthentication(text, second));
      }),
    );
  });

  it('changes no line but the first global PasswordAuthentication, or adds two lines at the top', () => {
    fc.assert(
      fc.property(configText, value, (text, want) => {
        const before = text.split('\n');
        const after = withPasswordAuthentication(text, want).split('\n');
        if (after.length === before.length) {
          const changed = before.flatMap((line, i) => (line === after[i] ? [] : [line]));
          expect(changed.length).toBeLessThanOrEqual(1);
          for (const line of changed) expect(sshdKeyword(line)).toBe('passwordauthentication');
        } else {
          expect(after.slice(2)).toEqual(before);
          expect(after[1]).toBe(`PasswordAuthentication ${want}`);
        }
      }),
    );
  });

  it('replaces a global setting in place, but puts the value first when an Include or Match comes before', () => {
    expect(withPasswordAuthentication('Port 22\nPasswordAuthentication yes\nMatch User a\n  PasswordAuthentication yes\n', 'no')).toBe(
      'Port 22\nPasswordAuthentication no\nMatch User a\n  PasswordAuthentication yes\n',
    );
    const included = withPasswordAuthentication('Include /etc/x.conf\nPasswordAuthentication yes\n', 'no');
    expect(included.split('\n').slice(1)).toEqual(['PasswordAuthentication no', 'Include /etc/x.conf', 'PasswordAuthentication yes', '']);
    const inMatch = withPasswordAuthentication('Match User a\n  PasswordAuthentication no\n', 'no');
    expect(inMatch.split('\n')[1]).toBe('PasswordAuthentication no');
  });
});

describe('setMainConfigPasswordAuthentication', () => {
  let dir: string;
  let file: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'bootstate-sshd-main-'));
    file = path.join(dir, 'sshd_config');
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));
  const signal = new AbortController().signal;

  it("keeps the original's owner and mode on the new file and on the backup, and restore puts the original back", async () => {
    const original = 'PasswordAuthentication yes\nUsePAM yes\n';
    await writeFile(file, original);
    await chmod(file, 0o640);
    const owner = process.getuid?.() === 0 ? { uid: 4242, gid: 4343 } : { uid: process.getuid!(), gid: process.getgid!() };
    await chown(file, owner.uid, owner.gid);

    const write = await setMainConfigPasswordAuthentication(file, 'no', signal);
    expect(write.changed).toBe(true);
    expect(await readFile(file, 'utf8')).toBe('PasswordAuthentication no\nUsePAM yes\n');
    for (const p of [file, `${file}.bootstate-orig`]) {
      const info = await stat(p);
      expect([info.mode & 0o7777, info.uid, info.gid]).toEqual([0o640, owner.uid, owner.gid]);
    }
    expect(await readFile(`${file}.bootstate-orig`, 'utf8')).toBe(original);

    await write.restore();
    expect(await readFile(file, 'utf8')).toBe(original);
    expect((await stat(file)).mode & 0o7777).toBe(0o640);
  });

  it('keeps the first original: a second boot with another value does not overwrite the backup', async () => {
    await writeFile(file, 'UsePAM yes\n');
    await setMainConfigPasswordAuthentication(file, 'no', signal);
    const second = await setMainConfigPasswordAuthentication(file, 'yes', signal);
    expect(second.changed).toBe(true);
    expect(await readFile(`${file}.bootstate-orig`, 'utf8')).toBe('UsePAM yes\n');
    expect((await readFile(file, 'utf8')).split('\n')[1]).toBe('PasswordAuthentication yes');
  });

  it('keeps bytes that are not UTF-8 as they were, in the edited file and in the original kept beside it', async () => {
    // A Latin-1 comment (0xE9 for é, a stray 0xFF) beside real UTF-8 (é as 0xC3 0xA9): the file is bytes, not text.
    const bytes = (...parts: Array<string | number[]>) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'ascii') : Buffer.from(p))));
    const original = bytes('# Cr', [0xe9], 'dit ', [0xff, 0xfe], ' caf', [0xc3, 0xa9], '\nPasswordAuthentication yes\nBanner /etc/issue', [0xe9], '\n');
    await writeFile(file, original);

    const write = await setMainConfigPasswordAuthentication(file, 'no', signal);
    expect(write.changed).toBe(true);
    expect(await readFile(`${file}.bootstate-orig`)).toEqual(original);
    expect(await readFile(file)).toEqual(bytes('# Cr', [0xe9], 'dit ', [0xff, 0xfe], ' caf', [0xc3, 0xa9], '\nPasswordAuthentication no\nBanner /etc/issue', [0xe9], '\n'));

    await write.restore();
    expect(await readFile(file)).toEqual(original);
  });

  it('puts the setting first in a file that is not UTF-8, the rest byte for byte', async () => {
    const original = Buffer.concat([Buffer.from('Include /etc/ssh/extra.conf\n# '), Buffer.from([0xe9, 0xff, 0x80]), Buffer.from('\n')]);
    await writeFile(file, original);
    await setMainConfigPasswordAuthentication(file, 'yes', signal);
    const after = await readFile(file);
    expect(after.subarray(after.length - original.length)).toEqual(original);
    expect(after.subarray(0, after.length - original.length).toString('ascii')).toMatch(/\nPasswordAuthentication yes\n$/);
    expect(await readFile(`${file}.bootstate-orig`)).toEqual(original);
  });

  it('writes nothing, not even a backup, when the file already says so first', async () => {
    await writeFile(file, 'PasswordAuthentication no\n');
    expect((await setMainConfigPasswordAuthentication(file, 'no', signal)).changed).toBe(false);
    await expect(stat(`${file}.bootstate-orig`)).rejects.toThrow(/ENOENT/);
  });
});
