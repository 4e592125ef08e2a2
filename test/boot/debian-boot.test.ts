/**
 * Real boots: Debian 12 with systemd as PID 1 under systemd-nspawn, the project's .deb installed with dpkg --root,
 * the fake fabric on Azure's addresses inside the VM's own network namespace. bootstate runs as bootstate.service,
 * ordered before ssh.service, logging to journald; a client in the namespace then logs in over SSH with the key
 * the metadata carried. Each VM boots from a copy-on-write layer over one cached root, all of them at once.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunResult } from '../../src/system/exec.js';
import { canSandbox } from '../e2e/ns.js';
import { agentEnded, createMachine, journal, type Boot, type Machine, type MachineOptions } from './machine.js';
import { createRig, imdsDocument, mediaImage, type Rig } from './scenario.js';

const TAG = `bsb${process.pid}${randomBytes(2).toString('hex')}`;
const MEDIA_PASSWORD = 'Boot-Test-Horse-7!';
// systemd's catalog ids for "Starting UNIT" and for a finished start job (JOB_RESULT says how it ended).
const UNIT_STARTING = '7d4958e842da4a758f6c1cdc7b36dcc5';
const UNIT_STARTED = '39f53479d3a045ac8e11786248231fbf';
const UNIT_FAILED = 'be02cf6855d2428ba40df7e9d022f03d';

/** What one boot of a VM showed while it ran. */
interface Seen {
  system: string;
  /** `systemctl --failed`: the units that made the system degraded. */
  failedUnits: string[];
  /** bootstate.service: Result and ExecMainStatus. */
  service: { result: string; status: string };
  /** Monotonic µs of bootstate.service's start job ending and of ssh.service starting, from PID 1's journal. */
  bootstateDone: number | null;
  sshStarting: number | null;
  /** `journalctl -b -u bootstate -p warning`: systemd's lines about the unit and the agent's own, one per entry. */
  warnings: string[];
  /** The agent's own entries among `warnings`. */
  agentWarnings: string[];
  /** `journalctl -b -u bootstate -o cat`. */
  unitLog: string;
  /** The whole journal of the boot, every field (for secrets). */
  everything: string;
  sshdT: string;
  login: RunResult | null;
  /** Every attempt of the key login, with what ssh said (the last one is `login`). */
  loginAttempts: string[];
  /** `journalctl -b -u ssh.service -o cat` after the logins: sshd's side of them. */
  sshLog: string;
  /** What the test did to the container (not to the agent) before the logins, see letUsersIn(). */
  rigRepairs: string[];
  passwordLogin: RunResult | null;
  /** The end of what the container printed on its console (for failure messages). */
  consoleTail: string;
  /** The host key block bootstate printed for the console (its stdout), if it made new keys. */
  hostKeyBlock: { fingerprints: string[]; keys: string[] } | null;
  /** A key login with StrictHostKeyChecking=yes against the keys of that block alone. */
  strictLogin: RunResult | null;
  requestsAfter: number;
  reportsAfter: string[];
  passwd: string;
}

interface Vm {
  machine: Machine;
  boots: Seen[];
}

let rig: Rig;
const machines: Machine[] = [];
let vms: {
  happy: Promise<Vm>;
  media: Promise<Vm>;
  hostileUsername: Promise<Vm>;
  readyRefused: Promise<Vm>;
  offAzure: Promise<Vm>;
  captured: Promise<Vm & { deprovision: RunResult }>;
};

