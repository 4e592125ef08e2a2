/**
 * One Azure VM made of a real Debian boot: systemd-nspawn boots the cached Debian root (plus read-only layers such
 * as the one the .deb was installed into) under an overlay whose upper directory is this VM's disk, with systemd
 * as PID 1, inside a network namespace of its own where the fake fabric listens on 169.254.169.254:80 and
 * 168.63.129.16:80. Nothing reaches the real fabric: the container has no other network than that namespace.
 *
 * nspawn runs in a private mount namespace that puts /run/systemd/nspawn on a tmpfs (it will not use a disk
 * there) and mounts the overlay, with --register=no --keep-unit because the host has no system bus. Commands
 * run inside a booted container through nsenter on its PID 1; SSH runs from the namespace like a client would.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import path from 'node:path';
import type { RecordedRequest } from '../../src/fabric/behaviours.js';
import { run, type RunResult } from '../../src/system/exec.js';
import { AZURE_CHASSIS_ASSET_TAG } from '../../src/azure/platform.js';
import { readRecordedRequests, reportKindsOf, startFabric, stopProcess } from '../e2e/boot.js';
import { createNetns, type Netns } from '../e2e/ns.js';

export interface MachineOptions {
  /** Unique on this host: names the network namespace, the container and the work directory. */
  name: string;
  /** Parent of the VM's directory. */
  workDir: string;
  /** Read-only directories stacked under the VM's disk, topmost first (the Debian root last). */
  layers: string[];
  /** Fabric scenario (src/fabric/scenarios.ts); default `happy`. */
  scenario?: string;
  /** The IMDS document the fabric serves instead of the scenario's. */
  imdsDocument?: unknown;
  /** Without it the VM runs no fabric at all (the no-agent boot of the benchmark). */
  fabric?: boolean;
  /** SMBIOS system UUID the VM sees in /sys/class/dmi/id/product_uuid. */
  productUuid?: string;
  /** The DMI chassis asset tag; default Azure's. An empty string stands for a machine that is not an Azure VM. */
  chassisAssetTag?: string;
  /** An image file the container sees as its DVD drive, /dev/sr0 (Azure's provisioning media). */
  media?: string;
  /** Capabilities the container keeps beyond nspawn's default set, e.g. CAP_NET_ADMIN for systemd-networkd. */
  capabilities?: string[];
  /**
   * The kernel's log, read-only, as the VM's /dev/kmsg (with CAP_SYSLOG to read it under kernel.dmesg_restrict): the
   * container shares the host's kernel, so this is the log of the kernel it really runs on. nspawn gives it none.
   */
  kernelLog?: boolean;
  /** A host file: while it exists the fabric answers every health POST with 503 (remove it to let reports in). */
  healthUnavailableWhile?: string;
  /**
   * A host block device (a loop device) the container sees as `/dev/<name>` and, in its /sys/class/block, as LUN 1 of
   * SCSI controller 0 on Azure's VMBus: a Gen2 VM's temporary disk. No udev runs in the container, so it gets no
   * /dev/disk/azure link, and partitions the kernel makes on it appear only in the host's /dev.
   */
  temporaryDisk?: { device: string; name: string };
  /**
   * The root is another architecture's (arm64), run under qemu-user through binfmt_misc (test/boot/emulation.ts).
   * qemu remaps real-time signals, so nspawn's halt signal (SIGRTMIN+4) reaches the emulated systemd as another one
   * (rescue mode): such a VM is powered off from inside, with `systemctl poweroff`, and given longer to stop.
   */
  emulated?: boolean;
}

/** Azure's VMBus device id of SCSI controller 0 on a Gen2 VM. */
const GEN2_SCSI0 = 'f8b3781a-1e82-4818-a1c3-63d806ec15bb';

export interface Machine {
  name: string;
  netns: string;
  /** Host path of a path on this VM's disk as its boots left it (the overlay's upper directory). */
  diskPath(p: string): string;
  /** Boots the VM; resolves once systemd runs as the container's PID 1. */
  boot(): Promise<Boot>;
  /** Every request the fabric received, in arrival order. */
  requests(): Promise<RecordedRequest[]>;
  /** `state` or `state/subStatus` of each health report so far. */
  reportKinds(): Promise<string[]>;
  /** From now on the fabric serves `doc` as the IMDS document (it restarts; between boots, e.g. a NIC added in Azure). */
  serveImdsDocument(doc: unknown): Promise<void>;
  /** Stops the fabric, removes the namespace and the VM's directory. */
  destroy(): Promise<void>;
}

