/**
 * A real first boot: `node dist/bootstate.mjs` with the default configuration, inside a network namespace where
 * the fake fabric owns 169.254.169.254 and 168.63.129.16, and a mount + UTS sandbox that is the VM's disk.
 * VMs boot concurrently, three at a time; the one with provisioning media sees its loop device, and no other VM
 * does (each sandbox's /sys/class/block lists only its own devices).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, readlink, stat, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeReport } from '../../src/azure/report.js';
import type { RecordedRequest } from '../../src/fabric/behaviours.js';
import { decodeRecords } from '../../src/kvp/codec.js';
import { attachLoop, cryptMatches, vmFile, withVm as withVmIn, loopDevices, mountPoints, netnsNames, type BootResult, type Vm, type VmOptions, lastFailure } from './boot.js';
import { assertNamespaces, canSandbox, runInSandbox } from './ns.js';
import { ovfDocument } from '../../src/fabric/ovf-document.js';
import { CACHE as BOOT_CACHE } from '../boot/debian-root.js';

const PREFIX = `bs-e2e-${process.pid}`;
const IMDS_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIN/Rb85Ri4GtZokp7+G4Wiooo9ItAifFWeNtrUbNH45R azureuser@laptop';
const GEN2_UUID = 'D0DF4C54-4ECB-4A4B-9954-5BDF3ED5C3B8';
const MEDIA_PASSWORD = 'Correct-Horse-7-Battery!';
/** Without loop devices the media path is covered on image files only (test/azure/iso9660.test.ts, media.test.ts). */
const LOOP = existsSync('/dev/loop-control');

// ---- what every scenario leaves behind for its tests ----------------------------------------------------------

interface Happy { vm: Vm; boot: BootResult; sshdT: string }
interface PasswordAuth { vm: Vm; boot: BootResult; sshdT: string }
interface SameDisk {
  vm: Vm;
  first: BootResult;
  second: BootResult;
  clone: BootResult;
  image: Record<string, string>;
  afterFirst: Awaited<ReturnType<typeof diskState>>;
  afterSecond: Awaited<ReturnType<typeof diskState>>;
  afterClone: Record<string, string>;
}
interface Failing { vm: Vm; boot: BootResult; passwdBefore: string }
interface Symlinked { vm: Vm; boot: BootResult; outside: string }
interface ReadyRejected {
  vm: Vm;
  first: BootResult;
  second: BootResult;
  requestsAfterFirst: number;
  passwdAfterFirst: string;
  markersAfterFirst: string[];
}
interface Media { vm: Vm; boot: BootResult; device: string; key: string }

const vms: Vm[] = [];
const loops: Array<() => Promise<void>> = [];
let host: HostSnapshot;
let scenarios: {
  happy: Promise<Happy>;
  passwordAuth: Promise<PasswordAuth>;
  sameDisk: Promise<SameDisk>;
  hostileUsername: Promise<Failing>;
  hostileHostname: Promise<Failing>;
  symlinked: Promise<Symlinked>;
  readyRejected: Promise<ReadyRejected>;
  badConfig: Promise<Failing>;
  media: Promise<Media>;
};

// ---- helpers -------------------------------------------------------------------------------------------------

/** At most `n` VMs boot at once (2 cores: useradd, sshd and node all want CPU). */
function limiter(n: number) {
  let active = 0;
  const waiting: Array<() => void> = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    while (active >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    active += 1;
    try {
      return await task();
    } finally {
      active -= 1;
      waiting.shift()?.();
    }
  };
}

const withVm = <T>(name: string, options: VmOptions, use: (vm: Vm) => Promise<T>) => withVmIn(vms, `${PREFIX}-${name}`, options, use);
const file = vmFile;
const mode = async (vm: Vm, p: string) => (await stat(vm.sandbox.hostPath(p))).mode & 0o7777;