async function observe(machine: Machine, boot: Boot, login: { user: string } | null, beforeShutdown?: (boot: Boot) => Promise<void>): Promise<Seen> {
  const system = await boot.settled();
  await agentEnded(boot);
  const show = await boot.exec(['systemctl', 'show', 'bootstate.service', '-p', 'Result', '-p', 'ExecMainStatus']);
  const props = Object.fromEntries(show.stdout.trim().split('\n').map((l) => l.split('=', 2) as [string, string]));
  const manager = await journal(boot, ['-b', '_PID=1']);
  const at = (unit: string, ids: string[]) => {
    const entry = manager.find((e) => e.UNIT === unit && ids.includes(e.MESSAGE_ID ?? '') && (e.JOB_TYPE ?? 'start') === 'start');
    return entry ? Number(entry.__MONOTONIC_TIMESTAMP) : null;
  };
  const text = async (args: string[]) => (await boot.exec(['journalctl', '--no-pager', '-q', '-b', ...args])).stdout;
  const warned = await journal(boot, ['-b', '-u', 'bootstate.service', '-p', 'warning']);
  const failed = await boot.exec(['systemctl', 'list-units', '--failed', '--plain', '--no-legend', '--no-pager']);
  const failedUnits = failed.stdout.split('\n').map((l) => l.trim().split(/\s+/)[0]!).filter(Boolean);
  for (const unit of failedUnits.filter((u) => u !== 'bootstate.service')) {
    const log = await boot.exec(['journalctl', '--no-pager', '-b', '-u', unit, '-o', 'cat']);
    process.stderr.write(`${machine.name}: ${unit} failed in this boot:\n${log.stdout}\n`);
  }
  const rigRepairs = login ? await letUsersIn(machine, boot, failedUnits) : [];
  const seen: Seen = {
    system,
    failedUnits,
    service: { result: props.Result ?? '', status: props.ExecMainStatus ?? '' },
    bootstateDone: at('bootstate.service', [UNIT_STARTED, UNIT_FAILED]),
    sshStarting: at('ssh.service', [UNIT_STARTING]),
    warnings: warned.map((e) => e.MESSAGE ?? ''),
    agentWarnings: warned.filter((e) => e.SYSLOG_IDENTIFIER === 'bootstate').map((e) => e.MESSAGE ?? ''),
    unitLog: await text(['-u', 'bootstate.service', '-o', 'cat']),
    everything: await text(['-o', 'export']),
    sshdT: (await boot.exec(['sshd', '-T', '-C', 'user=nobody,host=client,addr=127.0.0.1'])).stdout,
    ...(login ? await keyLogin(boot, login.user) : { login: null, loginAttempts: [] }),
    passwordLogin: login
      ? await boot.ssh(rig.key, login.user, 'true', 60_000, ['-o', 'PreferredAuthentications=password,keyboard-interactive', '-o', 'NumberOfPasswordPrompts=0'])
      : null,
    sshLog: await text(['-u', 'ssh.service', '-o', 'cat']),
    // systemd copies the unit's stdout to the console and the journal alike (StandardOutput=journal+console); under
    // nspawn's --console=pipe the console shows none of journald's copies, so the block is read off the journal.
    hostKeyBlock: hostKeyBlock(boot.console()) ?? hostKeyBlock(await text(['-u', 'bootstate.service', '-o', 'cat'])),
    consoleTail: boot.console().slice(-6000),
    strictLogin: null,
    rigRepairs,
    requestsAfter: 0,
    reportsAfter: [],
    passwd: (await boot.exec(['cat', '/etc/passwd'])).stdout,
  };
  if (login && seen.hostKeyBlock) {
    // What an owner does with the boot diagnostics: trust only the keys the console showed.
    const knownHosts = path.join(rig.workDir, `${machine.name}-known_hosts`);
    await writeFile(knownHosts, seen.hostKeyBlock.keys.map((k) => `127.0.0.1 ${k}\n`).join(''));
    seen.strictLogin = await boot.ssh(rig.key, login.user, 'true', 60_000, ['-o', 'StrictHostKeyChecking=yes', '-o', `UserKnownHostsFile=${knownHosts}`]);
  }
  await beforeShutdown?.(boot);
  await boot.shutdown();
  seen.requestsAfter = (await machine.requests()).length;
  seen.reportsAfter = await machine.reportKinds();
  return seen;
}

