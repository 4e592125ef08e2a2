import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { BootstateError } from '../../../src/core/errors.js';
import { expandAuthorizedKeysFile, resolveAuthorizedKeysFiles, sshdDumpValue } from '../../../src/os/ssh/authorized-keys-file.js';
import type { RunOptions, RunResult, Runner } from '../../../src/system/exec.js';
import { dumpFlagsFromBinary, keysPerConnectionFromBinary, sshdDumpFlags, sshdLoadsKeysPerConnection } from '../../../src/os/ssh/sshd-capability.js';

const context = { username: 'alice', home: '/home/alice', uid: 1000 };

describe('expandAuthorizedKeysFile', () => {
  it('expands %h %u %U %% and takes relative paths from the home directory', () => {
    expect(expandAuthorizedKeysFile('.ssh/authorized_keys .ssh/authorized_keys2', context)).toEqual([
      '/home/alice/.ssh/authorized_keys',
      '/home/alice/.ssh/authorized_keys2',
    ]);
    expect(expandAuthorizedKeysFile('%h/.ssh/keys /etc/ssh/keys/%u /var/keys/%U/100%%', context)).toEqual([
      '/home/alice/.ssh/keys',
      '/etc/ssh/keys/alice',
      '/var/keys/1000/100%',
    ]);
  });

  it('refuses an unknown token', () => {
    expect(() => expandAuthorizedKeysFile('/keys/%z', context)).toThrow(/unknown token/);
  });
});

function fakeSshd(answers: Record<string, string | 'missing' | 'fail'>): { run: Runner; calls: string[][] } {
  const calls: string[][] = [];
  const run: Runner = async (argv: string[], _options?: RunOptions): Promise<RunResult> => {
    calls.push(argv);
    const answer = answers[argv[1]!] ?? 'fail';
    if (answer === 'missing') throw new BootstateError('SUBPROCESS_FAILED', 'sshd: spawn ENOENT', { data: [['spawn_error', 'ENOENT']] });
    if (answer === 'fail') throw new BootstateError('SUBPROCESS_FAILED', 'sshd: exited with 255', { data: [['stderr', 'unknown option -- G\n']] });
    return { argv, exitCode: 0, signal: null, stdout: answer, stderr: '', endedBy: 'exit' };
  };
  return { run, calls };
}

const base = { ...context, sshdConfigPath: '/etc/ssh/sshd_config', fallback: '.ssh/authorized_keys', querySshd: true };

