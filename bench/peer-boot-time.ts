/**
 * Boot to first SSH login on one Debian 12 root that carries Debian's WALinuxAgent 2.7, cloud-init 22.4 and
 * ifupdown beside the .deb, provisioned by each agent in turn. Every VM has an eth0 with the MAC address IMDS lists,
 * cabled to a DHCP server that offers a default route and the wireserver in option 245, as Azure's does.
 *   (a) bootstate, from IMDS; WALinuxAgent in the supported setup and cloud-init turned off, as docs/coexistence.md
 *       has it; ifupdown brings eth0 up.
 *   (b) WALinuxAgent as the provisioning agent (`Provisioning.Agent=waagent`, no bootstate): ovf-env.xml where it
 *       reads the provisioning media, cloud-init-local.service masked since WALinuxAgent refuses to provision while
 *       it is enabled; ifupdown brings eth0 up (WALinuxAgent restarts it to publish the hostname).
 *   (c) cloud-init's Azure datasource (no bootstate): ovf-env.xml in its seed directory, since ds-identify ignores
 *       the chassis asset tag and block devices in a container, and DMI read inside the container (cloudInitDmiLayer);
 *       cloud-init writes eth0's stanza itself.
 *   (d) no agent, the user and key baked in; ifupdown brings eth0 up.
 * The variants alternate; a variant whose login never comes is tried once and reported with what its agent said it
 * lacked. For bootstate and the baked image, the boot's critical path comes from PID 1's journal of each boot (the
 * milestones below, from its first entry): the firewall unit, ifupdown's DHCP, network-online.target, bootstate.service
 * from its start to READY=1, and sshd's start; bootstate's own step lines give each OS step's duration.
 *
 *   node --import tsx bench/peer-boot-time.ts      BENCH_BOOT_RUNS=N sets the repetitions (default 5)
 */
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ovfDocument } from '../src/fabric/ovf-document.js';
import { run } from '../src/system/exec.js';
import { startDhcpServer, type DhcpServer } from '../test/e2e/dhcp-server.js';
import { canSandbox } from '../test/e2e/ns.js';
import { createMachine, type Boot, type Machine, type MachineOptions } from '../test/boot/machine.js';
import { cloudInitDisabledLayer, cloudInitDmiLayer, WAAGENT_CONF, WAAGENT_UNIT, waagentLayer } from '../test/boot/peers.js';
import { bakeLayer, createRig, imdsDocument, mediaImage } from '../test/boot/scenario.js';
import { fmt, interleave, median, report } from './harness.js';

const RUNS = Number(process.env.BENCH_BOOT_RUNS ?? 5);
const USER = 'azureuser';
const LOGIN_WAIT_MS = 240_000;
// The VM's eth0 has the address IMDS lists for its interface: cloud-init fails its network stage otherwise.
const NIC_MAC = String((imdsDocument('').network as { interface: Array<{ macAddress: string }> }).interface[0]!.macAddress);

if (!canSandbox) {
  report('peer-boot-time', [{ metric: 'not run: needs root on Linux', median: Number.NaN, unit: 'ms' }]);
  process.exit(0);
}

const rig = await createRig();
let serial = 0;
const lacked: Record<string, string> = {};