async function passwdEntry(vm: Vm, user: string): Promise<{ uid: number; gid: number; home: string; shell: string } | null> {
  const line = (await file(vm, '/etc/passwd')).split('\n').find((l) => l.startsWith(`${user}:`));
  if (!line) return null;
  const [, , uid, gid, , home, shell] = line.split(':');
  return { uid: Number(uid), gid: Number(gid), home: home!, shell: shell! };
}

async function shadowField(vm: Vm, user: string): Promise<string | undefined> {
  return (await file(vm, '/etc/shadow')).split('\n').find((l) => l.startsWith(`${user}:`))?.split(':')[1];
}

/** The mode useradd gives a new home: HOME_MODE from login.defs, else 0777 minus UMASK. */
async function useraddHomeMode(vm: Vm): Promise<number> {
  const defs = await file(vm, '/etc/login.defs');
  const setting = (key: string) => new RegExp(`^\\s*${key}\\s+([0-7]+)\\s*$`, 'm').exec(defs)?.[1];
  const homeMode = setting('HOME_MODE');
  return homeMode ? Number.parseInt(homeMode, 8) : 0o777 & ~Number.parseInt(setting('UMASK') ?? '022', 8);
}

/** Every PROVISIONING_REPORT written to the sandbox's KVP pool 1, decoded. */
async function kvpReports(vm: Vm): Promise<Array<Map<string, string>>> {
  const pool = await readFile(vm.sandbox.hostPath('/var/lib/hyperv/.kvp_pool_1'));
  return decodeRecords(pool, { lossy: true })
    .filter((r) => r.key === 'PROVISIONING_REPORT')
    .map((r) => new Map(decodeReport(r.value)));
}


const markers = async (vm: Vm) => (await readdir(vm.sandbox.hostPath('/var/lib/bootstate')).catch(() => [])).filter((n) => /\.(provisioned|report-pending)$/.test(n)).sort();

const sshdEffective = async (vm: Vm) => (await runInSandbox(vm.sandbox, ['sshd', '-T', '-f', '/etc/ssh/sshd_config'])).stdout;
const effective = (dump: string, key: string) => new RegExp(`^${key} (\\S+)$`, 'm').exec(dump)?.[1];

async function diskState(vm: Vm) {
  return {
    requests: (await vm.requests()).length,
    passwd: await file(vm, '/etc/passwd'),
    shadow: await file(vm, '/etc/shadow'),
    keys: await file(vm, '/home/azureuser/.ssh/authorized_keys').catch(() => ''),
    hostKeys: await hostKeys(vm),
  };
}

/** The VM's SSH host keys: file name → public key line (and the private key's mode). */
async function hostKeys(vm: Vm): Promise<Record<string, string>> {
  const dir = vm.sandbox.hostPath('/etc/ssh');
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir)).filter((n) => /^ssh_host_.*_key$/.test(n)).sort()) {
    const mode = ((await stat(path.join(dir, name))).mode & 0o777).toString(8);
    out[name] = `${mode} ${(await readFile(path.join(dir, `${name}.pub`), 'utf8')).trim()}`;
  }
  return out;
}

/** Text of every file under the given sandbox directories (recursively). */
async function filesUnder(vm: Vm, dirs: string[]): Promise<Array<[string, Buffer]>> {
  const out: Array<[string, Buffer]> = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) await walk(full);
      else if (entry.isFile()) out.push([full, await readFile(full)]);
    }
  };
  for (const dir of dirs) await walk(vm.sandbox.hostPath(dir));
  return out;
}

/** The media's ovf-env.xml: the fake fabric's document builder, with password logins on. */
function ovfEnv(options: { username: string; hostname: string; password: string; key: string }): string {
  const { key, ...rest } = options;
  return ovfDocument({ ...rest, keys: [key], disableSshPasswordAuthentication: false });
}

// ---- the host must not change ---------------------------------------------------------------------------------

