/** The real OS backend against real useradd, passwd, chpasswd, visudo, sshd and hostname, inside the sandbox. */
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Failure } from '../../src/core/errors.js';
import type { StepResult } from '../../src/os/provisioner.js';
import { canSandbox, createSandbox, runInSandbox, runTsInSandbox, type Sandbox } from '../e2e/ns.js';
import { keyLine } from './keys.js';

type Outcome = { ok: StepResult & Record<string, unknown>; error?: undefined } | { ok?: undefined; error: Failure };

const SCRIPT = path.join(import.meta.dirname, 'fixtures/run-steps.ts');

async function steps(sandbox: Sandbox, input: object, password?: string): Promise<Outcome[]> {
  const result = await runTsInSandbox(sandbox, SCRIPT, [JSON.stringify(input)], { stdin: password === undefined ? undefined : Buffer.from(password) });
  expect(result.exitCode, result.stderr).toBe(0);
  return result.stdout.trim().split('\n').map((l) => JSON.parse(l) as Outcome);
}

async function shadowOf(sandbox: Sandbox, user: string): Promise<string> {
  const line = (await readFile(sandbox.hostPath('/etc/shadow'), 'utf8')).split('\n').find((l) => l.startsWith(`${user}:`));
  return line?.split(':')[1] ?? '';
}

