/**
 * The arm64 package booted (`npm run test:arm64`, not part of test:long): an arm64 Debian 12 root built by
 * mmdebstrap --arch=arm64, the arm64 .deb (built on this amd64 machine) installed with dpkg --root, booted under
 * systemd-nspawn with the emulated arm64 systemd as PID 1, every executable of the VM run by qemu-user through
 * binfmt_misc (test/boot/emulation.ts), the fake fabric at Azure's addresses in the VM's own network namespace. The
 * amd64 boot's assertions (test/boot/debian-boot.test.ts): Ready received, the key login with the served key, the
 * unit done before sshd starts, the password locked, host keys of its own, a second boot that does nothing.
 *
 * What emulation does not show: systemd skips SystemCallFilter= and SystemCallArchitectures= under qemu-user, so the
 * unit's seccomp lines are not exercised; the drop-ins of test/boot/emulation.ts change Debian's units (never
 * bootstate's); the timings are qemu's, several times an arm64 CPU's. The figures it prints (boot to login, the unit's
 * time, Ready) are under qemu emulation.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunResult } from '../../src/system/exec.js';
import { REPO } from '../e2e/ns.js';
import { buildDeb, debianRoot, installDeb, requireTools, SUITE } from './debian-root.js';
import { emulationLayer, holdBinfmt, type BinfmtHold } from './emulation.js';
import { agentEnded, createMachine, journal, show, until, type Boot, type Machine } from './machine.js';
import { imdsDocument } from './scenario.js';

const TAG = `bsa${process.pid}${randomBytes(2).toString('hex')}`;
const USER = 'azureuser';
// systemd's catalog ids for "Starting UNIT" and for a finished start job.
const UNIT_STARTING = '7d4958e842da4a758f6c1cdc7b36dcc5';
const UNIT_STARTED = '39f53479d3a045ac8e11786248231fbf';
const UNIT_FAILED = 'be02cf6855d2428ba40df7e9d022f03d';

/** What one boot showed. */
interface Seen {
  arch: string;
  /** ms from starting nspawn to the first key login that ran a command. */
  loginMs: number;
  login: RunResult;
  loginAttempts: string[];
  service: Record<string, string>;
  bootstateDone: number | null;
  sshStarting: number | null;
  unitLog: string;
  warnings: string[];
  hostKeyBlock: { fingerprints: string[]; keys: string[] } | null;
  strictLogin: RunResult | null;
  passwordLogin: RunResult;
  sshdT: string;
  shadow: string;
  passwd: string;
  /** The VM's host public keys after the boot. */
  hostKeys: string[];
  requestsAfter: number;
  /** ms from starting nspawn to the Ready report's arrival, when this boot sent one. */
  readyMs: number | null;
  story: string;
}

let hold: BinfmtHold | undefined;
let workDir: string;
let key: string;
let publicKey: string;
let imageHostKeys: string[];
let machine: Machine | undefined;
let boots: Promise<Seen[]>;
const timings: string[] = [];

/** The `.pub` host keys under `dir` (an etc/ssh), as `type base64` lines, sorted. */
async function hostKeysIn(dir: string): Promise<string[]> {
  const names = (await readdir(dir)).filter((n) => /^ssh_host_.*_key\.pub$/.test(n));
  const keys = await Promise.all(names.map(async (n) => (await readFile(path.join(dir, n), 'utf8')).split(' ').slice(0, 2).join(' ')));
  return keys.sort();
}

/** The fingerprint and key lines between the BEGIN/END SSH HOST KEY markers, or null when there are none. */
function hostKeyBlock(text: string): { fingerprints: string[]; keys: string[] } | null {
  const between = (what: string) => {
    const match = new RegExp(`-----BEGIN SSH HOST KEY ${what}-----\\r?\\n([\\s\\S]*?)-----END SSH HOST KEY ${what}-----`).exec(text);
    return match ? match[1]!.split(/\r?\n/).map((l) => l.trim()).filter(Boolean) : null;
  };
  const fingerprints = between('FINGERPRINTS');
  const keys = between('KEYS');
  return fingerprints && keys ? { fingerprints, keys } : null;
}

/** The key login polled from nspawn's start, as a client would; each failed attempt is kept for the story. */
async function firstLogin(boot: Boot, story: () => Promise<string>): Promise<{ ms: number; login: RunResult; attempts: string[] }> {
  const attempts: string[] = [];
  return until(
    'the key login',
    async () => {
      const login = await boot.ssh(key, USER, 'id -un; hostname; uname -m', 30_000, ['-o', 'ConnectTimeout=5']);
      if (login.exitCode === 0) return { ms: performance.now() - boot.startedAt, login, attempts };
      attempts.push(`exit ${login.exitCode}: ${login.stderr.trim().split('\n').at(-1)}`);
      return null;
    },
    240_000,
    async () => `ssh attempts:\n${attempts.slice(-5).join('\n')}\n${await story()}`,
    200,
  );
}