type Variant = 'bootstate' | 'waagent' | 'cloud-init' | 'baked';
let layers: Record<Variant, string[]>;
let media: string;
try {
  const peers = await rig.withPackages(['cloud-init', 'ifupdown', 'waagent']);
  // What a Debian 12 image without cloud-init has (cloud-init writes the same stanza itself, 50-cloud-init).
  const eth0 = path.join(rig.workDir, 'eth0-dhcp');
  await mkdir(path.join(eth0, 'etc/network/interfaces.d'), { recursive: true });
  await writeFile(path.join(eth0, 'etc/network/interfaces.d/eth0'), 'auto eth0\niface eth0 inet dhcp\n');
  const cloudInitOff = await cloudInitDisabledLayer(rig);
  const supported = await waagentLayer(rig, 'bench');
  const provisioning = path.join(rig.workDir, 'waagent-provisions');
  await mkdir(path.join(provisioning, `etc/systemd/system/${WAAGENT_UNIT}.d`), { recursive: true });
  await writeFile(path.join(provisioning, 'etc/waagent.conf'), WAAGENT_CONF.replace('Provisioning.Agent=disabled', 'Provisioning.Agent=waagent'));
  await writeFile(path.join(provisioning, `etc/systemd/system/${WAAGENT_UNIT}.d/00-not-hyper-v.conf`), '[Unit]\nConditionVirtualization=\n');
  await symlink('/dev/null', path.join(provisioning, 'etc/systemd/system/cloud-init-local.service'));
  // The harness's media is an image file bound at /dev/sr0, which WALinuxAgent sees in `mount` and takes for a DVD
  // already mounted: it then reads the file from its mount point, so that is where the image's ovf-env.xml goes.
  await mkdir(path.join(provisioning, 'mnt/cdrom/secure'), { recursive: true });
  await writeFile(path.join(provisioning, 'mnt/cdrom/secure/ovf-env.xml'), ovfDocument({ username: USER, hostname: 'bench-vm', keys: [rig.publicKey] }));
  const seeded = path.join(rig.workDir, 'cloud-init-seed');
  await mkdir(path.join(seeded, 'var/lib/cloud/seed/azure'), { recursive: true });
  await writeFile(
    path.join(seeded, 'var/lib/cloud/seed/azure/ovf-env.xml'),
    ovfDocument({ username: USER, hostname: 'bench-vm', keys: [rig.publicKey] }),
  );
  const baked = await bakeLayer(
    rig,
    'peers-baked',
    [eth0, cloudInitOff, peers.debian],
    `useradd -m -s /bin/bash -U "$1"
install -d -m 0700 -o "$1" -g "$1" "/home/$1/.ssh"
printf '%s\\n' "$2" > "/home/$1/.ssh/authorized_keys"
chown "$1:$1" "/home/$1/.ssh/authorized_keys"
chmod 0600 "/home/$1/.ssh/authorized_keys"`,
    [USER, rig.publicKey],
  );
  layers = {
    bootstate: [eth0, cloudInitOff, supported, peers.debLayer, peers.debian],
    waagent: [eth0, cloudInitOff, provisioning, peers.debian],
    'cloud-init': [seeded, await cloudInitDmiLayer(rig, [peers.debian]), peers.debian],
    baked: [baked, eth0, cloudInitOff, peers.debian],
  };
  media = await mediaImage(rig.workDir, { username: USER, hostname: 'bench-vm', password: 'Bench-Horse-7!', key: rig.publicKey });
} catch (error) {
  await rig.cleanup();
  throw error;
}

/** What the agent of a variant said about why it did not provision (its log's last lines). */
async function whyNot(variant: Variant, boot: Boot): Promise<string> {
  const tail = async (argv: string[]) => (await boot.exec(argv)).stdout.trim().split('\n').slice(-15).join('\n');
  if (variant === 'waagent') return tail(['sh', '-c', "grep -v ' VERBOSE ' /var/log/waagent.log | grep -iE 'provision|ovf|error|fail|hostname|interface' | tail -n 8"]);
  if (variant === 'cloud-init') return tail(['sh', '-c', 'cloud-init status --long; grep -E "WARNING|ERROR|Traceback|Exception" /var/log/cloud-init.log | tail -n 12']);
  return tail(['journalctl', '--no-pager', '-q', '-b', '-u', 'bootstate.service', '-o', 'cat']);
}

/** systemd's catalogue ids: a unit's start job begins, and ends (Started/Finished/Reached target). */
const STARTING = '7d4958e842da4a758f6c1cdc7b36dcc5';
const DONE = '39f53479d3a045ac8e11786248231fbf';
/** The milestones read from each boot's journal: [name, unit, which message]. */
const MILESTONES: Array<[string, string, string]> = [
  ['firewall unit starts', 'bootstate-firewall.service', STARTING],
  ['firewall unit done', 'bootstate-firewall.service', DONE],
  ['ifupdown (DHCP) starts', 'networking.service', STARTING],
  ['ifupdown (DHCP) done: lease', 'networking.service', DONE],
  ['network-online.target', 'network-online.target', DONE],
  ['bootstate.service starts', 'bootstate.service', STARTING],
  ['bootstate.service READY=1', 'bootstate.service', DONE],
  ['sshd started', 'ssh.service', DONE],
];