export interface Boot {
  /** The container's PID 1, as the host sees it. */
  pid: number;
  /** performance.now() just before systemd-nspawn was started. */
  startedAt: number;
  /** Runs `argv` inside the container (all its namespaces); never throws on a non-zero exit. */
  exec(argv: string[], timeoutMs?: number): Promise<RunResult>;
  /** `systemctl is-system-running --wait`: `running`, or `degraded` when a unit failed. */
  settled(): Promise<string>;
  /** Runs `command` over SSH from inside the VM's network namespace as `user` with the private key `key`. */
  ssh(key: string, user: string, command: string, timeoutMs?: number, extraOptions?: string[]): Promise<RunResult>;
  /** What the container printed on its console so far. */
  console(): string;
  /** Powers the container off (SIGTERM to nspawn) and returns what it printed on its console. */
  shutdown(): Promise<string>;
}

// LogLevel=VERBOSE: at ERROR, ssh exits 255 without a word when sshd closes the connection or the handshake times out,
// which left a failed login under load unexplained. ConnectTimeout also bounds the banner exchange, which sshd answers
// only after it re-executes itself, and a 2-core machine booting four VMs beside the rest of the suite can take longer
// than 5 s for that.
const SSH_OPTIONS = [
  '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=VERBOSE',
  '-o', 'ConnectTimeout=30', '-o', 'IdentitiesOnly=yes',
];

// The arguments arrive as positional parameters: $1 lower dirs, $2 upper, $3 work, $4 mount point, $5 the VM's
// network namespace, $6 the layers of /sys/class over the kernel's, $7 a directory for a sysfs and $8 the merged
// /sys/class, then nspawn's. The sysfs is mounted from inside the VM's network namespace, so its class/net lists
// the VM's own interfaces, as the kernel shows them to a VM.
const ENTER = `set -eu
mkdir -p /run/systemd/nspawn
mount -t tmpfs -o mode=0755 tmpfs /run/systemd/nspawn
mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4"
nsenter --net="/run/netns/$5" mount -t sysfs sysfs "$7"
mount -t overlay overlay -o "lowerdir=$6:$7/class" "$8"
shift 8
for cgroup in $VM_CGROUPS; do echo $$ > "$cgroup/cgroup.procs"; done
exec systemd-nspawn "$@"`;

/**
 * A cgroup of this VM's own in each hierarchy systemd uses (the unified one, and name=systemd on a hybrid host),
 * made under the caller's. nspawn --keep-unit puts the container in `payload` beside itself, under the cgroup it
 * starts in: VMs booted at once from one cgroup would share one payload, and each one's systemd would manage and
 * kill the others' units (status=219/CGROUP, "Failed to kill control group").
 */
async function ownCgroups(name: string): Promise<string[]> {
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((line) => {
    const [left = '', right = ''] = line.split(' - ');
    const fields = left.split(' ');
    const [type = '', , options = ''] = right.split(' ');
    return { root: fields[3] ?? '', point: fields[4] ?? '', type, options: options.split(',') };
  });
  const dirs: string[] = [];
  for (const line of (await readFile('/proc/self/cgroup', 'utf8')).split('\n').filter(Boolean)) {
    const [, controllers, own = ''] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
    const mount = mounts.find((m) =>
      controllers === '' ? m.type === 'cgroup2' : controllers === 'name=systemd' && m.type === 'cgroup' && m.options.includes('name=systemd'),
    );
    if (!mount) continue;
    const relative = mount.root === '/' ? own : own.slice(mount.root.length);
    dirs.push(path.join(mount.point, relative, `bootstate-vm-${name}`));
  }
  for (const dir of dirs) await mkdir(dir, { recursive: true });
  return dirs;
}

/** Removes a VM's cgroups and what its systemd left in them, deepest first; a busy one stays. */
async function removeCgroups(dirs: string[]): Promise<void> {
  for (const dir of dirs) await run(['find', dir, '-depth', '-type', 'd', '-exec', 'rmdir', '{}', ';'], { allowFailure: true });
}

