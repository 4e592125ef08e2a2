/**
 * SSH host keys made for this VM (src/os/ssh/host-keys.ts), with the real ssh-keygen in a temporary root: the image's
 * keys replaced, modes sshd accepts, fingerprints as `ssh-keygen -l` prints them, and the failure rules.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BootstateError } from '../../../src/core/errors.js';
import type { OsContext } from '../../../src/os/backends.js';
import { run, type Runner } from '../../../src/system/exec.js';
import { addHostKeys, completeHostKeys, fingerprintBlock, fingerprintOf, regenerateHostKeys } from '../../../src/os/ssh/host-keys.js';

const uid = process.getuid?.() ?? 0;
const gid = process.getgid?.() ?? 0;
let root: string;
let etcSsh: string;
const signal = new AbortController().signal;
const context = (runner: Runner = run): OsContext => ({ root, run: runner, rootOwner: { uid, gid } });
const keyFiles = async () => (await readdir(etcSsh)).sort();

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'bootstate-hostkeys-'));
  etcSsh = path.join(root, 'etc/ssh');
  await mkdir(etcSsh, { recursive: true });
  // The image's keys: an ed25519 pair and a DSA one this VM must not keep either.
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'image@builder', '-f', path.join(etcSsh, 'ssh_host_ed25519_key')]);
  await writeFile(path.join(etcSsh, 'ssh_host_dsa_key'), 'old dsa key\n', { mode: 0o600 });
  await writeFile(path.join(etcSsh, 'ssh_host_dsa_key.pub'), 'ssh-dss AAAA old\n');
  await writeFile(path.join(etcSsh, 'sshd_config'), 'Port 22\n');
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('regenerateHostKeys', () => {
  it("replaces every image key with new ones of the configured types, 0600 and 0644, and prints the fingerprint block", async () => {
    const imageKey = await readFile(path.join(etcSsh, 'ssh_host_ed25519_key.pub'), 'utf8');
    const result = await regenerateHostKeys({ dir: '/etc/ssh', types: ['rsa', 'ecdsa', 'ed25519'] }, context(), signal);

    expect(await keyFiles()).toEqual([
      'ssh_host_ecdsa_key', 'ssh_host_ecdsa_key.pub', 'ssh_host_ed25519_key', 'ssh_host_ed25519_key.pub',
      'ssh_host_rsa_key', 'ssh_host_rsa_key.pub', 'sshd_config',
    ]);
    expect(await readFile(path.join(etcSsh, 'ssh_host_ed25519_key.pub'), 'utf8')).not.toBe(imageKey);
    for (const type of ['rsa', 'ecdsa', 'ed25519']) {
      const key = path.join(etcSsh, `ssh_host_${type}_key`);
      expect((await stat(key)).mode & 0o777).toBe(0o600);
      expect((await stat(`${key}.pub`)).mode & 0o777).toBe(0o644);
      // The private key is one ssh-keygen can read and derive the public key from.
      expect(execFileSync('ssh-keygen', ['-y', '-f', key], { encoding: 'utf8' }).trim().split(' ')[1]).toBe((await readFile(`${key}.pub`, 'utf8')).trim().split(' ')[1]);
      // No comment: the keys are made before the VM's hostname is known.
      expect((await readFile(`${key}.pub`, 'utf8')).trim().split(/\s+/)).toHaveLength(2);
    }
    const lines = result.console!.trimEnd().split('\n');
    expect(lines[0]).toBe('-----BEGIN SSH HOST KEY FINGERPRINTS-----');
    expect(lines[4]).toBe('-----END SSH HOST KEY FINGERPRINTS-----');
    expect(lines[5]).toBe('-----BEGIN SSH HOST KEY KEYS-----');
    expect(lines.at(-1)).toBe('-----END SSH HOST KEY KEYS-----');
    for (const type of ['rsa', 'ecdsa', 'ed25519']) {
      const printed = execFileSync('ssh-keygen', ['-l', '-f', path.join(etcSsh, `ssh_host_${type}_key.pub`)], { encoding: 'utf8' }).trim();
      expect(lines.slice(1, 4)).toContain(printed);
      expect(result.detail).toContain(printed.split(' ')[1]);
    }
    expect(result.detail).toContain("2 of the image's replaced");
    expect(result.warnings).toEqual([]);
  });

  it('a type that cannot be made is a warning naming it; the others replace the image keys', async () => {
    const failEcdsa: Runner = (argv, options) =>
      argv.includes('ecdsa') ? Promise.reject(new BootstateError('SUBPROCESS_FAILED', 'ssh-keygen exited with 1')) : run(argv, options);
    const result = await regenerateHostKeys({ dir: '/etc/ssh', types: ['ecdsa', 'ed25519'] }, context(failEcdsa), signal);
    expect(await keyFiles()).toEqual(['ssh_host_ed25519_key', 'ssh_host_ed25519_key.pub', 'sshd_config']);
    expect(result.warnings).toEqual(['host key ecdsa not generated: ssh-keygen exited with 1']);
  });

  it('when no type can be made the VM fails and the image keys stay, with no temporary file left', async () => {
    const before = await keyFiles();
    const failAll: Runner = () => Promise.reject(new BootstateError('SUBPROCESS_FAILED', 'ssh-keygen killed by SIGKILL'));
    const error = await regenerateHostKeys({ dir: '/etc/ssh', types: ['rsa', 'ed25519'] }, context(failAll), signal).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BootstateError);
    expect((error as BootstateError).code).toBe('HOST_KEYS_FAILED');
    expect((error as BootstateError).message).toContain('host key rsa not generated');
    expect(await keyFiles()).toEqual(before);
  });

  it('a stale temporary key from an interrupted run is replaced, never installed as it was', async () => {
    await writeFile(path.join(etcSsh, '.bootstate-new-ssh_host_ed25519_key'), 'half written');
    await regenerateHostKeys({ dir: '/etc/ssh', types: ['ed25519'] }, context(), signal);
    expect(await keyFiles()).toEqual(['ssh_host_ed25519_key', 'ssh_host_ed25519_key.pub', 'sshd_config']);
    expect(await readFile(path.join(etcSsh, 'ssh_host_ed25519_key'), 'utf8')).toContain('OPENSSH PRIVATE KEY');
  });

  it('without ssh-keygen (no OpenSSH on the image) the keys are left alone with a warning; without the directory nothing happens', async () => {
    const before = await keyFiles();
    const missing: Runner = () =>
      Promise.reject(new BootstateError('SUBPROCESS_FAILED', 'ssh-keygen: not found', { data: [['spawn_error', 'ENOENT']] }));
    const result = await regenerateHostKeys({ dir: '/etc/ssh', types: ['ed25519'] }, context(missing), signal);
    expect(result.backend).toBe('none');
    expect(result.warnings).toEqual(['ssh-keygen is not installed; ssh host keys not replaced']);
    expect(await keyFiles()).toEqual(before);

    const none = await regenerateHostKeys({ dir: '/etc/ssh-absent', types: ['ed25519'] }, context(), signal);
    expect(none.backend).toBe('none');
  });
});

describe('host keys made in the background', () => {
  it('the image keys all go, the others are made now, the background types are returned and made by addHostKeys, niced, with the block of all', async () => {
    const seen: Array<{ type: string; nice?: number }> = [];
    const recording: Runner = (argv, options) => {
      seen.push({ type: argv[argv.indexOf('-t') + 1]!, nice: options?.nice });
      return run(argv, options);
    };
    const first = await regenerateHostKeys({ dir: '/etc/ssh', types: ['rsa', 'ecdsa', 'ed25519'], later: ['rsa'] }, context(recording), signal);
    expect(first.later).toEqual(['rsa']);
    // Not even the image's rsa key stays: it is the captured machine's.
    expect(await keyFiles()).toEqual(['ssh_host_ecdsa_key', 'ssh_host_ecdsa_key.pub', 'ssh_host_ed25519_key', 'ssh_host_ed25519_key.pub', 'sshd_config']);
    expect(first.console).toBeUndefined();
    expect(first.detail).toMatch(/; rsa on its way \(logins do not wait for it\)$/);

    const second = await addHostKeys({ dir: '/etc/ssh', types: first.later, all: ['rsa', 'ecdsa', 'ed25519'] }, context(recording), signal);
    expect(await keyFiles()).toContain('ssh_host_rsa_key');
    expect((await stat(path.join(etcSsh, 'ssh_host_rsa_key'))).mode & 0o777).toBe(0o600);
    expect(seen.sort((a, b) => a.type.localeCompare(b.type))).toEqual([{ type: 'ecdsa' }, { type: 'ed25519' }, { type: 'rsa', nice: 19 }]);
    const lines = second.console!.trimEnd().split('\n');
    for (const type of ['rsa', 'ecdsa', 'ed25519']) {
      expect(lines).toContain(execFileSync('ssh-keygen', ['-l', '-f', path.join(etcSsh, `ssh_host_${type}_key.pub`)], { encoding: 'utf8' }).trim());
    }
    expect(second.detail).toMatch(/^ssh host keys added: 3072 SHA256:\S+ no comment \(RSA\)$/);
  });

  it('when every type is for the background, all are made at once: sshd must start with a key', async () => {
    const result = await regenerateHostKeys({ dir: '/etc/ssh', types: ['ed25519'], later: ['ed25519'] }, context(), signal);
    expect(result.later).toEqual([]);
    expect(result.console).toContain('(ED25519)');
  });

  it('a background type that cannot be made is a warning, never a failure: sshd already has keys', async () => {
    await regenerateHostKeys({ dir: '/etc/ssh', types: ['rsa', 'ed25519'], later: ['rsa'] }, context(), signal);
    const failing: Runner = () => Promise.reject(new BootstateError('SUBPROCESS_FAILED', 'ssh-keygen killed by SIGKILL'));
    const result = await addHostKeys({ dir: '/etc/ssh', types: ['rsa'], all: ['rsa', 'ed25519'] }, context(failing), signal);
    expect(result.warnings).toEqual(['host key rsa not generated: ssh-keygen killed by SIGKILL']);
    expect(result.detail).toBe('no ssh host key added');
    expect(await keyFiles()).toEqual(['ssh_host_ed25519_key', 'ssh_host_ed25519_key.pub', 'sshd_config']);
  });
});

describe('a run that ends while keys are made', () => {
  it('leaves no key under a temporary name: the one made is removed, the one aborted never lands', async () => {
    const controller = new AbortController();
    let made!: () => void;
    const ed25519Made = new Promise<void>((resolve) => (made = resolve));
    // ed25519 is made at once; ecdsa waits until the run is abandoned (a refused username, a SIGTERM).
    const runner: Runner = async (argv, options) => {
      if (argv.includes('ecdsa')) {
        await new Promise((_, reject) => options!.signal!.addEventListener('abort', () => reject(new BootstateError('SUBPROCESS_FAILED', 'aborted')), { once: true }));
      }
      const result = await run(argv, options);
      made();
      return result;
    };
    const step = regenerateHostKeys({ dir: '/etc/ssh', types: ['ecdsa', 'ed25519'] }, context(runner), controller.signal);
    await ed25519Made;
    expect((await keyFiles()).filter((n) => n.startsWith('.bootstate-new-'))).toEqual(['.bootstate-new-ssh_host_ed25519_key', '.bootstate-new-ssh_host_ed25519_key.pub']);
    controller.abort();
    await expect(step).rejects.toThrow();
    // The image's keys stay; nothing new is left beside them.
    expect(await keyFiles()).toEqual(['ssh_host_dsa_key', 'ssh_host_dsa_key.pub', 'ssh_host_ed25519_key', 'ssh_host_ed25519_key.pub', 'sshd_config']);
  });
});

describe('completeHostKeys (a boot that finds the report-pending marker)', () => {
  it('makes the types a stopped boot left missing, at normal priority, and sweeps a killed ssh-keygen\'s temporary key', async () => {
    await regenerateHostKeys({ dir: '/etc/ssh', types: ['rsa', 'ecdsa', 'ed25519'], later: ['rsa'] }, context(), signal);
    await writeFile(path.join(etcSsh, '.bootstate-new-ssh_host_rsa_key'), 'half a key\n', { mode: 0o600 });
    const seen: Array<{ type: string; nice?: number }> = [];
    const recording: Runner = (argv, options) => {
      seen.push({ type: argv[argv.indexOf('-t') + 1]!, nice: options?.nice });
      return run(argv, options);
    };
    const result = await completeHostKeys({ dir: '/etc/ssh', types: ['rsa', 'ecdsa', 'ed25519'] }, context(recording), signal);
    expect(seen).toEqual([{ type: 'rsa', nice: 0 }]);
    expect(await keyFiles()).toEqual([
      'ssh_host_ecdsa_key', 'ssh_host_ecdsa_key.pub', 'ssh_host_ed25519_key', 'ssh_host_ed25519_key.pub',
      'ssh_host_rsa_key', 'ssh_host_rsa_key.pub', 'sshd_config',
    ]);
    expect(result.console).toContain('(RSA)');
  });

  it('runs nothing when every key is in place', async () => {
    await regenerateHostKeys({ dir: '/etc/ssh', types: ['ed25519'] }, context(), signal);
    const none: Runner = () => Promise.reject(new Error('no ssh-keygen expected'));
    expect(await completeHostKeys({ dir: '/etc/ssh', types: ['ed25519'] }, context(none), signal)).toMatchObject({ detail: 'every ssh host key is in place' });
  });
});

describe('fingerprintOf', () => {
  it('prints what ssh-keygen -l prints, for every type and RSA size', async () => {
    const dir = path.join(root, 'keys');
    await mkdir(dir);
    for (const [type, bits] of [['rsa', '1024'], ['rsa', '3072'], ['rsa', '4095'], ['ecdsa', '256'], ['ecdsa', '384'], ['ecdsa', '521'], ['ed25519', '']] as const) {
      const file = path.join(dir, `${type}${bits}`);
      execFileSync('ssh-keygen', ['-q', '-t', type, ...(bits ? ['-b', bits] : []), '-N', '', '-C', `k ${type}`, '-f', file]);
      const expected = execFileSync('ssh-keygen', ['-l', '-f', `${file}.pub`], { encoding: 'utf8' }).trim();
      expect(fingerprintOf(await readFile(`${file}.pub`, 'utf8'))).toBe(expected);
    }
  });

  it('the block has the marker lines around the fingerprints, then around the keys', () => {
    const block = fingerprintBlock([{ type: 'ed25519', fingerprint: '256 SHA256:abc root@h (ED25519)', publicKey: 'ssh-ed25519 AAAA root@h' }]);
    expect(block).toBe(
      '-----BEGIN SSH HOST KEY FINGERPRINTS-----\n256 SHA256:abc root@h (ED25519)\n-----END SSH HOST KEY FINGERPRINTS-----\n' +
        '-----BEGIN SSH HOST KEY KEYS-----\nssh-ed25519 AAAA root@h\n-----END SSH HOST KEY KEYS-----\n',
    );
  });
});