/** Milliseconds from PID 1's first journal entry to each milestone (absent ones left out), and bootstate's step times. */
async function milestones(boot: Boot): Promise<Record<string, number>> {
  const read = async (args: string[]) =>
    (await boot.exec(['journalctl', '-b', '-o', 'json', ...args])).stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, string>);
  const pid1 = await read(['_PID=1']);
  const first = Number(pid1[0]?.__MONOTONIC_TIMESTAMP);
  const out: Record<string, number> = {};
  for (const [name, unit, id] of MILESTONES) {
    const entry = pid1.find((e) => e.UNIT === unit && e.MESSAGE_ID === id);
    if (entry) out[name] = (Number(entry.__MONOTONIC_TIMESTAMP) - first) / 1000;
  }
  // bootstate's own lines name each step and its duration (`step` … `ms`), whatever their layout.
  for (const entry of await read(['-u', 'bootstate.service'])) {
    const match = /"?step"?[=:]\s*"?([A-Za-z-]+)"?.*?"?ms"?[=:]\s*(\d+)/.exec(String(entry.MESSAGE));
    if (match) out[`step ${match[1]}`] = Number(match[2]);
  }
  return out;
}

/** One boot: the login (ms from nspawn's start) and its journal's milestones. */
interface Sample {
  login: number;
  marks: Record<string, number>;
}