interface HostSnapshot {
  passwd: string;
  shadow: string;
  group: string;
  hostnameFile: string;
  hostname: string;
  /** Mount points that belong to this suite: under a sandbox root or named with its prefix (`ip netns add` mounts). */
  ourMounts: string[];
  /** The host's own mount points: neither ours nor the transient ones other suites make while this one runs. */
  hostMounts: string[];
  ourNetns: string[];
  ourLoops: string[];
}

/**
 * Where suites running beside this one mount: named network namespaces (the first `ip netns add` on a machine also
 * makes /run/netns itself a mount point, for good), and roots and images in temp dirs and the boot tests' cache.
 */
const TRANSIENT = ['/run/netns', tmpdir(), BOOT_CACHE];
const transient = (m: string) => TRANSIENT.some((t) => m === t || m.startsWith(`${t}/`));

async function mounts(roots: string[]): Promise<Pick<HostSnapshot, 'ourMounts' | 'hostMounts'>> {
  const all = await mountPoints();
  const ours = (m: string) => m.includes(PREFIX) || roots.some((root) => m === root || m.startsWith(`${root}/`));
  return { ourMounts: all.filter(ours), hostMounts: all.filter((m) => !ours(m) && !transient(m)) };
}

async function snapshotHost(): Promise<HostSnapshot> {
  const roots = vms.map((vm) => vm.sandbox.root);
  return {
    passwd: await readFile('/etc/passwd', 'utf8'),
    shadow: await readFile('/etc/shadow', 'utf8'),
    group: await readFile('/etc/group', 'utf8'),
    hostnameFile: await readFile('/etc/hostname', 'utf8').catch(() => '<none>'),
    hostname: hostname(),
    ...(await mounts(roots)),
    // Other suites may run at the same time with namespaces and loop devices of their own: only ours count.
    ourNetns: (await netnsNames()).filter((n) => n.startsWith(PREFIX)),
    ourLoops: (await loopDevices()).filter((l) => roots.some((root) => l.includes(root)) || l.includes(PREFIX)),
  };
}

// ---- the suite -----------------------------------------------------------------------------------------------