describe('resolveAuthorizedKeysFiles', () => {
  it('asks sshd -G for the user with a connection spec and uses every listed file', async () => {
    const { run, calls } = fakeSshd({ '-G': 'port 22\nauthorizedkeysfile .ssh/authorized_keys /etc/ssh/keys/%u\n' });
    const resolved = await resolveAuthorizedKeysFiles({ ...base, run });
    expect(resolved).toEqual({ paths: ['/home/alice/.ssh/authorized_keys', '/etc/ssh/keys/alice'], source: 'sshd -G', warnings: [], acceptedAlgorithms: null });
    expect(calls[0]).toEqual(['sshd', '-G', '-f', '/etc/ssh/sshd_config', '-C', expect.stringMatching(/^user=alice,host=.+,addr=127\.0\.0\.1$/)]);
  });

  it("reads the algorithms sshd accepts for the user's keys (PubkeyAcceptedAlgorithms, older PubkeyAcceptedKeyTypes)", async () => {
    const modern = fakeSshd({ '-G': 'authorizedkeysfile .ssh/authorized_keys\npubkeyacceptedalgorithms ssh-ed25519,rsa-sha2-512\n' });
    expect((await resolveAuthorizedKeysFiles({ ...base, run: modern.run })).acceptedAlgorithms).toEqual(['ssh-ed25519', 'rsa-sha2-512']);
    const older = fakeSshd({ '-G': 'authorizedkeysfile .ssh/authorized_keys\npubkeyacceptedkeytypes ssh-rsa\n' });
    expect((await resolveAuthorizedKeysFiles({ ...base, run: older.run })).acceptedAlgorithms).toEqual(['ssh-rsa']);
  });

  it('falls back to sshd -T when -G is unknown (OpenSSH 9.2), which is normal and warns about nothing', async () => {
    const { run } = fakeSshd({ '-G': 'fail', '-T': 'authorizedkeysfile %h/.ssh/authorized_keys\n' });
    const resolved = await resolveAuthorizedKeysFiles({ ...base, run });
    expect(resolved.source).toBe('sshd -T');
    expect(resolved.paths).toEqual(['/home/alice/.ssh/authorized_keys']);
    expect(resolved.warnings).toEqual([]);
  });

  it('uses the configured path with a warning when sshd is not installed', async () => {
    const { run } = fakeSshd({ '-G': 'missing' });
    const resolved = await resolveAuthorizedKeysFiles({ ...base, run });
    expect(resolved).toMatchObject({ paths: ['/home/alice/.ssh/authorized_keys'], source: 'fallback' });
    expect(resolved.warnings).toEqual([expect.stringMatching(/not installed/)]);
  });

  it('uses the configured path with a warning when both queries fail', async () => {
    const { run } = fakeSshd({});
    const resolved = await resolveAuthorizedKeysFiles({ ...base, run });
    expect(resolved.source).toBe('fallback');
    expect(resolved.warnings).toEqual([
      expect.stringMatching(/^sshd -G failed \(unknown option -- G\)$/),
      expect.stringMatching(/^sshd -T failed/),
      expect.stringMatching(/could not query sshd/),
    ]);
  });

  it('does not run sshd when querying is disabled', async () => {
    const { run, calls } = fakeSshd({});
    expect((await resolveAuthorizedKeysFiles({ ...base, querySshd: false, run })).source).toBe('fallback');
    expect(calls).toEqual([]);
  });

  it('reads keyword values case-insensitively from a dump', () => {
    expect(sshdDumpValue('PasswordAuthentication no\n', 'passwordauthentication')).toBe('no');
    expect(sshdDumpValue('port 22\n', 'passwordauthentication')).toBeNull();
  });
});

describe('which dump flags sshd has, from its binary', () => {
  it('reads -G from the usage line of OpenSSH 9.8 and later, only -T before, and both when it cannot tell', () => {
    expect(dumpFlagsFromBinary('\0usage: sshd [-46DdeGiqTtV] [-C connection_spec]\0')).toEqual(['-G', '-T']);
    expect(dumpFlagsFromBinary('\0usage: sshd [-46DdeiqTtV] [-C connection_spec]\0')).toEqual(['-T']);
    expect(dumpFlagsFromBinary('#!/bin/sh\nexec /usr/sbin/sshd "$@"\n')).toEqual(['-G', '-T']);
  });

  it('tells an sshd that loads its host keys per connection (re-executed, before 9.8) from one with sshd-session', () => {
    expect(keysPerConnectionFromBinary('\0usage: sshd [-46DdeiqTtV] [-C connection_spec]\0')).toBe(true);
    expect(keysPerConnectionFromBinary('\0usage: sshd [-46DdeGiqTtV] [-C connection_spec]\0/usr/lib/openssh/sshd-session\0')).toBe(false);
    // Not an sshd binary it recognises: the keys are made before logins start.
    expect(keysPerConnectionFromBinary('#!/bin/sh\nexec /usr/sbin/sshd "$@"\n')).toBe(false);
  });

  it('finds per-connection host keys exactly when the installed sshd has no sshd-session beside it', async () => {
    const version = spawnSync('sshd', ['-V'], { encoding: 'utf8' });
    if (version.error) throw new Error(`sshd is needed here (openssh-server): ${version.error.message}`);
    const [, major, minor] = /OpenSSH_(\d+)\.(\d+)/.exec(version.stderr) ?? [];
    expect(await sshdLoadsKeysPerConnection()).toBe(Number(major) * 100 + Number(minor) < 908);
  });

  it('agrees with what the installed sshd does when asked for -G', async () => {
    const probe = spawnSync('sshd', ['-G', '-f', '/dev/null', '-C', 'user=root,host=localhost,addr=127.0.0.1'], { encoding: 'utf8' });
    if (probe.error) throw new Error(`sshd is needed here (openssh-server): ${probe.error.message}`);
    const hasG = !/unknown option|illegal option/.test(probe.stderr);
    expect(await sshdDumpFlags()).toEqual(hasG ? ['-G', '-T'] : ['-T']);
  });
});
