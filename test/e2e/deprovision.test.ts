/**
 * `bootstate deprovision --user` on a build VM that a real first boot provisioned with every feature on, diffed
 * against the image as it was before that boot. The VM is a namespace sandbox (ns.ts) whose media and fabric give
 * it a hostname, an admin with a password, an IMDS key, a key named only by its certificate's thumbprint, a key
 * pair, custom data, user data and the goal state's certificates (placed in /var/lib/waagent). The build VM's life
 * then adds what a build VM has: a DHCP lease of each kind, shell histories, the temporary disk's units, a monitor
 * cycle, the firewall and its snapshot, and what a run cut short leaves (a transport key, a host key under its
 * temporary name). After deprovision nothing in the tree may name the build VM or hold its secrets, and every path
 * that differs from the image is on an allow-list, each with its reason (docs/install.md#what-stays-in-the-image).
 */
import { existsSync } from 'node:fs';
import { lstat, mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCertificate, type FabricCertificate } from '../../src/fabric/certificates.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { ovfDocument } from '../../src/fabric/ovf-document.js';
import { HISTORY_FILES } from '../../src/deprovision/plan.js';
import { mountUnit, swapUnit } from '../../src/resource-disk/units.js';
import { diff, snapshot, type Entry } from '../deprovision/image.js';
import { AGENT, vmFile, withMedia, withVm, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox, runInSandbox, type Sandbox } from './ns.js';

const PREFIX = `bs-deprov-${process.pid}`;
const LOOP = existsSync('/dev/loop-control');
const HOSTNAME = 'dpv-build-host';
const VM_NAME = 'dpv-build-vm';
const USERNAME = 'dpvbuilder';
const PASSWORD = 'Dpv-Secret-Passw0rd!';
const CUSTOM_DATA = 'dpv-custom-data-secret';
const USER_DATA = 'dpv-user-data-secret';
const VM_ID = '7c1e2d3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f';
const LEASE_ADDRESS = '10.77.3.4';
const IMDS_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIN/Rb85Ri4GtZokp7+G4Wiooo9ItAifFWeNtrUbNH45R dpv@laptop';
/** The image's configuration: every certificate placed, and WALinuxAgent's copy of the custom data written too. */
const CONFIG = '[certificates]\nplace = true\n\n[custom_data]\nwaagent_compat = true\n';

/**
 * The parts of the sandbox that are the VM's disk: ns.ts binds them over /etc, /home, /root, /var/lib, /var/log and
 * /run (so the shell histories deprovision removes are the sandbox's, never the host's).
 */
const DISK = ['etc', 'home', 'var', 'root', 'run'];
/** What the harness itself writes inside the VM's tree (boot.ts: the UTS hostname it reads back). */
const HARNESS = new Set(['/run/.e2e-uts-hostname']);

/**
 * What may differ from the image after deprovision, each with why it may stay. Every entry names no VM: the test
 * reads every file left for the build VM's names and secrets as well.
 */
const ALLOWED: Array<{ path: RegExp; why: string }> = [
  { path: /^\/etc\/hostname$/, why: 'reset to "localhost"; a first boot sets each VM\'s name' },
  { path: /^\/etc\/(passwd|shadow|group|gshadow|subuid|subgid)-?$/, why: 'rewritten by useradd and userdel (the admin gone); the backups are copies of the files' },
  { path: /^\/etc\/\.pwd\.lock$/, why: 'shadow-utils\' empty lock file' },
  { path: /^\/etc\/ssh\/sshd_config\.d(\/00-bootstate\.conf)?$/, why: 'bootstate\'s PasswordAuthentication drop-in: policy, no identity; every first boot rewrites it from its own metadata' },
  { path: /^\/etc\/systemd(\/system)?$/, why: 'directories the temporary disk\'s units were written to (the units are gone)' },
  { path: /^\/var\/lib\/bootstate(\/bootstate\.lock)?$/, why: 'bootstate\'s data directory and its empty lock file' },
  { path: /^\/var\/lib\/bootstate\/runs$/, why: 'the run journals\' directory, emptied' },
  { path: /^\/var\/lib\/hyperv(\/\.kvp_pool_[0-4])?$/, why: 'the KVP pool files, emptied in place: the Hyper-V daemon keeps them open' },
  { path: /^\/var\/lib\/waagent$/, why: 'WALinuxAgent\'s 0700 directory, emptied of what bootstate placed (WALinuxAgent too keeps it)' },
  { path: /^\/var\/lib\/dhcp$|^\/run\/systemd(\/netif(\/leases)?)?$/, why: 'directories the DHCP leases were in (the leases are gone)' },
  { path: /^\/var\/log\/azure$/, why: 'WALinuxAgent\'s extension log directory, empty' },
  { path: /^\/run(\/bootstate(\/[^/]+\.lock)?)?$/, why: 'runtime state on tmpfs, never in an image: bootstate\'s runtime directory and its empty instance lock' },
  { path: /^\/run\/sshd$/, why: 'sshd\'s privilege separation directory, empty (tmpfs)' },
  { path: /^\/run\/mount(\/utab)?$/, why: 'util-linux\'s record of mounts (the media\'s, gone), on tmpfs' },
];