async function observe(m: Machine): Promise<Seen> {
  const bootEpoch = Date.now();
  const boot = await m.boot();
  const requestsBefore = (await m.requests()).length;
  const text = async (args: string[]) => (await boot.exec(['journalctl', '--no-pager', '-q', '-b', ...args])).stdout;
  const story = async () =>
    [`bootstate.service:\n${await text(['-u', 'bootstate.service', '-o', 'short-monotonic'])}`, `ssh.service:\n${await text(['-u', 'ssh.service'])}`,
      `failed units: ${(await boot.exec(['systemctl', '--failed', '--no-legend', '--plain'])).stdout}`, `console (end):\n${boot.console().slice(-4000)}`].join('\n');
  try {
    const { ms, login, attempts } = await firstLogin(boot, story);
    await boot.settled();
    await agentEnded(boot);
    const manager = await journal(boot, ['-b', '_PID=1']);
    const at = (unit: string, ids: string[]) => {
      const entry = manager.find((e) => e.UNIT === unit && ids.includes(e.MESSAGE_ID ?? '') && (e.JOB_TYPE ?? 'start') === 'start');
      return entry ? Number(entry.__MONOTONIC_TIMESTAMP) : null;
    };
    const unitLog = await text(['-u', 'bootstate.service', '-o', 'cat']);
    const block = hostKeyBlock(unitLog);
    let strictLogin: RunResult | null = null;
    if (block) {
      const knownHosts = path.join(workDir, 'known_hosts');
      await writeFile(knownHosts, block.keys.map((k) => `127.0.0.1 ${k}\n`).join(''));
      strictLogin = await boot.ssh(key, USER, 'true', 60_000, ['-o', 'StrictHostKeyChecking=yes', '-o', `UserKnownHostsFile=${knownHosts}`]);
    }
    const requests = await m.requests();
    const ready = requests.slice(requestsBefore).find((r) => r.route === 'health' && r.body.includes('"Ready"'));
    return {
      arch: (await boot.exec(['uname', '-m'])).stdout.trim(),
      loginMs: ms,
      login,
      loginAttempts: attempts,
      service: await show(boot, 'bootstate.service', ['Result', 'ExecMainStatus', 'ExecMainStartTimestampMonotonic', 'ActiveEnterTimestampMonotonic', 'ExecMainExitTimestampMonotonic']),
      bootstateDone: at('bootstate.service', [UNIT_STARTED, UNIT_FAILED]),
      sshStarting: at('ssh.service', [UNIT_STARTING]),
      unitLog,
      warnings: (await journal(boot, ['-b', '-u', 'bootstate.service', '-p', 'warning'])).map((e) => e.MESSAGE ?? ''),
      hostKeyBlock: block,
      strictLogin,
      passwordLogin: await boot.ssh(key, USER, 'true', 60_000, ['-o', 'PreferredAuthentications=password,keyboard-interactive', '-o', 'NumberOfPasswordPrompts=0']),
      sshdT: (await boot.exec(['sshd', '-T', '-C', 'user=nobody,host=client,addr=127.0.0.1'])).stdout,
      shadow: (await boot.exec(['getent', 'shadow', USER])).stdout.trim(),
      passwd: (await boot.exec(['cat', '/etc/passwd'])).stdout,
      hostKeys: (await boot.exec(['sh', '-c', 'cut -d" " -f1,2 /etc/ssh/ssh_host_*_key.pub | sort'])).stdout.trim().split('\n'),
      requestsAfter: requests.length,
      readyMs: ready ? ready.receivedAt - bootEpoch : null,
      story: await story(),
    };
  } finally {
    await boot.shutdown();
  }
}

/** Seconds between two of systemd's monotonic µs timestamps, as text. */
const secs = (from: string | undefined, to: string | undefined) => ((Number(to) - Number(from)) / 1e6).toFixed(1);