/** Boots a fresh VM, polls SSH until a login runs `true`; null (and `lacked`) when it never does. */
async function bootToLogin(variant: Variant): Promise<Sample | null> {
  const options: MachineOptions = {
    name: `bspb${process.pid}x${serial++}`,
    workDir: rig.workDir,
    layers: layers[variant],
    fabric: variant !== 'baked',
    imdsDocument: imdsDocument(rig.publicKey),
    ...(variant === 'waagent' ? { media } : {}),
    // Every variant's DHCP client configures eth0.
    capabilities: ['CAP_NET_ADMIN'],
  };
  const machine: Machine = await createMachine(options);
  let dhcp: DhcpServer | null = null;
  try {
    dhcp = await startDhcpServer(machine.netns, `pb${serial}`, NIC_MAC);
    const boot = await machine.boot();
    const deadline = Date.now() + LOGIN_WAIT_MS;
    let loginMs: number | null = null;
    for (;;) {
      const attempt = await boot.ssh(rig.key, USER, 'true', 10_000, ['-o', 'ConnectTimeout=2']);
      if (attempt.exitCode === 0) {
        loginMs = performance.now() - boot.startedAt;
        break;
      }
      if (Date.now() > deadline) {
        lacked[variant] ??= `no SSH login within ${LOGIN_WAIT_MS / 1000} s; the agent said:\n${await whyNot(variant, boot)}`;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const marks = loginMs !== null && (variant === 'bootstate' || variant === 'baked') ? await milestones(boot) : {};
    await boot.shutdown();
    return loginMs === null ? null : { login: loginMs, marks };
  } finally {
    await dhcp?.stop();
    await machine.destroy();
  }
}

/**
 * The critical path of bootstate's boots and the baked image's, from their journals: each milestone's median (ms from
 * PID 1's first entry), each step's median duration, and the differences that say where the time goes.
 */
function criticalPath(samples: Record<Variant, Array<Sample | null>>) {
  const marks = (v: Variant) => samples[v].filter((s): s is Sample => s !== null).map((s) => s.marks);
  const at = (v: Variant, name: string) => {
    const values = marks(v).map((m) => m[name]).filter((x): x is number => x !== undefined);
    return values.length ? median(values) : Number.NaN;
  };
  const span = (v: Variant, from: string, to: string) => {
    const values = marks(v).flatMap((m) => (m[from] !== undefined && m[to] !== undefined ? [m[to]! - m[from]!] : []));
    return values.length ? median(values) : Number.NaN;
  };
  const rows: Array<{ metric: string; median: number; unit: string }> = [];
  for (const [name] of MILESTONES) {
    rows.push({ metric: `journal: ${name}, bootstate (ms from the journal's first entry)`, median: at('bootstate', name), unit: 'ms' });
    if (!name.startsWith('firewall') && !name.startsWith('bootstate')) {
      rows.push({ metric: `journal: ${name}, no agent, key baked in`, median: at('baked', name), unit: 'ms' });
    }
  }
  rows.push(
    { metric: 'critical path, bootstate: firewall unit (start → done)', median: span('bootstate', 'firewall unit starts', 'firewall unit done'), unit: 'ms' },
    { metric: 'critical path, bootstate: DHCP (ifupdown start → lease)', median: span('bootstate', 'ifupdown (DHCP) starts', 'ifupdown (DHCP) done: lease'), unit: 'ms' },
    { metric: 'critical path, bootstate: lease → bootstate.service starts', median: span('bootstate', 'ifupdown (DHCP) done: lease', 'bootstate.service starts'), unit: 'ms' },
    { metric: 'critical path, bootstate: bootstate.service start → READY=1', median: span('bootstate', 'bootstate.service starts', 'bootstate.service READY=1'), unit: 'ms' },
    { metric: 'critical path, bootstate: READY=1 → sshd started', median: span('bootstate', 'bootstate.service READY=1', 'sshd started'), unit: 'ms' },
    { metric: 'critical path, no agent: DHCP (ifupdown start → lease)', median: span('baked', 'ifupdown (DHCP) starts', 'ifupdown (DHCP) done: lease'), unit: 'ms' },
  );
  const steps = [...new Set(marks('bootstate').flatMap((m) => Object.keys(m).filter((k) => k.startsWith('step '))))].sort();
  for (const step of steps) rows.push({ metric: `bootstate's ${step} (its own log line, ms)`, median: at('bootstate', step), unit: 'ms' });
  return rows;
}

const loadBefore = loadavg()[0]!;
try {
  // A variant that cannot provision here is tried once, not RUNS times.
  const samples = await interleave(
    {
      bootstate: () => bootToLogin('bootstate'),
      waagent: () => (lacked.waagent ? Promise.resolve(null) : bootToLogin('waagent')),
      'cloud-init': () => (lacked['cloud-init'] ? Promise.resolve(null) : bootToLogin('cloud-init')),
      baked: () => bootToLogin('baked'),
    },
    RUNS,
  );
  const loadAfter = loadavg()[0]!;
  const load = `1-min load ${fmt(loadBefore)} before, ${fmt(loadAfter)} after, on ${(await run(['nproc'])).stdout.trim()} cores`;
  const ok = (v: Variant) => samples[v]!.filter((s): s is Sample => s !== null).map((s) => s.login);
  const floor = median(ok('baked'));
  const row = (variant: Variant, what: string, readme: string) => {
    const values = ok(variant);
    if (values.length === 0) {
      return { metric: `${what}: did not provision in the harness`, median: Number.NaN, unit: 'ms', note: lacked[variant]?.split('\n').slice(0, 6).join(' ⏎ '), readme };
    }
    return { metric: what, median: median(values), unit: 'ms', floor, floorName: 'same root, key baked in, no agent', ratio: median(values) / floor, note: load, readme };
  };
  for (const [variant, why] of Object.entries(lacked)) process.stderr.write(`${variant}: ${why}\n`);
  report('peer-boot-time', [
    row('bootstate', 'nspawn start → first SSH login, bootstate (IMDS; WALinuxAgent gated for extensions, cloud-init off)', 'bootstate'),
    row('waagent', 'nspawn start → first SSH login, WALinuxAgent 2.7.3 provisioning (ovf-env.xml on the media)', 'WALinuxAgent 2.7.3'),
    row('cloud-init', 'nspawn start → first SSH login, cloud-init 22.4.2 Azure datasource (ovf-env.xml seeded)', 'cloud-init 22.4.2'),
    { metric: 'nspawn start → first SSH login, no agent, key baked in', median: floor, unit: 'ms', note: load, readme: 'no agent, key baked into the image' },
    ...criticalPath(samples as Record<Variant, Array<Sample | null>>),
  ], RUNS);
} finally {
  await rig.cleanup();
}