describe.skipIf(!canSandbox)('RealProvisioner inside the namespace sandbox', () => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await createSandbox({ hostname: 'before', productUuid: '544CDFD0-CB4E-4B4A-9954-5BDF3ED5C3B8' });
  });
  afterAll(async () => sandbox?.cleanup());

  it('creates the user with home, shell and existing groups, and warns about a skipped missing group', async () => {
    const [user] = await steps(sandbox, { steps: [{ op: 'user', args: { username: 'azureuser', groups: ['adm', 'sudo', 'wheel'] } }] });
    expect(user!.ok).toMatchObject({ backend: 'useradd' });
    expect(user!.ok!.warnings).toEqual([expect.stringMatching(/group wheel does not exist; skipped/)]);
    expect(await readFile(sandbox.hostPath('/etc/passwd'), 'utf8')).toMatch(/^azureuser:x:1000:1000:[^:]*:\/home\/azureuser:\/bin\/bash$/m);
    expect(await readFile(sandbox.hostPath('/etc/group'), 'utf8')).toMatch(/^adm:x:4:azureuser$/m);
    expect((await stat(sandbox.hostPath('/home/azureuser'))).uid).toBe(1000);
    expect(await readFile('/etc/passwd', 'utf8')).not.toMatch(/^azureuser:x:1000:1000:created by bootstate/m);
  });

  it('treats an existing user as fine and adds it to the groups, creating a missing one when configured', async () => {
    const [user] = await steps(sandbox, {
      config: { user_provisioners: { missing_groups: 'create' } },
      steps: [{ op: 'user', args: { username: 'azureuser', groups: ['wheel'] } }],
    });
    expect(user!.ok!.detail).toMatch(/existing user azureuser added to wheel/);
    expect(user!.ok!.warnings).toEqual(['group wheel did not exist; created']);
    expect(await readFile(sandbox.hostPath('/etc/group'), 'utf8')).toMatch(/^wheel:x:\d+:azureuser$/m);
  });

  it("leaves a password useradd left locked as it is: ! in the sandbox shadow, passwd not needed", async () => {
    const before = await shadowOf(sandbox, 'azureuser');
    expect(before).toMatch(/^!/);
    const [result] = await steps(sandbox, { steps: [{ op: 'password', args: 'azureuser' }] });
    expect(result!.ok).toMatchObject({ backend: 'passwd', detail: expect.stringMatching(/already locked in \/etc\/shadow; passwd not needed/) });
    expect(await shadowOf(sandbox, 'azureuser')).toBe(before);
  });

  it('sets a provided password through chpasswd, leaving only a hash in the shadow file', async () => {
    const secret = 'Tr0ub4dor&3-horse';
    await steps(sandbox, { steps: [{ op: 'user', args: { username: 'pwuser', groups: [] } }] });
    const [result] = await steps(sandbox, { steps: [{ op: 'password', args: 'pwuser' }] }, secret);
    expect(result!.ok).toMatchObject({ backend: 'chpasswd' });
    expect(await shadowOf(sandbox, 'pwuser')).toMatch(/^\$(y|6|5|2b|gy)\$/);
    expect(await readFile(sandbox.hostPath('/etc/shadow'), 'utf8')).not.toContain(secret);
  });

  it('locks a password that is set with passwd -l: ! before the hash in the sandbox shadow', async () => {
    await steps(sandbox, { steps: [{ op: 'user', args: { username: 'lockuser', groups: [] } }] }, undefined);
    await steps(sandbox, { steps: [{ op: 'password', args: 'lockuser' }] }, 'Correct-h0rse-battery');
    const hash = await shadowOf(sandbox, 'lockuser');
    expect(hash).toMatch(/^\$/);
    const [result] = await steps(sandbox, { steps: [{ op: 'password', args: 'lockuser' }] });
    expect(result!.ok).toMatchObject({ backend: 'passwd', detail: 'password locked for lockuser' });
    expect(await shadowOf(sandbox, 'lockuser')).toBe(`!${hash}`);
  });

  it('refuses a password step for a user that does not exist', async () => {
    const [result] = await steps(sandbox, { steps: [{ op: 'password', args: 'ghost' }] });
    expect(result!.error).toMatchObject({ code: 'USER_MISSING' });
  });

  for (const [sudo, passwordProvided, rule] of [
    ['nopasswd', true, '(ALL) NOPASSWD: ALL'],
    ['auto', false, '(ALL) NOPASSWD: ALL'],
    ['auto', true, '(ALL) ALL'],
    ['password', false, '(ALL) ALL'],
  ] as const) {
    it(`with sudo = "${sudo}" and ${passwordProvided ? 'a' : 'no'} password, writes a drop-in 0440 that visudo accepts and sudo reads as ${rule}`, async () => {
      const [result] = await steps(sandbox, {
        config: { user_provisioners: { sudo } },
        steps: [{ op: 'user', args: { username: 'azureuser', groups: [], passwordProvided } }],
      });
      expect(result!.ok!.warnings ?? []).toEqual([]);
      expect(result!.ok!.detail).toContain(`wrote /etc/sudoers.d/90-bootstate-azureuser: ALL=${rule}`);
      const file = sandbox.hostPath('/etc/sudoers.d/90-bootstate-azureuser');
      const info = await stat(file);
      expect([info.mode & 0o777, info.uid, info.gid]).toEqual([0o440, 0, 0]);
      const check = await runInSandbox(sandbox, ['visudo', '-c']);
      expect(check.exitCode, check.stdout + check.stderr).toBe(0);
      const listed = await runInSandbox(sandbox, ['sudo', '-n', '-l', '-U', 'azureuser']);
      expect(listed.exitCode, listed.stderr).toBe(0);
      expect(listed.stdout.trim().split('\n').at(-1)!.trim()).toBe(rule);
    });
  }

  it('with sudo = "none", writes no drop-in and leaves the one already there', async () => {
    const file = sandbox.hostPath('/etc/sudoers.d/90-bootstate-azureuser');
    const before = await readFile(file, 'utf8');
    const [result] = await steps(sandbox, {
      config: { user_provisioners: { sudo: 'none' } },
      steps: [{ op: 'user', args: { username: 'azureuser', groups: [], passwordProvided: false } }],
    });
    expect(result!.ok!.detail).toContain('no sudo rule written (sudo = "none")');
    expect(await readFile(file, 'utf8')).toBe(before);
  });

  it('checks the sudo rule with visudo while useradd runs, and moves it in only once the user exists', async () => {
    // A useradd first in PATH that waits (at most 20 s) for the rule's temp file in sudoers.d before it runs the
    // real one, and says whether it saw it: one after the other, it would wait in vain.
    const bin = sandbox.hostPath('/fake-useradd-bin');
    await mkdir(bin, { recursive: true });
    await writeFile(
      path.join(bin, 'useradd'),
      '#!/bin/sh\nfor i in $(seq 200); do\n  ls -a /etc/sudoers.d | grep -q "^\\.90-bootstate-parallel\\..*\\.tmp$" && { echo saw > /etc/useradd-saw; break; }\n' +
        '  test -e /etc/sudoers.d/90-bootstate-parallel && { echo early > /etc/useradd-saw; break; }\n  sleep 0.1\ndone\nexec /usr/sbin/useradd "$@"\n',
      { mode: 0o755 },
    );
    const result = await runTsInSandbox(sandbox, SCRIPT, [JSON.stringify({ steps: [{ op: 'user', args: { username: 'parallel', groups: [], passwordProvided: false } }] })], {
      env: { PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}` },
      timeoutMs: 90_000,
    });
    expect(result.exitCode, result.stderr).toBe(0);
    const [user] = result.stdout.trim().split('\n').map((l) => JSON.parse(l) as Outcome);
    expect(user!.ok!.detail).toContain('wrote /etc/sudoers.d/90-bootstate-parallel: ALL=(ALL) NOPASSWD: ALL');
    expect(await readFile(sandbox.hostPath('/etc/useradd-saw'), 'utf8')).toBe('saw\n');
    expect(await readFile(sandbox.hostPath('/etc/passwd'), 'utf8')).toMatch(/^parallel:/m);
  }, 120_000);

  it('writes no sudo rule, and leaves no temp file, when useradd fails: the failure is the user step\'s', async () => {
    const bin = sandbox.hostPath('/failing-useradd-bin');
    await mkdir(bin, { recursive: true });
    await writeFile(path.join(bin, 'useradd'), '#!/bin/sh\nsleep 0.5\necho "useradd: cannot lock /etc/passwd; try again later." >&2\nexit 1\n', { mode: 0o755 });
    const result = await runTsInSandbox(sandbox, SCRIPT, [JSON.stringify({ steps: [{ op: 'user', args: { username: 'notmade', groups: [], passwordProvided: false } }] })], {
      env: { PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}` },
      timeoutMs: 90_000,
    });
    expect(result.exitCode, result.stderr).toBe(0);
    const [user] = result.stdout.trim().split('\n').map((l) => JSON.parse(l) as Outcome);
    expect(user!.error).toMatchObject({ code: 'USER_FAILED' });
    const left = (await readdir(sandbox.hostPath('/etc/sudoers.d'))).filter((name) => name.includes('notmade'));
    expect(left).toEqual([]);
  }, 120_000);

  it('rejects system accounts and hostile names before running anything', async () => {
    const results = await steps(sandbox, {
      steps: [
        { op: 'validateUsername', args: 'sshd' },
        { op: 'user', args: { username: 'daemon', groups: [] } },
        { op: 'user', args: { username: '-o', groups: [] } },
        { op: 'validateUsername', args: 'pwuser' },
      ],
    });
    expect(results.map((r) => r.error?.code ?? 'ok')).toEqual(['INVALID_USERNAME', 'INVALID_USERNAME', 'INVALID_USERNAME', 'ok']);
  });

  it('resolves AuthorizedKeysFile through sshd and writes keys owned by the user', async () => {
    const key = keyLine();
    const [result] = await steps(sandbox, { steps: [{ op: 'keys', args: { username: 'azureuser', keys: [key, key] } }] });
    expect(result!.ok).toMatchObject({ backend: 'sshd -T', detail: expect.stringContaining('1 key(s) added to /home/azureuser/.ssh/authorized_keys') });
    const file = await stat(sandbox.hostPath('/home/azureuser/.ssh/authorized_keys'));
    expect([file.uid, file.mode & 0o777]).toEqual([1000, 0o600]);
    expect((await stat(sandbox.hostPath('/home/azureuser/.ssh'))).mode & 0o777).toBe(0o700);
  });

  it("skips a key of a type the image's sshd does not accept, and fails when none is left and password logins are off", async () => {
    const main = sandbox.hostPath('/etc/ssh/sshd_config');
    const original = await readFile(main, 'utf8');
    await writeFile(main, `${original}PubkeyAcceptedAlgorithms ssh-ed25519\n`);
    try {
      await steps(sandbox, { steps: [{ op: 'user', args: { username: 'algouser', groups: [] } }] });
      const [ed25519, ecdsa] = [keyLine('ssh-ed25519', 'ok@x'), keyLine('ecdsa-sha2-nistp256', 'refused@x')];
      const [mixed, none] = await steps(sandbox, {
        steps: [
          { op: 'keys', args: { username: 'algouser', keys: [ed25519, ecdsa], passwordAuthentication: false } },
          { op: 'keys', args: { username: 'algouser', keys: [ecdsa], passwordAuthentication: false } },
        ],
      });
      expect(mixed!.ok!.warnings).toContainEqual(expect.stringMatching(/^ssh key skipped: ecdsa-sha2-nistp256 .* which this image's sshd does not accept/));
      expect((await readFile(sandbox.hostPath('/home/algouser/.ssh/authorized_keys'), 'utf8')).trim()).toBe(ed25519);
      expect(none!.error).toMatchObject({ code: 'INVALID_SSH_KEY' });
    } finally {
      await writeFile(main, original);
    }
  });

  it('makes PasswordAuthentication effective even when the image ships a later drop-in saying yes', async () => {
    await writeFile(sandbox.hostPath('/etc/ssh/sshd_config.d/50-cloud-init.conf'), 'PasswordAuthentication yes\n');
    const [result] = await steps(sandbox, { steps: [{ op: 'sshd', args: false }] });
    expect(result!.ok).toMatchObject({ backend: 'sshd_config.d', detail: expect.stringContaining('verified with sshd -T') });
    expect(result!.ok!.warnings).toEqual([]);
    const dump = await runInSandbox(sandbox, ['sshd', '-T']);
    expect(dump.stdout).toMatch(/^passwordauthentication no$/m);
    expect((await stat(sandbox.hostPath('/etc/ssh/sshd_config.d/00-bootstate.conf'))).mode & 0o777).toBe(0o600);
  });

  it('fails the sshd step when the main config sets the value before its Include', async () => {
    const main = sandbox.hostPath('/etc/ssh/sshd_config');
    const original = await readFile(main, 'utf8');
    await writeFile(main, `PasswordAuthentication yes\n${original}`);
    try {
      const [result] = await steps(sandbox, { steps: [{ op: 'sshd', args: false }] });
      expect(result!.error).toMatchObject({ code: 'SSHD_CONFIG_FAILED' });
      expect(Object.fromEntries(result!.error!.data)).toMatchObject({ expected: 'no', effective: 'yes' });
    } finally {
      await writeFile(main, original);
    }
  });

  it('fails the sshd step when sshd -T cannot read the configuration: the asked-for value is unproven', async () => {
    const main = sandbox.hostPath('/etc/ssh/sshd_config');
    const original = await readFile(main, 'utf8');
    await writeFile(main, `${original}NoSuchDirective yes\n`);
    try {
      const [result] = await steps(sandbox, { steps: [{ op: 'sshd', args: false }] });
      expect(result!.error).toMatchObject({ code: 'SSHD_CONFIG_FAILED' });
      expect(Object.fromEntries(result!.error!.data)).toMatchObject({ expected: 'no', sshd_error: expect.stringMatching(/NoSuchDirective|Bad configuration/i) });
    } finally {
      await writeFile(main, original);
    }
  });

  it('sets the hostname inside the UTS namespace, falling back from hostnamectl to hostname', async () => {
    const before = hostname();
    const results = await steps(sandbox, { steps: [{ op: 'hostname', args: 'web-01.internal.example' }, { op: 'currentHostname', args: null }] });
    expect(results[0]!.ok).toMatchObject({ backend: 'hostname' });
    expect(results[1]!.ok!.detail).toBe('web-01');
    expect(results[0]!.ok!.warnings?.[0]).toMatch(/backend hostnamectl failed/);
    expect(await readFile(sandbox.hostPath('/etc/hostname'), 'utf8')).toBe('web-01\n');
    expect(hostname()).toBe(before);
  });

  it('falls back to /etc/hostname within seconds when hostnamectl hangs (systemd-hostnamed cannot start)', async () => {
    // D-Bus gives up on an activation after 25 s; a hostnamectl first in PATH that never answers stands for it.
    const bin = sandbox.hostPath('/fake-hostnamectl-bin');
    await mkdir(bin, { recursive: true });
    await writeFile(path.join(bin, 'hostnamectl'), '#!/bin/sh\nexec sleep 300\n', { mode: 0o755 });
    const started = Date.now();
    const result = await runTsInSandbox(sandbox, SCRIPT, [JSON.stringify({ steps: [{ op: 'hostname', args: 'hung-01' }, { op: 'currentHostname', args: null }] })], {
      env: { PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}` },
      timeoutMs: 90_000,
    });
    const seconds = (Date.now() - started) / 1000;
    expect(result.exitCode, result.stderr).toBe(0);
    const [step, current] = result.stdout.trim().split('\n').map((l) => JSON.parse(l) as Outcome);
    expect(step!.ok).toMatchObject({ backend: 'hostname' });
    expect(step!.ok!.warnings?.[0]).toMatch(/backend hostnamectl failed: .*timed out/);
    expect(current!.ok!.detail).toBe('hung-01');
    expect(await readFile(sandbox.hostPath('/etc/hostname'), 'utf8')).toBe('hung-01\n');
    // The bound is a few seconds; the slack covers node + tsx starting on a loaded machine. Before, 30 s.
    expect(seconds).toBeLessThan(20);
  }, 120_000);

  it('reads the fake product_uuid as the Gen1 VM id', async () => {
    const [result] = await steps(sandbox, { steps: [{ op: 'vmid', args: null }] });
    expect(result!.ok).toMatchObject({ vmId: 'd0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8', source: 'product_uuid', generation: 1 });
  });
});