describe('the arm64 package on an arm64 Debian 12, booted under systemd with qemu-user emulation', () => {
  beforeAll(async () => {
    requireTools(['systemd-nspawn', 'mmdebstrap', 'arch-test', 'qemu-aarch64-static', 'ssh', 'ssh-keygen', 'nsenter', 'unshare', 'ip']);
    hold = await holdBinfmt('arm64');
    workDir = await mkdtemp(path.join(tmpdir(), 'bootstate-arm64-boot-'));
    const started = performance.now();
    const elapsed = () => `${((performance.now() - started) / 1000).toFixed(0)} s`;
    const [root, deb] = await Promise.all([
      debianRoot([], SUITE, 'arm64').then((r) => (timings.push(`arm64 root ready after ${elapsed()}`), r)),
      buildDeb(REPO, path.join(workDir, 'dist'), ['--arch', 'arm64', '--build-binary']).then((d) => (timings.push(`arm64 .deb built after ${elapsed()}`), d)),
    ]);
    imageHostKeys = await hostKeysIn(path.join(root, 'etc/ssh'));
    const debLayer = path.join(workDir, 'deb-layer');
    await installDeb(root, deb, debLayer);
    const emulated = await emulationLayer(path.join(workDir, 'emulation-layer'));
    key = path.join(workDir, 'admin-key');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'admin@arm64-boot-test', '-f', key]);
    publicKey = (await readFile(`${key}.pub`, 'utf8')).trim();
    machine = await createMachine({
      name: `${TAG}ok`, workDir, layers: [path.join(debLayer, 'upper'), emulated, root], imdsDocument: imdsDocument(publicKey), emulated: true,
    });
    boots = (async () => [await observe(machine!), await observe(machine!)])();
    boots.catch(() => undefined);
  }, 1_800_000);

  afterAll(async () => {
    await boots?.catch(() => undefined);
    const seen = await boots?.catch(() => null);
    for (const [i, s] of (seen ?? []).entries()) {
      timings.push(`boot ${i + 1} (under qemu emulation): login ${(s.loginMs / 1000).toFixed(1)} s after nspawn started` +
        `${s.readyMs === null ? '' : `, Ready ${(s.readyMs / 1000).toFixed(1)} s`}, bootstate.service active after ` +
        `${secs(s.service.ExecMainStartTimestampMonotonic, s.service.ActiveEnterTimestampMonotonic)} s, its process ended after ` +
        `${secs(s.service.ExecMainStartTimestampMonotonic, s.service.ExecMainExitTimestampMonotonic)} s`);
    }
    process.stderr.write(`arm64 boot test:\n  ${timings.join('\n  ')}\n`);
    await machine?.destroy().catch(() => undefined);
    if (workDir) await rm(workDir, { recursive: true, force: true });
    await hold?.release();
  }, 300_000);

  it('boots an arm64 system: the kernel runs its executables through qemu-user', async () => {
    const [first] = await boots;
    expect(first!.arch).toBe('aarch64');
    expect(hold!.status).toMatch(/^flags: \S*F/m);
  });

  it('runs bootstate.service to success, active (READY=1) before ssh.service starts', async () => {
    const [first] = await boots;
    expect({ Result: first!.service.Result, ExecMainStatus: first!.service.ExecMainStatus }, first!.story).toEqual({ Result: 'success', ExecMainStatus: '0' });
    expect(first!.bootstateDone, first!.story).not.toBeNull();
    expect(first!.sshStarting, first!.story).not.toBeNull();
    expect(first!.bootstateDone!).toBeLessThan(first!.sshStarting!);
    expect(first!.unitLog).toMatch(/provisioning finished/);
    expect(first!.warnings).toEqual([]);
  });

  it('reports InProgress then Ready to the wireserver', async () => {
    const [first] = await boots;
    expect(await machine!.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(first!.readyMs).not.toBeNull();
  });

  it('lets the admin log in over SSH with the key the metadata served, on the hostname it named', async () => {
    const [first] = await boots;
    expect(first!.login.exitCode, first!.loginAttempts.join('\n')).toBe(0);
    expect(first!.login.stdout.split('\n').slice(0, 3)).toEqual([USER, 'web-01', 'aarch64']);
  });

  it("locks the admin's password, and sshd refuses passwords", async () => {
    const [first] = await boots;
    expect(first!.shadow.split(':')[1]).toMatch(/^!/);
    expect(first!.sshdT).toMatch(/^passwordauthentication no$/m);
    expect(first!.passwordLogin.exitCode).toBe(255);
    expect(first!.passwordLogin.stderr).toMatch(/Permission denied \(publickey\)/);
  });

  it('makes host keys of its own, prints them, and a login trusting only those keys gets in', async () => {
    const [first] = await boots;
    const block = first!.hostKeyBlock;
    expect(block, first!.story).not.toBeNull();
    expect(block!.keys.map((k) => k.split(' ')[0]).sort()).toEqual(['ecdsa-sha2-nistp256', 'ssh-ed25519', 'ssh-rsa']);
    expect([...block!.keys].sort()).toEqual(first!.hostKeys);
    for (const k of first!.hostKeys) expect(imageHostKeys).not.toContain(k);
    expect(first!.strictLogin!.exitCode, first!.strictLogin!.stderr).toBe(0);
  });

  it('does nothing and reports nothing on the second boot of the same disk, where the login still works', async () => {
    const [first, second] = await boots;
    expect({ Result: second!.service.Result, ExecMainStatus: second!.service.ExecMainStatus }, second!.story).toEqual({ Result: 'success', ExecMainStatus: '0' });
    expect(second!.requestsAfter).toBe(first!.requestsAfter);
    expect(second!.passwd).toBe(first!.passwd);
    expect(second!.hostKeyBlock).toBeNull();
    expect(second!.hostKeys).toEqual(first!.hostKeys);
    expect(second!.warnings).toEqual([]);
    expect(second!.login.exitCode).toBe(0);
  });
});