/**
 * Under load, systemd-user-sessions.service has been seen failing in this container with status=219/CGROUP
 * (systemd could not put its process in its cgroup), which leaves /run/nologin in place: pam_nologin then refuses
 * every user but root, and ssh exits 255 ("System is booting up…"). That unit is the container's, not
 * the agent's, and bootstate.service ran before it; so the test starts it again (at most three times) before the
 * logins, says so on stderr, and records it in the failure message.
 */
async function letUsersIn(machine: Machine, boot: Boot, failedUnits: string[]): Promise<string[]> {
  const repairs: string[] = [];
  if (!failedUnits.includes('systemd-user-sessions.service')) return repairs;
  for (let attempt = 1; attempt <= 3; attempt++) {
    const restart = await boot.exec(['systemctl', 'restart', 'systemd-user-sessions.service'], 60_000);
    const nologin = (await boot.exec(['test', '-e', '/run/nologin'])).exitCode === 0;
    repairs.push(`systemd-user-sessions.service had failed: restart ${attempt} exited ${restart.exitCode}${restart.stderr.trim() ? ` (${restart.stderr.trim()})` : ''}; /run/nologin ${nologin ? 'still there' : 'gone'}`);
    if (!nologin) break;
  }
  process.stderr.write(`${machine.name}: ${repairs.join('\n')}\n`);
  return repairs;
}

/**
 * The key login, retried while ssh fails before authentication: exit 255 with no verdict on the key (sshd closed
 * or reset the connection). That is how one login failed under the full suite's load (with LogLevel=ERROR it said
 * nothing); each attempt is kept, so a retried login still shows what happened. A refused key is final.
 */
async function keyLogin(boot: Boot, user: string): Promise<{ login: RunResult; loginAttempts: string[] }> {
  const attempts: string[] = [];
  const deadline = Date.now() + 90_000;
  for (;;) {
    const started = Date.now();
    const login = await boot.ssh(rig.key, user, 'id -un; hostname; printf "%s\\n" "$SSH_CONNECTION"', 60_000);
    attempts.push(`attempt ${attempts.length + 1}: exit ${login.exitCode ?? login.signal} after ${Date.now() - started} ms${login.endedBy === 'exit' ? '' : ` (ended by ${login.endedBy})`}\n${login.stderr.trim()}`);
    const beforeAuth = login.exitCode === 255 && !/Permission denied|Authenticated to/.test(login.stderr);
    if (!beforeAuth || attempts.length >= 3 || Date.now() > deadline) {
      if (attempts.length > 1) process.stderr.write(`${user}: the key login took ${attempts.length} attempts:\n${attempts.join('\n')}\n`);
      return { login, loginAttempts: attempts };
    }
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  }
}

/** Everything a failed login leaves to go on: each attempt's ssh output, sshd's journal and bootstate's. */
function loginStory(seen: Seen): string {
  return [
    `ssh (${seen.loginAttempts.length} attempt(s)):`, ...seen.loginAttempts,
    'ssh.service journal:', seen.sshLog.trim(),
    'bootstate.service journal:', seen.unitLog.trim(),
    `system: ${seen.system}; failed units: ${seen.failedUnits.join(', ') || 'none'}`,
    ...(seen.rigRepairs.length ? ['done to the container before the logins:', ...seen.rigRepairs] : []),
  ].join('\n');
}

/** The fingerprint and key lines between the console's BEGIN/END SSH HOST KEY markers, or null when there are none. */
function hostKeyBlock(console: string): { fingerprints: string[]; keys: string[] } | null {
  const between = (what: string) => {
    const match = new RegExp(`-----BEGIN SSH HOST KEY ${what}-----\\r?\\n([\\s\\S]*?)-----END SSH HOST KEY ${what}-----`).exec(console);
    return match ? match[1]!.split(/\r?\n/).map((l) => l.trim()).filter(Boolean) : null;
  };
  const fingerprints = between('FINGERPRINTS');
  const keys = between('KEYS');
  return fingerprints && keys ? { fingerprints, keys } : null;
}