interface Deprovisioned {
  vm: Vm;
  boot: BootResult;
  deprovision: { exitCode: number | null; stdout: string; stderr: string };
  before: Map<string, Entry>;
  provisioned: Map<string, Entry>;
  after: Map<string, Entry>;
  /** What names the build VM or is its secret, read from the VM after its first boot. */
  identity: string[];
}

const vms: Vm[] = [];
const runs: Record<string, Promise<Deprovisioned>> = {};
let owner: FabricCertificate & { thumbprint: string };
let app: FabricCertificate & { thumbprint: string };

/** The VM's disk as it is now: every entry under its bind-mounted directories, keyed by its path in the VM. */
function diskTree(sandbox: Sandbox): Map<string, Entry> {
  const tree = new Map<string, Entry>();
  for (const top of DISK) {
    for (const [p, entry] of snapshot(sandbox.hostPath(top))) {
      const inVm = p === '/' ? `/${top}` : `/${top}${p}`;
      if (!HARNESS.has(inVm)) tree.set(inVm, entry);
    }
  }
  return tree;
}

function imdsDocument(): Record<string, any> {
  const doc = exampleImdsDocument();
  doc.compute.name = VM_NAME;
  doc.compute.vmId = VM_ID;
  doc.compute.osProfile.adminUsername = USERNAME;
  doc.compute.osProfile.computerName = HOSTNAME;
  doc.compute.osProfile.disablePasswordAuthentication = 'false';
  doc.compute.publicKeys = [{ keyData: IMDS_KEY, path: `/home/${USERNAME}/.ssh/authorized_keys` }];
  doc.compute.userData = Buffer.from(USER_DATA).toString('base64');
  return doc;
}

/** What the build VM's life adds after its first boot, as its DHCP clients, its users and its units write it. */
const LIFE = `set -e
mkdir -p /var/lib/dhcp /run/systemd/netif/leases
printf 'lease {\\n  fixed-address ${LEASE_ADDRESS};\\n  option host-name "${HOSTNAME}";\\n}\\n' > /var/lib/dhcp/dhclient.eth0.leases
printf 'ADDRESS=${LEASE_ADDRESS}\\nHOSTNAME=${HOSTNAME}\\n' > /run/systemd/netif/leases/2
printf 'sudo -i\\n' > /home/${USERNAME}/.bash_history; chown ${USERNAME}: /home/${USERNAME}/.bash_history
printf 'ssh ${USERNAME}@${HOSTNAME}\\n' > /root/.bash_history
`;