describe.skipIf(!canSandbox)('a first boot in namespaces, with the default configuration', { timeout: 180_000 }, () => {
  beforeAll(async () => {
    assertNamespaces();
    host = await snapshotHost();
    const slot = limiter(3);

    const happy = slot(() =>
      withVm('happy', { productUuid: GEN2_UUID, generation: 2 }, async (vm) => {
        // An image's own drop-in that sorts later and says the opposite: ours must still be the effective one.
        await writeFile(vm.sandbox.hostPath('/etc/ssh/sshd_config.d/50-cloud-init.conf'), 'PasswordAuthentication yes\n');
        const boot = await vm.boot();
        return { vm, boot, sshdT: await sshdEffective(vm) };
      }),
    );
    const passwordAuth = slot(() =>
      withVm('pwauth', { productUuid: '550e8400-e29b-41d4-a716-446655440000', generation: 1, scenario: 'password-auth' }, async (vm) => {
        await writeFile(vm.sandbox.hostPath('/etc/ssh/sshd_config.d/50-image.conf'), 'PasswordAuthentication no\n');
        const boot = await vm.boot();
        return { vm, boot, sshdT: await sshdEffective(vm) };
      }),
    );
    const sameDisk = slot(() =>
      withVm('disk', { productUuid: '11111111-2222-3333-4444-555555555555', generation: 2 }, async (vm) => {
        const image = await hostKeys(vm);
        const first = await vm.boot();
        const afterFirst = await diskState(vm);
        const second = await vm.boot();
        const afterSecond = await diskState(vm);
        await writeFile(vm.sandbox.hostPath('/sys/class/dmi/id/product_uuid'), '99999999-8888-7777-6666-555555555555\n');
        const clone = await vm.boot();
        return { vm, first, second, clone, image, afterFirst, afterSecond, afterClone: await hostKeys(vm) };
      }),
    );
    const failing = (name: string, scenario: string) =>
      slot(() =>
        withVm(name, { generation: 2, scenario }, async (vm) => {
          const passwdBefore = await file(vm, '/etc/passwd');
          return { vm, boot: await vm.boot(), passwdBefore };
        }),
      );
    const hostileUsername = failing('baduser', 'hostile-username');
    const hostileHostname = failing('badhost', 'hostile-hostname');
    const symlinked = slot(() =>
      withVm('symlink', { generation: 2 }, async (vm) => {
        const made = await runInSandbox(vm.sandbox, [
          'sh', '-c',
          'useradd --create-home azureuser && mkdir -m 0755 /etc/e2e-outside && ln -s /etc/e2e-outside /home/azureuser/.ssh && chown -h azureuser:azureuser /home/azureuser/.ssh',
        ]);
        if (made.exitCode !== 0) throw new Error(`preparing the planted symlink failed: ${made.stderr}`);
        return { vm, boot: await vm.boot(), outside: '/etc/e2e-outside' };
      }),
    );
    const readyRejected = slot(() =>
      withVm('ready', { generation: 2, scenario: 'ready-rejected-once' }, async (vm) => {
        const first = await vm.boot();
        const requestsAfterFirst = (await vm.requests()).length;
        const passwdAfterFirst = await file(vm, '/etc/passwd');
        const markersAfterFirst = await markers(vm);
        const second = await vm.boot();
        return { vm, first, second, requestsAfterFirst, passwdAfterFirst, markersAfterFirst };
      }),
    );
    const badConfig = slot(() =>
      withVm('badconf', { generation: 2 }, async (vm) => {
        await mkdir(vm.sandbox.hostPath('/etc/bootstate'), { recursive: true });
        await writeFile(vm.sandbox.hostPath('/etc/bootstate/bootstate.toml'), '[imds]\nretry_interval_secs = "soon"\n');
        const passwdBefore = await file(vm, '/etc/passwd');
        return { vm, boot: await vm.boot(), passwdBefore };
      }),
    );
    // Beside the others: each VM's /sys/class/block lists only the loop devices attached to it (ns.ts).
    const media = slot(() => {
      if (!LOOP) throw new Error('no loop devices');
      return withVm('media', { generation: 2, scenario: 'imds-down' }, async (vm) => {
        const content = path.join(vm.sandbox.root, 'media-content');
        await mkdir(content);
        const keyFile = path.join(vm.sandbox.root, 'media-key');
        execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'mediauser@e2e', '-f', keyFile]);
        const key = (await readFile(`${keyFile}.pub`, 'utf8')).trim();
        await writeFile(path.join(content, 'ovf-env.xml'), ovfEnv({ username: 'mediauser', hostname: 'from-media', password: MEDIA_PASSWORD, key }));
        const iso = path.join(vm.sandbox.root, `${PREFIX}-ovf.iso`);
        execFileSync('xorriso', ['-as', 'mkisofs', '-quiet', '-V', 'rd_rdfe_stable', '-o', iso, content], { stdio: 'pipe' });
        const loop = await attachLoop(iso, vm.sandbox);
        loops.push(loop.detach);
        try {
          return { vm, boot: await vm.boot(), device: loop.device, key };
        } finally {
          await loop.detach();
        }
      });
    });
    scenarios = { happy, passwordAuth, sameDisk, hostileUsername, hostileHostname, symlinked, readyRejected, badConfig, media };
    // Each test awaits its own scenario; keep a failed one from also surfacing as an unhandled rejection.
    for (const p of Object.values(scenarios)) (p as Promise<unknown>).catch(() => undefined);
  });

  afterAll(async () => {
    if (scenarios) await Promise.allSettled(Object.values(scenarios));
    for (const detach of loops) await detach();
    for (const vm of vms) {
      await vm.shutdown().catch(() => undefined);
      await vm.sandbox.cleanup();
    }
  }, 120_000);

  describe('on a healthy fabric', () => {
    it('exits 0 after reporting InProgress and then Ready, having fetched IMDS once with the Metadata header', async () => {
      const { vm, boot } = await scenarios.happy;
      expect(boot.exitCode, boot.stderr).toBe(0);
      expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready']);
      const imds = (await vm.requests()).filter((r) => r.route === 'imds');
      expect(imds).toHaveLength(1);
      expect(imds[0]!.headers.metadata).toBe('true');
    });

    it('creates the user in the sandbox passwd with the default shell and a home as useradd makes it', async () => {
      const { vm } = await scenarios.happy;
      const user = await passwdEntry(vm, 'azureuser');
      expect(user).toMatchObject({ home: '/home/azureuser', shell: '/bin/bash' });
      const home = await stat(vm.sandbox.hostPath('/home/azureuser'));
      expect([home.uid, home.gid]).toEqual([user!.uid, user!.gid]);
      expect(home.mode & 0o7777).toBe(await useraddHomeMode(vm));
    });

    it('leaves the password locked as useradd made it (! in the sandbox shadow), without running passwd -l', async () => {
      const { vm } = await scenarios.happy;
      expect((await vm.commands()).map((c) => c[0])).not.toContain('passwd');
      expect(await shadowField(vm, 'azureuser')).toMatch(/^!/);
    });

    it('writes the IMDS key to authorized_keys 0600 in .ssh 0700, both owned by the user', async () => {
      const { vm } = await scenarios.happy;
      const user = (await passwdEntry(vm, 'azureuser'))!;
      const dir = await stat(vm.sandbox.hostPath('/home/azureuser/.ssh'));
      const keys = await stat(vm.sandbox.hostPath('/home/azureuser/.ssh/authorized_keys'));
      expect([dir.mode & 0o7777, dir.uid, dir.gid]).toEqual([0o700, user.uid, user.gid]);
      expect([keys.mode & 0o7777, keys.uid, keys.gid]).toEqual([0o600, user.uid, user.gid]);
      expect((await file(vm, '/home/azureuser/.ssh/authorized_keys')).trim().split('\n')).toEqual([IMDS_KEY]);
    });

    it('turns password logins off as sshd -T sees it, despite an image drop-in that turns them on', async () => {
      const { vm, sshdT } = await scenarios.happy;
      expect(await file(vm, '/etc/ssh/sshd_config.d/00-bootstate.conf')).toMatch(/^PasswordAuthentication no$/m);
      expect(effective(sshdT, 'passwordauthentication')).toBe('no');
    });

    it('sets the hostname in /etc/hostname and in the UTS namespace the agent ran in', async () => {
      const { vm, boot } = await scenarios.happy;
      expect(await file(vm, '/etc/hostname')).toBe('web-01\n');
      expect(boot.utsHostname).toBe('web-01');
      expect((await runInSandbox(vm.sandbox, ['hostname'])).stdout.trim()).toBe('web-01');
    });

    it('leaves the lower-cased VM id as the provisioned marker in a 0700 /var/lib/bootstate', async () => {
      const { vm } = await scenarios.happy;
      expect(await markers(vm)).toEqual([`${GEN2_UUID.toLowerCase()}.provisioned`]);
      expect(await mode(vm, '/var/lib/bootstate')).toBe(0o700);
    });

    it('writes a success PROVISIONING_REPORT with the VM id to KVP pool 1 in /var/lib/hyperv', async () => {
      const { vm } = await scenarios.happy;
      const last = (await kvpReports(vm)).at(-1);
      expect(last?.get('result')).toBe('success');
      expect(last?.get('vm_id')).toBe(GEN2_UUID.toLowerCase());
    });
  });

  describe('when the VM owner allowed password logins', () => {
    it('turns password logins on as sshd -T sees it, despite an image drop-in that turns them off', async () => {
      const { vm, boot, sshdT } = await scenarios.passwordAuth;
      expect(boot.exitCode, boot.stderr).toBe(0);
      expect(await file(vm, '/etc/ssh/sshd_config.d/00-bootstate.conf')).toMatch(/^PasswordAuthentication yes$/m);
      expect(effective(sshdT, 'passwordauthentication')).toBe('yes');
    });

    it('still leaves the password locked, since IMDS carries none', async () => {
      const { vm } = await scenarios.passwordAuth;
      expect((await vm.commands()).map((c) => c[0])).not.toContain('chpasswd');
      expect(await shadowField(vm, 'azureuser')).toMatch(/^!/);
    });

    it('names the marker after the byte-swapped VM id on a Generation 1 VM (docs/protocol.md#vm-id-examples)', async () => {
      const { vm } = await scenarios.passwordAuth;
      expect(await markers(vm)).toEqual(['00840e55-9be2-d441-a716-446655440000.provisioned']);
      expect((await kvpReports(vm)).at(-1)?.get('vm_id')).toBe('00840e55-9be2-d441-a716-446655440000');
    });
  });

  describe('booting the same disk again', () => {
    it('skips a second boot of the same VM: exit 0, no request to any fabric service, nothing rewritten', async () => {
      const { first, second, afterFirst, afterSecond } = await scenarios.sameDisk;
      expect(first.exitCode, first.stderr).toBe(0);
      expect(second.exitCode, second.stderr).toBe(0);
      expect(afterFirst.requests).toBeGreaterThan(0);
      expect(afterSecond).toEqual(afterFirst);
    });

    it('gives the VM host keys of its own on its first boot, prints their fingerprints, keeps them on a reboot, and a clone gets new ones', async () => {
      const { vm, first, image, afterFirst, afterSecond, afterClone } = await scenarios.sameDisk;
      expect(Object.keys(image)).toEqual(['ssh_host_ed25519_key']);
      expect(Object.keys(afterFirst.hostKeys)).toEqual(['ssh_host_ecdsa_key', 'ssh_host_ed25519_key', 'ssh_host_rsa_key']);
      expect(Object.values(afterFirst.hostKeys).every((k) => k.startsWith('600 '))).toBe(true);
      expect(afterFirst.hostKeys.ssh_host_ed25519_key).not.toBe(image.ssh_host_ed25519_key);
      expect(afterSecond.hostKeys).toEqual(afterFirst.hostKeys);
      for (const [name, key] of Object.entries(afterClone)) expect(key, name).not.toBe(afterFirst.hostKeys[name]);
      // The console (the agent's stdout) shows each new key's fingerprint between the marker lines.
      const block = /-----BEGIN SSH HOST KEY FINGERPRINTS-----\n([\s\S]*?)\n-----END SSH HOST KEY FINGERPRINTS-----/.exec(first.stdout);
      expect(block, first.stdout).not.toBeNull();
      const printed = block![1]!.split('\n');
      for (const key of Object.values(afterFirst.hostKeys)) {
        const publicKey = key.slice('600 '.length);
        const pub = path.join(vm.sandbox.root, 'host-key-check.pub');
        await writeFile(pub, `${publicKey}\n`);
        expect(printed).toContain(execFileSync('ssh-keygen', ['-l', '-f', pub], { encoding: 'utf8' }).trim());
        expect(first.stdout).toContain(publicKey);
      }
    });

    it('provisions again when the disk boots as a clone with another VM id, keeping the user and its key once', async () => {
      const { vm, clone, afterSecond } = await scenarios.sameDisk;
      expect(clone.exitCode, clone.stderr).toBe(0);
      const later = (await vm.requests()).slice(afterSecond.requests);
      expect(later.map((r) => r.route)).toEqual(expect.arrayContaining(['imds', 'health']));
      expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready', 'NotReady/Provisioning', 'Ready']);
      expect(await markers(vm)).toEqual(['11111111-2222-3333-4444-555555555555.provisioned', '99999999-8888-7777-6666-555555555555.provisioned']);
      expect((await file(vm, '/etc/passwd')).match(/^azureuser:/gm)).toHaveLength(1);
      expect((await file(vm, '/home/azureuser/.ssh/authorized_keys')).trim().split('\n')).toEqual([IMDS_KEY]);
    });
  });

  describe('with hostile metadata', () => {
    it('refuses an option-injection username with exit 78, reporting it escaped, and creates no user', async () => {
      const { vm, boot, passwdBefore } = await scenarios.hostileUsername;
      expect(boot.exitCode, boot.stderr).toBe(78);
      expect((await vm.reportKinds()).at(-1)).toBe('NotReady/ProvisioningFailed');
      const report = await lastFailure(vm);
      expect(report.get('reason')).toBe('invalid username');
      expect(report.get('username')).toBe('-oops;rm');
      expect(await file(vm, '/etc/passwd')).toBe(passwdBefore);
      expect(await readdir(vm.sandbox.hostPath('/home'))).toEqual([]);
      expect((await vm.commands()).map((c) => c[0])).not.toContain('useradd');
      expect(await markers(vm)).toEqual([]);
    });

    it('refuses a hostname with shell metacharacters and a newline with exit 78, changing neither name nor users', async () => {
      const { vm, boot, passwdBefore } = await scenarios.hostileHostname;
      expect(boot.exitCode, boot.stderr).toBe(78);
      const report = await lastFailure(vm);
      expect(report.get('reason')).toBe('invalid hostname');
      expect(report.get('hostname')).toMatch(/^\$\(reboot\)\\x0aweb-01;x+…?$/);
      expect(await file(vm, '/etc/hostname')).toBe('sandbox\n');
      expect(boot.utsHostname).toBe('sandbox');
      expect(await file(vm, '/etc/passwd')).toBe(passwdBefore);
      expect(await markers(vm)).toEqual([]);
    });

    it('refuses to follow a .ssh symlink planted in the home, reports the failure and writes nothing outside', async () => {
      const { vm, boot, outside } = await scenarios.symlinked;
      expect(boot.exitCode, boot.stderr).toBe(1);
      expect((await vm.reportKinds()).at(-1)).toBe('NotReady/ProvisioningFailed');
      expect((await lastFailure(vm)).get('reason')).toBe('failed to provision ssh keys');
      expect(await readdir(vm.sandbox.hostPath(outside))).toEqual([]);
      expect(await readlink(vm.sandbox.hostPath('/home/azureuser/.ssh'))).toBe(outside);
      expect(await markers(vm)).toEqual([]);
    });
  });

  describe('with a broken configuration file', () => {
    it('still reports ProvisioningFailed with the defaults, naming the file and key, exits 78 and changes nothing', async () => {
      const { vm, boot, passwdBefore } = await scenarios.badConfig;
      expect(boot.exitCode, boot.stderr).toBe(78);
      expect(await vm.reportKinds()).toEqual(['NotReady/ProvisioningFailed']);
      const report = await lastFailure(vm);
      expect(report.get('reason')).toBe('failed to load config');
      expect([...report.values()].join(' ')).toContain('/etc/bootstate/bootstate.toml');
      expect([...report.values()].join(' ')).toContain('retry_interval_secs');
      expect(await file(vm, '/etc/passwd')).toBe(passwdBefore);
      expect(await markers(vm)).toEqual([]);
    });
  });

  describe('when the fabric rejects the Ready report once', () => {
    it('ends the first boot unreported with a report-pending marker and no provisioned marker', async () => {
      const { vm, first, requestsAfterFirst, passwdAfterFirst, markersAfterFirst } = await scenarios.readyRejected;
      expect(first.exitCode, first.stderr).toBe(1);
      expect(passwdAfterFirst).toMatch(/^azureuser:/m);
      expect(markersAfterFirst).toEqual([expect.stringMatching(/^[0-9a-f-]{36}\.report-pending$/)]);
      const reports = (await vm.requests()).slice(0, requestsAfterFirst).filter((r) => r.route === 'health');
      expect(reports.map((r) => JSON.parse(r.body).state)).toEqual(['NotReady', 'Ready']);
    });

    it('completes on the next boot by reporting Ready alone, without IMDS or re-provisioning', async () => {
      const { vm, second, requestsAfterFirst, passwdAfterFirst } = await scenarios.readyRejected;
      expect(second.exitCode, second.stderr).toBe(0);
      const later: RecordedRequest[] = (await vm.requests()).slice(requestsAfterFirst);
      expect(later.map((r) => [r.route, r.body])).toEqual([['health', '{"state":"Ready"}']]);
      expect(await file(vm, '/etc/passwd')).toBe(passwdAfterFirst);
      expect(await markers(vm)).toEqual([expect.stringMatching(/^[0-9a-f-]{36}\.provisioned$/)]);
    });
  });

  describe.skipIf(!LOOP)('when IMDS refuses every request and provisioning media is attached', () => {
    it('provisions the user, key and hostname from ovf-env.xml on the loop device and reports Ready', async () => {
      const { vm, boot, key } = await scenarios.media;
      expect(boot.exitCode, boot.stderr).toBe(0);
      expect((await vm.requests()).filter((r) => r.route === 'imds')).toHaveLength(1);
      expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready']);
      expect(await passwdEntry(vm, 'mediauser')).toMatchObject({ home: '/home/mediauser' });
      expect((await file(vm, '/home/mediauser/.ssh/authorized_keys')).trim()).toBe(key);
      expect(await file(vm, '/etc/hostname')).toBe('from-media\n');
      expect(effective(await sshdEffective(vm), 'passwordauthentication')).toBe('yes');
    });

    it('finds the media by its volume descriptor on the host block devices, without blkid, and leaves no mount directory behind', async () => {
      const { vm, device } = await scenarios.media;
      expect((await vm.commands()).filter((c) => c[0] === 'blkid')).toEqual([]);
      expect((await vm.commands()).some((c) => c[0] === 'mount' && c.includes(device))).toBe(true);
      expect(await readdir(vm.sandbox.hostPath('/run/bootstate')).catch(() => [])).toEqual([]);
    });

    it('sets the OVF password through chpasswd: its hash is in the sandbox shadow', async () => {
      const { vm } = await scenarios.media;
      const hash = (await shadowField(vm, 'mediauser'))!;
      expect(hash).toMatch(/^\$/);
      expect(await cryptMatches(MEDIA_PASSWORD, hash)).toBe(true);
      expect(await cryptMatches(`${MEDIA_PASSWORD}x`, hash)).toBe(false);
    });

    it('never puts the password in an argv, the output, a report, the log, KVP or the journal', async () => {
      const { vm, boot } = await scenarios.media;
      const commands = await vm.commands();
      expect(commands).toContainEqual(['chpasswd']);
      expect(commands.flat().join('\n')).not.toContain(MEDIA_PASSWORD);
      expect(`${boot.stdout}\n${boot.stderr}`).not.toContain(MEDIA_PASSWORD);
      expect(JSON.stringify(await vm.requests())).not.toContain(MEDIA_PASSWORD);
      const written = await filesUnder(vm, ['/var/log', '/var/lib/bootstate', '/var/lib/hyperv', '/run']);
      expect(written.map(([p]) => path.basename(p))).toEqual(expect.arrayContaining(['bootstate.log', '.kvp_pool_1']));
      expect(written.filter(([, bytes]) => bytes.includes(MEDIA_PASSWORD)).map(([p]) => p)).toEqual([]);
    });
  });

  describe('the host', () => {
    it("keeps its users, hostname, mounts, and has none of the suite's namespaces or loop devices left", async () => {
      await Promise.allSettled(Object.values(scenarios));
      const after = await snapshotHost();
      expect(after).toEqual({ ...host, ourMounts: [], ourLoops: [], ourNetns: [] });
    });
  });
});