async function vm(name: string, options: Partial<MachineOptions>, boots: number, login: { user: string } | null): Promise<Vm> {
  const machine = await createMachine({
    name: `${TAG}${name}`,
    workDir: rig.workDir,
    layers: [rig.debLayer, rig.debian],
    ...options,
  });
  machines.push(machine);
  const seen: Seen[] = [];
  for (let i = 0; i < boots; i++) seen.push(await observe(machine, await machine.boot(), login));
  return { machine, boots: seen };
}

describe.skipIf(!canSandbox)('Debian 12 booted under systemd with the .deb installed', () => {
  beforeAll(async () => {
    rig = await createRig();
    const media = mediaImage(rig.workDir, { username: 'mediauser', hostname: 'from-media', password: MEDIA_PASSWORD, key: rig.publicKey });
    vms = {
      happy: vm('ok', { imdsDocument: imdsDocument(rig.publicKey) }, 2, { user: 'azureuser' }),
      media: media.then((iso) => vm('media', { scenario: 'imds-down', media: iso }, 1, { user: 'mediauser' })),
      hostileUsername: vm('evil', { imdsDocument: imdsDocument(rig.publicKey, { adminUsername: '-oops;rm' }) }, 1, null),
      readyRefused: vm('refuse', { scenario: 'ready-rejected-once', imdsDocument: imdsDocument(rig.publicKey) }, 2, { user: 'azureuser' }),
      offAzure: vm('offaz', { chassisAssetTag: 'Default string', imdsDocument: imdsDocument(rig.publicKey) }, 1, null),
      // Provisioned, generalized with deprovision --user for capture, booted again: as a new VM would be.
      captured: (async () => {
        const machine = await createMachine({ name: `${TAG}cap`, workDir: rig.workDir, layers: [rig.debLayer, rig.debian], imdsDocument: imdsDocument(rig.publicKey) });
        machines.push(machine);
        let deprovision: RunResult | null = null;
        const first = await observe(machine, await machine.boot(), { user: 'azureuser' }, async (boot) => {
          deprovision = await boot.exec(['bootstate', 'deprovision', '--user', '--force'], 120_000);
        });
        const second = await observe(machine, await machine.boot(), { user: 'azureuser' });
        return { machine, boots: [first, second], deprovision: deprovision! };
      })(),
    };
    for (const p of Object.values(vms)) p.catch(() => undefined);
  }, 900_000);

  afterAll(async () => {
    if (vms) await Promise.allSettled(Object.values(vms));
    for (const machine of machines) await machine.destroy().catch(() => undefined);
    await rig?.cleanup();
  }, 120_000);

  describe('on a healthy fabric', () => {
    it('runs bootstate.service to success, active (READY=1) before ssh.service starts', async () => {
      const [first] = (await vms.happy).boots;
      expect(first!.service, first!.unitLog).toEqual({ result: 'success', status: '0' });
      // Only bootstate's own unit is asserted: under heavy host load systemd-tmpfiles-setup.service has been seen
      // failing in this container now and then, which says nothing about the agent (observe() prints its journal).
      expect(first!.failedUnits).not.toContain('bootstate.service');
      expect(first!.bootstateDone).not.toBeNull();
      expect(first!.sshStarting).not.toBeNull();
      expect(first!.bootstateDone!).toBeLessThan(first!.sshStarting!);
    }, 300_000);

    it("prints the VM's new host keys for the console, and a login that trusts only those keys gets in", async () => {
      const [first, second] = (await vms.happy).boots;
      const block = first!.hostKeyBlock;
      expect(block, `no host key block on the console; it ended with:\n${first!.consoleTail}\nbootstate.service journal:\n${first!.unitLog}`).not.toBeNull();
      expect(block!.keys.map((k) => k.split(' ')[0]).sort()).toEqual(['ecdsa-sha2-nistp256', 'ssh-ed25519', 'ssh-rsa']);
      expect(first!.strictLogin!.exitCode, first!.strictLogin!.stderr).toBe(0);
      // The fingerprints printed are those of the keys printed.
      for (const key of block!.keys) {
        const file = path.join(rig.workDir, 'host-key-check.pub');
        await writeFile(file, `${key}\n`);
        expect(block!.fingerprints).toContain(execFileSync('ssh-keygen', ['-l', '-f', file], { encoding: 'utf8' }).trim());
      }
      // The second boot of the same VM keeps them: nothing new is printed.
      expect(second!.hostKeyBlock).toBeNull();
    });

    it('reports InProgress then Ready to the wireserver', async () => {
      const [first] = (await vms.happy).boots;
      expect(first!.reportsAfter).toEqual(['NotReady/Provisioning', 'Ready']);
    }, 300_000);

    it('lets the admin log in over SSH with the key from the metadata, on the hostname the metadata named', async () => {
      const [first] = (await vms.happy).boots;
      expect(first!.login!.exitCode, loginStory(first!)).toBe(0);
      expect(first!.login!.stdout.split('\n').slice(0, 2)).toEqual(['azureuser', 'web-01']);
      expect(first!.login!.stdout).toMatch(/^127\.0\.0\.1 \d+ 127\.0\.0\.1 22$/m);
    }, 300_000);

    it('leaves sshd refusing passwords, as disablePasswordAuthentication asked', async () => {
      const [first] = (await vms.happy).boots;
      expect(first!.sshdT).toMatch(/^passwordauthentication no$/m);
      expect(first!.passwordLogin!.exitCode).toBe(255);
      expect(first!.passwordLogin!.stderr).toMatch(/Permission denied \(publickey\)/);
    }, 300_000);

    it('logs no warning to the journal', async () => {
      const [first] = (await vms.happy).boots;
      expect(first!.unitLog).toMatch(/provisioning finished/);
      expect(first!.warnings).toEqual([]);
    }, 300_000);

    it('does nothing and reports nothing on the second boot of the same disk, where the login still works', async () => {
      const [first, second] = (await vms.happy).boots;
      expect(second!.service).toEqual({ result: 'success', status: '0' });
      expect(second!.requestsAfter).toBe(first!.requestsAfter);
      expect(second!.passwd).toBe(first!.passwd);
      expect(second!.warnings).toEqual([]);
      expect(second!.login!.exitCode, loginStory(second!)).toBe(0);
    }, 300_000);
  });

  describe('when IMDS refuses every request and the provisioning media is the DVD drive', () => {
    it('provisions from ovf-env.xml, reports Ready, and the media user logs in with its key', async () => {
      const [boot] = (await vms.media).boots;
      expect(boot!.service, boot!.unitLog).toEqual({ result: 'success', status: '0' });
      expect(boot!.reportsAfter).toEqual(['NotReady/Provisioning', 'Ready']);
      expect(boot!.login!.exitCode, loginStory(boot!)).toBe(0);
      expect(boot!.login!.stdout.split('\n').slice(0, 2)).toEqual(['mediauser', 'from-media']);
      expect(boot!.sshdT).toMatch(/^passwordauthentication yes$/m);
    }, 300_000);

    it('explains in one warning line that IMDS failed and the media was used', async () => {
      const [boot] = (await vms.media).boots;
      expect(boot!.warnings, boot!.unitLog).toEqual(boot!.agentWarnings);
      expect(boot!.agentWarnings, boot!.unitLog).toContainEqual(expect.stringMatching(/IMDS.*403.*media|media.*IMDS.*403/i));
    }, 300_000);

    it('never puts the password in the journal', async () => {
      const [boot] = (await vms.media).boots;
      expect(boot!.everything).toMatch(/_SYSTEMD_UNIT=bootstate\.service/);
      expect(boot!.everything).not.toContain(MEDIA_PASSWORD);
    }, 300_000);
  });

  describe('captured: deprovision --user, then booted again', () => {
    it('generalizes the VM, and its next boot provisions it as a new VM: new host keys, the user again, Ready again', async () => {
      const { boots: [first, second], deprovision, machine } = await vms.captured;
      expect(deprovision.exitCode, `${deprovision.stdout}\n${deprovision.stderr}`).toBe(0);
      expect(first!.login!.exitCode).toBe(0);
      expect(second!.service, second!.unitLog).toEqual({ result: 'success', status: '0' });
      expect(await machine.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready', 'NotReady/Provisioning', 'Ready']);
      expect(second!.hostKeyBlock).not.toBeNull();
      for (const key of second!.hostKeyBlock!.keys) expect(first!.hostKeyBlock!.keys).not.toContain(key);
      expect(second!.login!.exitCode, loginStory(second!)).toBe(0);
      expect(second!.strictLogin!.exitCode, second!.strictLogin!.stderr).toBe(0);
    }, 900_000);
  });

  describe('off Azure (the chassis asset tag is not Azure\'s, no media)', () => {
    it('ends bootstate.service at once with one line saying why, sends nothing, and sshd starts without waiting', async () => {
      const [boot] = (await vms.offAzure).boots;
      expect(boot!.service, boot!.unitLog).toEqual({ result: 'success', status: '0' });
      expect(boot!.requestsAfter).toBe(0);
      expect(boot!.agentWarnings.filter((w: string) => w.includes('not an Azure VM'))).toHaveLength(1);
      expect(boot!.passwd).not.toMatch(/^azureuser:/m);
      expect(boot!.hostKeyBlock).toBeNull();
      // ssh.service started once the unit was done, and the unit never waited for IMDS (no request reached it).
      expect(boot!.sshStarting).not.toBeNull();
      expect(boot!.sshStarting!).toBeGreaterThanOrEqual(boot!.bootstateDone!);
    });
  });

  describe('when the admin user name is an option-injection attempt', () => {
    it('fails bootstate.service, creates no user and reports ProvisioningFailed', async () => {
      const [boot] = (await vms.hostileUsername).boots;
      expect(boot!.service.result).toBe('exit-code');
      expect(boot!.service.status).not.toBe('0');
      expect(boot!.system).toBe('degraded');
      expect(boot!.failedUnits).toContain('bootstate.service');
      expect(boot!.passwd).not.toContain('oops');
      expect(boot!.reportsAfter).toEqual(['NotReady/Provisioning', 'NotReady/ProvisioningFailed']);
      expect(boot!.bootstateDone!).toBeLessThan(boot!.sshStarting!);
    }, 300_000);

    it('explains the refusal in one warning line naming the user name and what is wrong with it', async () => {
      const [boot] = (await vms.hostileUsername).boots;
      expect(boot!.warnings).toContainEqual(expect.stringMatching(/^bootstate\.service: Failed with result 'exit-code'/));
      expect(boot!.agentWarnings, boot!.unitLog).toContainEqual(expect.stringMatching(/-oops;rm.*hyphen/));
    }, 300_000);
  });

  describe('when the wireserver refuses the Ready report', () => {
    it('fails bootstate.service after provisioning, explaining the refusal in one warning line', async () => {
      const [first] = (await vms.readyRefused).boots;
      expect(first!.service.result).toBe('exit-code');
      expect(first!.reportsAfter).toEqual(['NotReady/Provisioning', 'Ready']);
      expect(first!.passwd).toMatch(/^azureuser:/m);
      expect(first!.warnings).toContainEqual(expect.stringMatching(/^bootstate\.service: Failed with result 'exit-code'/));
      expect(first!.agentWarnings, first!.unitLog).toContainEqual(expect.stringMatching(/Ready.*403|403.*Ready/));
    }, 300_000);

    it('reports Ready alone on the next boot, with nothing in the journal above info', async () => {
      const [first, second] = (await vms.readyRefused).boots;
      expect(second!.service).toEqual({ result: 'success', status: '0' });
      const later = (await (await vms.readyRefused).machine.requests()).slice(first!.requestsAfter);
      expect(later.map((r) => [r.route, r.body])).toEqual([['health', '{"state":"Ready"}']]);
      expect(second!.warnings).toEqual([]);
      expect(second!.login!.exitCode, loginStory(second!)).toBe(0);
    }, 300_000);
  });
});