/** WALinuxAgent's state, as it would be beside bootstate's (its goal state, a certificate of its own, its logs). */
const WAAGENT_LIFE = `set -e
printf '<GoalState><Incarnation>1</Incarnation></GoalState>\n' > /var/lib/waagent/GoalState.1.xml
printf -- '-----BEGIN PRIVATE KEY-----\nwaagent\n-----END PRIVATE KEY-----\n' > /var/lib/waagent/${'C3'.repeat(20)}.prv
mkdir -p /var/lib/waagent/Microsoft.CPlat.Core.RunCommandLinux-1.0.5/config /var/log/azure/run-command
printf '{"hostname":"${HOSTNAME}"}\n' > /var/lib/waagent/Microsoft.CPlat.Core.RunCommandLinux-1.0.5/config/0.settings
printf 'ran on ${HOSTNAME}\n' > /var/log/azure/run-command/handler.log
printf 'Published hostname ${HOSTNAME}\n' > /var/log/waagent.log
`;

/** Runs `argv` in the VM: its sandbox (whose own /root the harness binds) and its network namespace. */
function inVm(vm: Vm, argv: string[]) {
  return runInSandbox(vm.sandbox, argv, { netns: vm.netns.name, timeoutMs: 120_000 });
}

/**
 * The homes of the sandbox's system accounts outside its disk (/usr/sbin, /bin, /dev) are the host's: deprovision
 * removes shell histories from every home /etc/passwd names, so none may be there, or the test would remove it.
 */
async function assertNoHostHistories(vm: Vm): Promise<void> {
  const passwd = await vmFile(vm, '/etc/passwd');
  const homes = passwd.split('\n').map((line) => line.split(':')[5]).filter((home): home is string => !!home && !DISK.some((d) => home === `/${d}` || home.startsWith(`/${d}/`)));
  for (const home of homes) {
    for (const name of HISTORY_FILES) expect(existsSync(path.join(home, name)), `the host's ${path.join(home, name)}: this test would remove it`).toBe(false);
  }
}

async function liveBuildVm(vm: Vm, waagent: boolean): Promise<void> {
  const life = await inVm(vm, ['sh', '-c', waagent ? LIFE + WAAGENT_LIFE : LIFE]);
  expect(life.exitCode, life.stderr).toBe(0);
  // The temporary disk's units as `bootstate resource-disk` renders them (the sandbox has no temporary disk).
  await mkdir(vm.sandbox.hostPath('/etc/systemd/system'), { recursive: true });
  await writeFile(vm.sandbox.hostPath('/etc/systemd/system/mnt.mount'), mountUnit('/dev/disk/azure/resource-part1', '/mnt', 'defaults,nofail'));
  await writeFile(vm.sandbox.hostPath('/etc/systemd/system/mnt-swapfile.swap'), swapUnit('/mnt/swapfile', 'mnt.mount'));
  for (const argv of [['monitor', '--once'], ['firewall', 'apply', '--snapshot', '/run/bootstate/firewall.nft']]) {
    const result = await inVm(vm, [process.execPath, AGENT, ...argv]);
    expect(result.exitCode, `${argv.join(' ')}: ${result.stderr}`).toBe(0);
  }
  // What a run cut short leaves: a transport key (a SIGTERM during the Certificates request) and a new host key
  // under its temporary name (a first boot that failed after making it).
  await mkdir(vm.sandbox.hostPath('/run/bootstate-transport-Q7xY2z'), { mode: 0o700 });
  await writeFile(vm.sandbox.hostPath('/run/bootstate-transport-Q7xY2z/transport.key'), owner.privateKeyPem!, { mode: 0o600 });
  const hostKey = await vmFile(vm, '/etc/ssh/ssh_host_ed25519_key');
  await writeFile(vm.sandbox.hostPath('/etc/ssh/.bootstate-new-ssh_host_ecdsa_key'), hostKey, { mode: 0o600 });
}

/** The strings that name the build VM or are its secrets, as found on it after its first boot. */
async function identityOf(vm: Vm): Promise<string[]> {
  const found = [HOSTNAME, VM_NAME, USERNAME, PASSWORD, CUSTOM_DATA, USER_DATA, VM_ID, LEASE_ADDRESS, 'PRIVATE KEY', 'BEGIN CERTIFICATE', owner.thumbprint, app.thumbprint];
  for (const type of ['rsa', 'ecdsa', 'ed25519']) {
    const line = await vmFile(vm, `/etc/ssh/ssh_host_${type}_key.pub`).catch(() => null);
    if (line) found.push(line.split(' ')[1]!);
  }
  const shadow = await vmFile(vm, '/etc/shadow');
  found.push(shadow.split('\n').find((l) => l.startsWith(`${USERNAME}:`))!.split(':')[1]!);
  return found;
}