export async function createMachine(options: MachineOptions): Promise<Machine> {
  const dir = path.join(options.workDir, options.name);
  const upper = path.join(dir, 'upper');
  const work = path.join(dir, 'work');
  const mountPoint = path.join(dir, 'root');
  const record = path.join(dir, 'fabric-requests.jsonl');
  // The VM's /sys/class is the kernel's, seen from the VM's network namespace, under two layers: `sys-class` with
  // the DMI identity (and the temporary disk), over `sys-hidden`, whose whiteout hides the host's block devices
  // (the VM's are its bound image files, which the kernel lists nowhere).
  const sysClass = path.join(dir, 'sys-class');
  const sysHidden = path.join(dir, 'sys-hidden');
  const sysfs = path.join(dir, 'sysfs');
  const sysMerged = path.join(dir, 'sys-class-merged');
  for (const d of [upper, work, mountPoint, path.join(sysClass, 'dmi/id'), sysHidden, sysfs, sysMerged]) await mkdir(d, { recursive: true });
  await run(['mknod', path.join(sysHidden, 'block'), 'c', '0', '0']);
  await writeFile(record, '');
  await writeFile(path.join(sysClass, 'dmi/id/product_uuid'), `${options.productUuid ?? '7C1E5D1A-0B4F-4C43-9C3E-5D2A8F9B1E60'}\n`, { mode: 0o444 });
  await writeFile(path.join(sysClass, 'dmi/id/chassis_asset_tag'), `${options.chassisAssetTag ?? AZURE_CHASSIS_ASSET_TAG}\n`, { mode: 0o444 });
  if (options.temporaryDisk) {
    // Inside the container this tree is /sys/class: the relative link resolves within it.
    const scsi = path.join(sysClass, 'azure-vmbus', GEN2_SCSI0, 'host0/target0:0:0/0:0:0:1');
    const { name } = options.temporaryDisk;
    await mkdir(path.join(scsi, 'block', name), { recursive: true });
    await mkdir(path.join(sysClass, 'block'), { recursive: true });
    await writeFile(path.join(sysClass, 'azure-vmbus', GEN2_SCSI0, 'device_id'), `{${GEN2_SCSI0}}\n`);
    await writeFile(path.join(scsi, 'vendor'), 'Msft    \n');
    await writeFile(path.join(scsi, 'model'), 'Virtual Disk    \n');
    await symlink(path.relative(path.join(sysClass, 'block'), path.join(scsi, 'block', name)), path.join(sysClass, 'block', name));
  }

  let netns: Netns | null = null;
  let fabric: ChildProcess | null = null;
  const imdsFile = path.join(dir, 'imds-document.json');
  const startMachineFabric = async (ns: string, imdsDocument: unknown) => {
    if (imdsDocument !== undefined) await writeFile(imdsFile, JSON.stringify(imdsDocument));
    const doc = imdsDocument === undefined ? undefined : imdsFile;
    return startFabric(ns, options.scenario ?? 'happy', record, doc, undefined, { healthUnavailableWhile: options.healthUnavailableWhile });
  };
  try {
    netns = await createNetns(options.name);
    // An Azure VM's main routing table has a route to the wireserver; WALinuxAgent takes one as the wireserver's
    // address and otherwise runs a DHCP exchange of its own, which nothing in the namespace would answer.
    await run(['ip', '-n', netns.name, 'route', 'add', '168.63.129.16/32', 'dev', 'lo']);
    if (options.fabric !== false) fabric = await startMachineFabric(netns.name, options.imdsDocument);
  } catch (error) {
    fabric?.kill('SIGKILL');
    await netns?.delete();
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  const ns = netns;
  const running = new Set<Boot>();

  const requests = () => readRecordedRequests(record);

  return {
    name: options.name,
    netns: ns.name,
    diskPath: (p) => path.join(upper, path.posix.normalize(`/${p}`)),
    requests,
    async reportKinds() {
      return reportKindsOf(await requests());
    },
    async boot() {
      const capabilities = [...(options.capabilities ?? []), ...(options.kernelLog ? ['CAP_SYSLOG'] : [])];
      const nspawn = [
        '--boot', '--register=no', '--keep-unit', `--machine=${options.name}`, `--network-namespace-path=/run/netns/${ns.name}`,
        '--directory', mountPoint, '--console=pipe', `--bind-ro=${sysMerged}:/sys/class`,
        // Where class/net's links lead: the container's own sysfs lists no interface there.
        `--bind-ro=${sysfs}/devices/virtual/net:/sys/devices/virtual/net`,
        ...(options.media ? [`--bind-ro=${options.media}:/dev/sr0`] : []),
        ...(options.temporaryDisk ? [`--bind=${options.temporaryDisk.device}:/dev/${options.temporaryDisk.name}`] : []),
        ...(options.kernelLog ? ['--bind-ro=/dev/kmsg'] : []),
        ...(capabilities.length ? [`--capability=${capabilities.join(',')}`] : []),
      ];
      const cgroups = await ownCgroups(options.name);
      const startedAt = performance.now();
      const child = spawn(
        'unshare',
        [
          '--mount', '--propagation', 'private', 'sh', '-c', ENTER, 'boot', options.layers.join(':'), upper, work, mountPoint, ns.name,
          `${sysClass}:${sysHidden}`, sysfs, sysMerged, ...nspawn,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SYSTEMD_NSPAWN_UNIFIED_HIERARCHY: '1', VM_CGROUPS: cgroups.join(' ') } },
      );
      let console = '';
      child.stdout!.on('data', (d) => (console += d));
      child.stderr!.on('data', (d) => (console += d));
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      const pid = await containerInit(child, () => console);
      const boot: Boot = {
        pid,
        startedAt,
        // Journals run past run()'s default 64 KiB output cap; a truncated one would hide what the tests look for.
        exec: (argv, timeoutMs = 60_000) =>
          run(['nsenter', '-t', String(pid), '-a', ...argv], { timeoutMs, allowFailure: true, maxOutputBytes: 64 * 1024 * 1024 }),
        async settled() {
          // Until systemd opens its private socket, systemctl cannot ask it and prints nothing.
          const deadline = Date.now() + 120_000;
          for (;;) {
            const result = await boot.exec(['systemctl', 'is-system-running', '--wait'], 120_000);
            const state = result.stdout.trim();
            if (state && state !== 'offline') return state;
            if (Date.now() > deadline) throw new Error(`systemctl is-system-running: ${result.stderr.trim()}\n${console}`);
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
        },
        ssh: (key, user, command, timeoutMs = 60_000, extraOptions = []) =>
          // The extra options first: ssh takes the first value it is given for an option.
          run(['nsenter', `--net=/run/netns/${ns.name}`, 'ssh', ...extraOptions, ...SSH_OPTIONS, '-i', key, `${user}@127.0.0.1`, command], {
            timeoutMs,
            allowFailure: true,
          }),
        console: () => console,
        async shutdown() {
          running.delete(boot);
          if (child.exitCode === null && child.signalCode === null) {
            if (options.emulated) await boot.exec(['systemctl', 'poweroff', '--no-block']);
            else child.kill('SIGTERM');
            const timer = setTimeout(() => child.kill('SIGKILL'), options.emulated ? 120_000 : 30_000);
            await exited;
            clearTimeout(timer);
          }
          await removeCgroups(cgroups);
          return console;
        },
      };
      running.add(boot);
      return boot;
    },
    async serveImdsDocument(doc) {
      if (fabric) await stopProcess(fabric);
      fabric = await startMachineFabric(ns.name, doc);
    },
    async destroy() {
      for (const boot of running) await boot.shutdown();
      if (fabric) await stopProcess(fabric);
      await ns.delete();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Waits for systemd-nspawn's child to become `systemd` (the container's PID 1); throws if nspawn exits first. */
async function containerInit(nspawn: ChildProcess, output: () => string): Promise<number> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (nspawn.exitCode !== null || nspawn.signalCode !== null) {
      throw new Error(`systemd-nspawn exited (${nspawn.exitCode ?? nspawn.signalCode}) before the container booted:\n${output()}`);
    }
    const children = await readFile(`/proc/${nspawn.pid}/task/${nspawn.pid}/children`, 'utf8').catch(() => '');
    for (const child of children.split(' ').filter(Boolean)) {
      const comm = await readFile(`/proc/${child}/comm`, 'utf8').catch(() => '');
      if (comm.trim() === 'systemd') return Number(child);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  nspawn.kill('SIGKILL');
  throw new Error(`no systemd inside the container within 60 s:\n${output()}`);
}

/** Every journal entry of the container's boots as JSON objects, read inside the running container. */
export async function journal(boot: Boot, args: string[]): Promise<Array<Record<string, string>>> {
  const result = await boot.exec(['journalctl', '--no-pager', '-o', 'json', ...args]);
  if (result.exitCode !== 0) throw new Error(`journalctl ${args.join(' ')} failed: ${result.stderr}`);
  return result.stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, string>);
}

/**
 * Waits for bootstate's process to end: the system is running once the unit says READY=1, and the agent goes on
 * (host keys made in the background, the Ready report) for a moment after that.
 */
export async function agentEnded(boot: Boot): Promise<void> {
  for (const until = Date.now() + 180_000; Date.now() < until; ) {
    const state = (await boot.exec(['systemctl', 'show', 'bootstate.service', '-p', 'SubState', '--value'])).stdout.trim();
    if (state !== 'running' && state !== 'start') return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Polls `probe` every `everyMs` until it returns a value; throws with `story()` after `timeoutMs`. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | null>,
  timeoutMs: number,
  story: () => Promise<string>,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s\n${await story()}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** `systemctl show UNIT -p …` inside the VM, as an object (a value may itself hold `=`). */
export async function show(boot: Boot, unit: string, props: string[]): Promise<Record<string, string>> {
  const result = await boot.exec(['systemctl', 'show', unit, ...props.flatMap((p) => ['-p', p])]);
  return Object.fromEntries(result.stdout.trim().split('\n').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
}
