/**
 * `bootstate deprovision --root DIR` on a prepared build VM tree: every path it promises is gone, the files it
 * rewrites keep their mode and owner, and nothing else in the tree changed; it asks first and changes nothing
 * without an answer; `doctor` warns about the image before and not after.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { rootHasPassword } from '../../src/deprovision/plan.js';
import { type DeprovisionIo, runDeprovision } from '../../src/commands/deprovision.js';
import { runDoctor } from '../../src/commands/doctor.js';
import { findAdminUsers, sudoersRuleUser } from '../../src/os/user/admin-users.js';
import { sudoersFileName, sudoersRule } from '../../src/os/user/sudoers.js';
import { KvpStore } from '../../src/kvp/store.js';
import { CHANGED, diff, PLACED, prepareImage, REMOVED, REMOVED_WITH_USER, REMOVED_WITH_WAAGENT_STATE, snapshot, under, USERDEL_FILES, WAAGENTS } from './image.js';

let root: string;
let outside: string;

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), 'bootstate-deprovision-'));
  outside = mkdtempSync(path.join(tmpdir(), 'bootstate-host-'));
  prepareImage(root, outside);
});
afterEach(() => {
  rmSync(root, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

function io(options: { terminal?: boolean; answer?: string } = {}): DeprovisionIo & { out: string; err: string; asked: string[] } {
  const sink = {
    out: '',
    err: '',
    asked: [] as string[],
    stdout: (s: string) => void (sink.out += s),
    stderr: (s: string) => void (sink.err += s),
    isTerminal: options.terminal ?? false,
    ask: async (q: string) => {
      sink.asked.push(q);
      return options.answer ?? '';
    },
  };
  return sink;
}

async function doctorIds(): Promise<string[]> {
  let out = '';
  await runDoctor({ root }, { stdout: (s) => (out += s), stderr: (s) => (out += s) });
  return [...out.matchAll(/\[([a-z-]+)\]:/g)].map((m) => m[1]!);
}

const inRoot = (p: string) => path.join(root, p);

describe('bootstate deprovision --root', () => {
  it('with --force removes every promised path, rewrites machine-id, shadow and the KVP pools, and changes nothing else', async () => {
    const before = snapshot(root);
    const shadowBefore = readFileSync(inRoot('/etc/shadow'), 'utf8');
    const sink = io();
    expect(await runDeprovision({ root, force: true }, sink)).toBe(0);
    const after = snapshot(root);
    const changes = diff(before, after);
    expect(changes.removed).toEqual(under(REMOVED, before));
    expect(changes.added).toEqual([]);
    expect(changes.changed).toEqual([...CHANGED].sort());
    for (const p of REMOVED) expect(sink.out).toContain(`removed ${inRoot(p)}\n`);

    expect(readFileSync(inRoot('/etc/machine-id'), 'utf8')).toBe('uninitialized\n');
    expect(statSync(inRoot('/etc/machine-id')).mode & 0o7777).toBe(0o444);
    const shadow = readFileSync(inRoot('/etc/shadow'), 'utf8');
    expect(shadow.split('\n')[0]).toBe('root:*:19000:0:99999:7:::');
    expect(shadow.split('\n').slice(1)).toEqual(shadowBefore.split('\n').slice(1));
    for (const p of ['/etc/machine-id', '/etc/shadow']) {
      const [was, now] = [before.get(p)!, after.get(p)!];
      expect([now.mode, now.owner], p).toEqual(p === '/etc/machine-id' ? ['444', was.owner] : [was.mode, was.owner]);
    }
    for (const pool of ['.kvp_pool_1', '.kvp_pool_3']) {
      expect(statSync(inRoot(`/var/lib/hyperv/${pool}`)).size).toBe(0);
      expect(sink.out).toContain(`emptied ${inRoot(`/var/lib/hyperv/${pool}`)} (1 KVP record)`);
    }
    // The account bootstate made stays without --user.
    expect(existsSync(inRoot('/home/alice/.ssh/authorized_keys'))).toBe(true);
    expect(existsSync(inRoot('/etc/sudoers.d/90-bootstate-alice'))).toBe(true);
  });

  it('lists what it will do first, in the order it then does it', async () => {
    const sink = io();
    await runDeprovision({ root, force: true }, sink);
    const out = sink.out.replace(/^note: .*\n/gm, '');
    const cut = out.search(/\n(?=removed |wrote )/);
    const [listing, done] = [out.slice(0, cut), out.slice(cut)];
    expect(listing).toMatch(/^bootstate deprovision will change the image at .*:\n {2}remove .*ssh_host_ecdsa_key \(ssh host key\)/);
    expect(listing).toContain(`  write "uninitialized" to ${inRoot('/etc/machine-id')}`);
    expect(listing).toContain(`  lock root's password: replace its hash by "*" in ${inRoot('/etc/shadow')}`);
    expect(done).toContain(`locked root's password in ${inRoot('/etc/shadow')}`);
    expect(sink.out.trimEnd().split('\n').at(-1)).toBe(`bootstate deprovision: the image at ${root} is ready for capture`);
  });

  it('without a terminal and without --force exits 2, says why, and changes nothing', async () => {
    const before = snapshot(root);
    const sink = io({ terminal: false });
    expect(await runDeprovision({ root, user: true }, sink)).toBe(2);
    expect(sink.err).toContain('stdin is not a terminal');
    expect(sink.err).toContain('--force');
    expect(sink.asked).toEqual([]);
    expect(sink.out).toContain(`remove ${inRoot('/etc/ssh/ssh_host_rsa_key')}`);
    expect(diff(before, snapshot(root))).toEqual({ removed: [], added: [], changed: [] });
  });

  it('on a terminal asks y/N: anything but y changes nothing (exit 1); y deprovisions', async () => {
    const before = snapshot(root);
    for (const answer of ['', 'n', 'no', 'yess']) {
      const sink = io({ terminal: true, answer });
      expect(await runDeprovision({ root }, sink), answer).toBe(1);
      expect(sink.asked[0]).toMatch(/\[y\/N\] $/);
      expect(sink.out).toContain('not confirmed; nothing was changed');
    }
    expect(diff(before, snapshot(root))).toEqual({ removed: [], added: [], changed: [] });
    expect(await runDeprovision({ root }, io({ terminal: true, answer: 'y' }))).toBe(0);
    expect(diff(before, snapshot(root)).removed).toEqual(under(REMOVED, before));
  });

  it('a second run has nothing to do and asks nothing', async () => {
    await runDeprovision({ root, force: true }, io());
    const sink = io({ terminal: true });
    expect(await runDeprovision({ root }, sink)).toBe(0);
    expect(sink.asked).toEqual([]);
    expect(sink.out.replace(/^note: .*WALinuxAgent's.*\n/m, '')).toBe(`bootstate deprovision: nothing to do on the image at ${root}\n`);
  });

  it('follows links inside the root as chroot would: a link to a host path never reaches the host', async () => {
    await runDeprovision({ root, force: true }, io());
    expect(readFileSync(path.join(outside, 'eth0.lease'), 'utf8')).toBe('host lease\n');
    // A history linked to /dev/null on purpose is the image's choice, left as it is.
    expect(snapshot(root).get('/root/.zsh_history')).toMatchObject({ type: 'link', content: '/dev/null' });
  });

  it('reads the paths from the image\'s own configuration', async () => {
    const { mkdirSync, writeFileSync } = await import('node:fs');
    mkdirSync(inRoot('/etc/bootstate'), { recursive: true });
    writeFileSync(inRoot('/etc/bootstate/bootstate.toml'), '[azure_init_data_dir]\npath = "/srv/state"\n[host_keys]\ndir = "/srv/keys"\n');
    mkdirSync(inRoot('/srv/state'), { recursive: true });
    mkdirSync(inRoot('/srv/keys'), { recursive: true });
    writeFileSync(inRoot('/srv/state/abc.provisioned'), '');
    writeFileSync(inRoot('/srv/keys/ssh_host_ed25519_key'), 'k');
    await runDeprovision({ root, force: true }, io());
    expect(existsSync(inRoot('/srv/state/abc.provisioned'))).toBe(false);
    expect(existsSync(inRoot('/srv/keys/ssh_host_ed25519_key'))).toBe(false);
    // /etc/ssh is no longer the key directory: its keys are not host keys by this configuration.
    expect(existsSync(inRoot('/etc/ssh/ssh_host_rsa_key'))).toBe(true);
  });

  it('removes the certificates and keys its record names, and names WALinuxAgent\'s, which it leaves', async () => {
    const sink = io();
    expect(await runDeprovision({ root, force: true }, sink)).toBe(0);
    for (const name of [`${PLACED}.crt`, `${PLACED}.prv`]) expect(existsSync(inRoot(`/var/lib/waagent/${name}`)), name).toBe(false);
    for (const name of [`${WAAGENTS}.crt`, `${WAAGENTS}.prv`, 'GoalState.1.xml']) expect(existsSync(inRoot(`/var/lib/waagent/${name}`)), name).toBe(true);
    expect(sink.out).toContain(`  remove ${inRoot(`/var/lib/waagent/${PLACED}.prv`)} (private key of a goal state certificate bootstate placed)`);
    expect(sink.out).toContain(`note: 2 certificate or key file(s) in /var/lib/waagent left: bootstate's record does not name them, so they are WALinuxAgent's (${WAAGENTS}.crt, ${WAAGENTS}.prv)`);
    // The record goes after the files it proves bootstate's.
    expect(sink.out.indexOf('removed ' + inRoot('/var/lib/bootstate/waagent-certificates'))).toBeGreaterThan(sink.out.indexOf('removed ' + inRoot(`/var/lib/waagent/${PLACED}.prv`)));
    expect(readFileSync(inRoot('/var/log/waagent.log'), 'utf8')).toBe('hostname build-vm\n');
  });

  it('with --waagent-state empties WALinuxAgent\'s directories and removes its logs, as waagent -deprovision does', async () => {
    const before = snapshot(root);
    const sink = io();
    expect(await runDeprovision({ root, force: true, waagentState: true }, sink), sink.err).toBe(0);
    const changes = diff(before, snapshot(root));
    expect(changes.removed).toEqual(under([...REMOVED, ...REMOVED_WITH_WAAGENT_STATE], before));
    expect(changes.added).toEqual([]);
    for (const dir of ['/var/lib/waagent', '/var/log/azure']) expect(statSync(inRoot(dir)).isDirectory(), dir).toBe(true);
    expect(sink.out).not.toContain('note: ');
  });

  it('with --waagent-state names a state directory waagent.conf moves elsewhere, and leaves it', async () => {
    const { mkdirSync, writeFileSync } = await import('node:fs');
    writeFileSync(inRoot('/etc/waagent.conf'), 'Lib.Dir=/srv/waagent\n# Extension.LogDir=/srv/logs\n');
    mkdirSync(inRoot('/srv/waagent'), { recursive: true });
    writeFileSync(inRoot('/srv/waagent/GoalState.2.xml'), '<GoalState/>\n');
    const sink = io();
    expect(await runDeprovision({ root, force: true, waagentState: true }, sink)).toBe(0);
    expect(sink.out).toContain('note: /etc/waagent.conf sets Lib.Dir=/srv/waagent: only /var/lib/waagent was looked at; a configured directory is not emptied by deprovision');
    expect(sink.out).not.toContain('Extension.LogDir');
    expect(existsSync(inRoot('/srv/waagent/GoalState.2.xml'))).toBe(true);
  });

  it('without a record removes the files by the names bootstate gives them only when WALinuxAgent is not installed', async () => {
    const { rmSync: rm } = await import('node:fs');
    rm(inRoot('/var/lib/bootstate/waagent-certificates'));
    const names = [`${PLACED}.crt`, `${PLACED}.prv`, `${WAAGENTS}.crt`, `${WAAGENTS}.prv`];
    const installed = io();
    expect(await runDeprovision({ root, force: true }, installed)).toBe(0);
    for (const name of names) expect(existsSync(inRoot(`/var/lib/waagent/${name}`)), name).toBe(true);
    expect(installed.out).toContain('left: bootstate kept no record and WALinuxAgent is installed');
    rm(inRoot('/usr/sbin/waagent'));
    const alone = io();
    expect(await runDeprovision({ root, force: true }, alone)).toBe(0);
    for (const name of names) expect(existsSync(inRoot(`/var/lib/waagent/${name}`)), name).toBe(false);
    expect(alone.out).toContain('(private key of a goal state certificate bootstate placed (by its name: no record, WALinuxAgent not installed))');
    expect(existsSync(inRoot('/var/lib/waagent/GoalState.1.xml'))).toBe(true);
  });

  it('never follows a symlink at /var/lib/waagent or /etc/hostname: it names them, does the rest, and exits 1', async () => {
    const { mkdirSync, renameSync, symlinkSync, writeFileSync } = await import('node:fs');
    mkdirSync(inRoot('/srv'));
    renameSync(inRoot('/var/lib/waagent'), inRoot('/srv/waagent'));
    symlinkSync('/srv/waagent', inRoot('/var/lib/waagent'));
    writeFileSync(inRoot('/etc/hostname.real'), 'build\n');
    rmSync(inRoot('/etc/hostname'));
    symlinkSync('hostname.real', inRoot('/etc/hostname'));
    for (const waagentState of [false, true]) {
      const sink = io();
      expect(await runDeprovision({ root, force: true, waagentState }, sink)).toBe(1);
      expect(sink.err).toContain(`refused: /var/lib/waagent is a symlink: ${waagentState ? 'its contents were not removed' : 'the certificates bootstate placed there were not removed'} (it is never followed)`);
      expect(sink.err).toContain('refused: /etc/hostname is a symlink: the build VM\'s name was not reset');
      expect(sink.err).toMatch(/2 thing\(s\) refused \(above\); the image is not ready for capture/);
      expect(existsSync(inRoot(`/srv/waagent/${PLACED}.prv`))).toBe(true);
      expect(readFileSync(inRoot('/etc/hostname.real'), 'utf8')).toBe('build\n');
    }
    expect(existsSync(inRoot('/etc/ssh/ssh_host_rsa_key'))).toBe(false);
  });

  it('refuses a root that is not a directory (usage error)', async () => {
    await expect(runDeprovision({ root: path.join(root, 'nope'), force: true }, io())).rejects.toThrow(/no such directory/);
  });
});

const runsAsRoot = process.platform === 'linux' && process.getuid?.() === 0;

describe('bootstate deprovision --user --root', () => {
  // userdel -R chroots into the image, which needs root; CI runs as root, so there this must run, never skip.
  it.skipIf(!runsAsRoot)('deletes the account bootstate created (userdel -R), its home and its sudoers drop-in, and leaves bob alone', async () => {
    expect(existsSync('/usr/sbin/userdel') || existsSync('/sbin/userdel'), 'userdel (package passwd) must be installed: this test runs as root and cannot be skipped').toBe(true);
    const before = snapshot(root);
    const sink = io();
    expect(await runDeprovision({ root, user: true, force: true }, sink), sink.err).toBe(0);
    const after = snapshot(root);
    const changes = diff(before, after);
    expect(changes.removed).toEqual(under([...REMOVED, ...REMOVED_WITH_USER], before));
    expect(changes.changed.filter((p) => !USERDEL_FILES.includes(p))).toEqual(CHANGED.filter((p) => p !== '/etc/shadow').sort());
    expect(changes.added.filter((p) => !USERDEL_FILES.includes(p))).toEqual([]);
    expect(sink.out).toContain(`deleted user alice (userdel -R ${root} -r alice)`);
    expect(sink.out).toContain(`removed ${inRoot('/home/alice')}\n`);
    expect(sink.out).toContain(`removed ${inRoot('/etc/sudoers.d/90-bootstate-alice')}\n`);
    const passwd = readFileSync(inRoot('/etc/passwd'), 'utf8');
    expect(passwd).not.toMatch(/^alice:/m);
    expect(passwd).toMatch(/^bob:x:1001:1001:Bob:\/home\/bob:\/bin\/bash$/m);
    // userdel's backup of the shadow file must not keep root's hash either.
    for (const file of ['/etc/shadow', '/etc/shadow-']) {
      if (existsSync(inRoot(file))) expect(rootHasPassword(readFileSync(inRoot(file), 'utf8')), file).toBe(false);
    }
    // Nor may the backups userdel writes keep the account it deleted, or its membership of sudo.
    for (const file of ['/etc/passwd', '/etc/shadow', '/etc/group', '/etc/gshadow']) {
      const backup = readFileSync(inRoot(`${file}-`), 'utf8');
      expect(backup, `${file}-`).toBe(readFileSync(inRoot(file), 'utf8'));
      // The group alice stays in /etc/group: this image's userdel (no login.defs, no USERGROUPS_ENAB) keeps it.
      expect(backup, `${file}-`).not.toMatch(/group|gshadow/.test(file) ? /^sudo:.*alice/m : /^alice:/m);
    }
    expect(sink.out).toContain(`rewrote ${inRoot('/etc/passwd-')} as a copy of ${inRoot('/etc/passwd')}`);
    expect(await findAdminUsers(root, '/etc/sudoers.d')).toEqual([]);
  });

  it.skipIf(!runsAsRoot)('fails (exit 1) naming the home when userdel leaves it behind (a home the user does not own), and keeps the certificates\' record', async () => {
    const { chownSync } = await import('node:fs');
    chownSync(inRoot('/home/alice'), 0, 0);
    const sink = io();
    expect(await runDeprovision({ root, user: true, force: true }, sink)).toBe(1);
    expect(sink.err).toContain(`deleted the account but left ${inRoot('/home/alice')}`);
    expect(sink.err).toMatch(/1 of \d+ changes failed; the image is not ready for capture/);
    // Everything else was still done.
    expect(existsSync(inRoot('/etc/ssh/ssh_host_rsa_key'))).toBe(false);
    // But the record that proves the certificates bootstate's stays for the next run.
    expect(existsSync(inRoot(`/var/lib/waagent/${PLACED}.prv`))).toBe(false);
    expect(existsSync(inRoot('/var/lib/bootstate/waagent-certificates'))).toBe(true);
    expect(sink.err).toContain(`kept ${inRoot('/var/lib/bootstate/waagent-certificates')} (record of the certificates bootstate placed): a change above failed, and a second run needs it`);
  });

  it('names an account it did not create and keeps it; only its drop-in goes', async () => {
    const { writeFileSync } = await import('node:fs');
    writeFileSync(inRoot('/etc/sudoers.d/90-bootstate-bob'), `# Written by bootstate\n${sudoersRule('bob', 'password')}`);
    writeFileSync(inRoot('/etc/passwd'), readFileSync(inRoot('/etc/passwd'), 'utf8').replace(/^alice:.*\n/m, ''));
    const sink = io();
    expect(await runDeprovision({ root, user: true, force: true }, sink)).toBe(0);
    expect(sink.out).toMatch(/note: bob: has a bootstate sudoers drop-in but was not created by bootstate/);
    expect(readFileSync(inRoot('/etc/passwd'), 'utf8')).toMatch(/^bob:/m);
    expect(existsSync(inRoot('/home/bob/.bashrc'))).toBe(true);
    expect(existsSync(inRoot('/etc/sudoers.d/90-bootstate-bob'))).toBe(false);
  });
});

describe('doctor on an image made for capture', () => {
  it('warns about host keys, the machine id and the admin account before deprovision, and finds nothing after', async () => {
    expect(await doctorIds()).toEqual(['ssh-host-keys', 'machine-id', 'leftover-admin-user']);
    if (!runsAsRoot) return;
    expect(await runDeprovision({ root, user: true, force: true }, io())).toBe(0);
    expect(await doctorIds()).toEqual([]);
  });

  it('without --user only the admin account is left to warn about', async () => {
    await runDeprovision({ root, force: true }, io());
    expect(await doctorIds()).toEqual(['leftover-admin-user']);
  });

  it('an empty or "uninitialized" machine id is fine', async () => {
    const { chmodSync, writeFileSync } = await import('node:fs');
    chmodSync(inRoot('/etc/machine-id'), 0o644);
    for (const id of ['', 'uninitialized\n', 'uninitialized']) {
      writeFileSync(inRoot('/etc/machine-id'), id);
      expect(await doctorIds()).not.toContain('machine-id');
    }
  });
});

describe('the records deprovision finds the admin by', () => {
  it('reads back the user of every drop-in sudoers.ts writes, quoted names included', () => {
    for (const name of ['azureuser', 'john.doe', 'a"b', 'back\\slash']) {
      for (const rule of ['nopasswd', 'password'] as const) expect(sudoersRuleUser(`# Written by bootstate\n${sudoersRule(name, rule)}`), rule).toBe(name);
      expect(sudoersFileName(name).startsWith('90-bootstate-')).toBe(true);
    }
  });

  it('a root password field without a hash needs no lock; one with a hash, or empty, does', () => {
    for (const field of ['*', '!', '!!', '!*', '*LOCK*']) expect(rootHasPassword(`root:${field}:1::::::\n`), field).toBe(false);
    for (const field of ['$6$s$h', '!$6$s$h', '', 'abcdefghijklm']) expect(rootHasPassword(`root:${field}:1::::::\n`), field).toBe(true);
  });

  it('the KVP pools are emptied in place, readable by the store', async () => {
    await runDeprovision({ root, force: true }, io());
    expect(new KvpStore({ path: inRoot('/var/lib/hyperv/.kvp_pool_1') }).info()).toMatchObject({ exists: true, size: 0, records: 0 });
  });
});