function deprovisioned(name: string, flags: string[]): Promise<Deprovisioned> {
  const ovf = ovfDocument({
    username: USERNAME,
    hostname: HOSTNAME,
    password: PASSWORD,
    disableSshPasswordAuthentication: false,
    keys: [IMDS_KEY],
    keyFingerprints: [owner.thumbprint],
    keyPairs: [{ fingerprint: owner.thumbprint, path: `$HOME/${USERNAME}/.ssh/id_rsa` }],
    customData: Buffer.from(CUSTOM_DATA),
  });
  // The fake fabric's bundle holds one private key (openssl pkcs12 -export takes one): the owner's.
  const pem = owner.certificatePem + owner.privateKeyPem! + app.certificatePem;
  return withVm(vms, `${PREFIX}-${name}`, { generation: 2, imdsDocument: imdsDocument(), certificates: pem }, async (vm) => {
    await mkdir(vm.sandbox.hostPath('/etc/bootstate'), { recursive: true });
    await writeFile(vm.sandbox.hostPath('/etc/bootstate/bootstate.toml'), CONFIG);
    await assertNoHostHistories(vm);
    const before = diskTree(vm.sandbox);
    const boot = await withMedia(vm, ovf, () => vm.boot());
    expect(boot.exitCode, boot.stderr).toBe(0);
    await liveBuildVm(vm, flags.includes('--waagent-state'));
    const identity = await identityOf(vm);
    const provisioned = diskTree(vm.sandbox);
    const deprovision = await inVm(vm, [process.execPath, AGENT, 'deprovision', '--user', ...flags, '--force']);
    return { vm, boot, deprovision, before, provisioned, after: diskTree(vm.sandbox), identity };
  });
}

/** Every regular file left in the VM's disk that holds one of `strings`, with the first it holds. */
async function filesHolding(sandbox: Sandbox, tree: Map<string, Entry>, strings: string[]): Promise<string[]> {
  const hits: string[] = [];
  for (const [p, entry] of tree) {
    if (entry.type !== 'file') continue;
    const text = (await readFile(sandbox.hostPath(p))).toString('latin1');
    const hit = strings.find((s) => text.includes(s));
    if (hit) hits.push(`${p}: ${hit}`);
  }
  return hits;
}

describe.skipIf(!canSandbox)('deprovision --user after a first boot with every feature on, diffed against the image', { timeout: 600_000 }, () => {
  beforeAll(async () => {
    assertNamespaces();
    if (!LOOP) throw new Error('no loop devices (/dev/loop-control): these tests attach the provisioning media as one');
    [owner, app] = await Promise.all([makeCertificate('dpv-owner-key'), makeCertificate('dpv-app-certificate', 'ec:P-256')]);
    // One after the other: each boot makes RSA keys, and the machine is shared.
    runs.user = deprovisioned('user', []);
    await runs.user.catch(() => undefined);
    runs.waagent = deprovisioned('waagent', ['--waagent-state']);
    await runs.waagent.catch(() => undefined);
  }, 900_000);

  afterAll(async () => {
    await Promise.allSettled(Object.values(runs));
    await Promise.allSettled(vms.map((vm) => vm.sandbox.cleanup()));
  });

  it('the build VM had every feature on: certificates, keys, custom data, user data, hostname, leases, histories, units', async () => {
    const { provisioned, boot } = await runs.user!;
    expect(boot.utsHostname).toBe(HOSTNAME);
    for (const p of [
      `/var/lib/waagent/${owner.thumbprint}.prv`, `/var/lib/waagent/${owner.thumbprint}.crt`, `/var/lib/waagent/${app.thumbprint}.crt`,
      '/var/lib/waagent/CustomData', '/var/lib/bootstate/CustomData', '/var/lib/bootstate/UserData', '/var/lib/bootstate/waagent-certificates',
      `/home/${USERNAME}/.ssh/id_rsa`, `/home/${USERNAME}/.ssh/authorized_keys`, '/etc/ssh/ssh_host_rsa_key', '/run/bootstate/monitor-state.json',
      '/run/bootstate/firewall.nft', '/var/log/bootstate.log', '/root/.bash_history', `/home/${USERNAME}/.bash_history`,
      '/var/lib/dhcp/dhclient.eth0.leases', '/run/systemd/netif/leases/2', '/etc/systemd/system/mnt.mount',
      '/run/bootstate-transport-Q7xY2z/transport.key', '/etc/ssh/.bootstate-new-ssh_host_ecdsa_key',
    ]) {
      expect(provisioned.has(p), p).toBe(true);
    }
  });

  for (const [name, variant] of [['user', '--user'], ['waagent', '--user --waagent-state']] as const) {
    it(`${variant}: exits 0 and leaves no file naming the build VM or holding its secrets`, async () => {
      const { vm, deprovision, after, identity } = await runs[name]!;
      expect(deprovision.exitCode, `${deprovision.stdout}\n${deprovision.stderr}`).toBe(0);
      expect(await filesHolding(vm.sandbox, after, identity)).toEqual([]);
      for (const p of after.keys()) expect(p, 'a name of the build VM in a path').not.toMatch(new RegExp(`${USERNAME}|${HOSTNAME}|${VM_ID}|${owner.thumbprint}|${app.thumbprint}|ssh_host_|bootstate-transport-`, 'i'));
    });

    it(`${variant}: every path that differs from the image before the first boot is allowed, for its reason`, async () => {
      const { before, after } = await runs[name]!;
      const changes = diff(before, after);
      const unexplained = [...changes.added, ...changes.changed].filter((p) => !ALLOWED.some((a) => a.path.test(p)));
      expect(unexplained).toEqual([]);
      // Of the image, only its host keys go (a first boot makes new ones), and /etc/hostname is reset.
      expect(changes.removed).toEqual(['/etc/ssh/ssh_host_ed25519_key', '/etc/ssh/ssh_host_ed25519_key.pub']);
      expect(await vmFile((await runs[name]!).vm, '/etc/hostname')).toBe('localhost\n');
    });
  }

  it('every entry of the allow-list is needed: it lists what stays, not what might', async () => {
    const differing: string[] = [];
    for (const name of ['user', 'waagent']) {
      const { before, after } = await runs[name]!;
      const changes = diff(before, after);
      differing.push(...changes.added, ...changes.changed);
    }
    expect(ALLOWED.filter((a) => !differing.some((p) => a.path.test(p))).map((a) => a.why)).toEqual([]);
  });

  it('--user keeps WALinuxAgent\'s directory empty of bootstate\'s files and says what it removed', async () => {
    const { vm, deprovision } = await runs.user!;
    expect(await readdir(vm.sandbox.hostPath('/var/lib/waagent'))).toEqual([]);
    expect((await lstat(vm.sandbox.hostPath('/var/lib/waagent'))).mode & 0o777).toBe(0o700);
    expect(deprovision.stdout).toContain(`removed /var/lib/waagent/${owner.thumbprint}.prv`);
    expect(deprovision.stdout).toContain('wrote "localhost" to /etc/hostname');
    expect(deprovision.stdout).toContain('rewrote /etc/shadow- as a copy of /etc/shadow');
    expect(deprovision.stdout).toMatch(/removed the wireserver firewall's rules|removed .*table/);
  });

  it('--waagent-state also empties WALinuxAgent\'s directories of its own state, keeping them, and removes its log', async () => {
    const { vm, provisioned, after } = await runs.waagent!;
    expect(provisioned.has(`/var/lib/waagent/${'C3'.repeat(20)}.prv`)).toBe(true);
    for (const dir of ['/var/lib/waagent', '/var/log/azure']) {
      expect(await readdir(vm.sandbox.hostPath(dir)), dir).toEqual([]);
      expect(after.get(dir)?.type, dir).toBe('dir');
    }
    expect(after.has('/var/log/waagent.log')).toBe(false);
  });
});
