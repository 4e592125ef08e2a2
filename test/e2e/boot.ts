/**
 * One simulated Azure VM for the e2e suite: a network namespace where the fake fabric (test/fabric/serve.ts)
 * listens on the real link-local addresses, a sandbox (ns.ts) that is the VM's disk, and `boot()`, which runs
 * `node dist/bootstate.mjs` with no config file and no endpoint overrides inside both. Argument vectors of the
 * system commands the agent runs are recorded through PATH shims, and the UTS hostname is captured right after
 * the agent exits, in the same namespace.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { RecordedRequest } from '../../src/fabric/behaviours.js';
import { run } from '../../src/system/exec.js';
import { createNetns, createSandbox, REPO, runInSandbox, type Netns, type Sandbox, type SandboxOptions } from './ns.js';
import { decodeReport } from '../../src/azure/report.js';

export const AGENT = path.join(REPO, 'dist/bootstate.mjs');
const SERVE = path.join(REPO, 'test/fabric/serve.ts');

/** Commands whose argv the shims record (everything the OS backend and the media reader may run). */
const SHIMMED = [
  'useradd', 'usermod', 'groupadd', 'passwd', 'chpasswd', 'hostname', 'hostnamectl', 'sshd', 'visudo', 'systemctl',
  'blkid', 'mount', 'umount', 'getent', 'id',
];

// Appends "$0 args…" NUL-separated, one record per line, then runs the real command from PATH minus this dir. The
// record is one printf, so one append: commands the agent runs at the same time must not interleave their records.
const SHIM = `#!/bin/sh
me=$(basename "$0"); dir=$(dirname "$0")
format='%s'; for a in "$@"; do format="$format\\\\0%s"; done
printf "$format\\\\n" "$me" "$@" >> "$dir/../argv.log"
# A test makes the media read slow (so IMDS answers first) by writing the seconds to wait into mount-delay.
if [ "$me" = mount ] && [ -e "$dir/../mount-delay" ]; then sleep "$(cat "$dir/../mount-delay")"; fi
IFS=:; for p in $PATH; do
  [ "$p" = "$dir" ] && continue
  if [ -x "$p/$me" ]; then unset IFS; exec "$p/$me" "$@"; fi
done
echo "shim: $me not found" >&2; exit 127
`;

export interface BootResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  /** The kernel hostname inside the VM's UTS namespace right after the agent exited. */
  utsHostname: string;
  ms: number;
}

export interface VmOptions extends SandboxOptions {
  /** Fabric scenario from src/fabric/scenarios.ts. */
  scenario?: string;
  /** Every IMDS answer waits this long first (so the provisioning media is read before IMDS answers). */
  imdsDelayMs?: number;
  /** The IMDS document to serve instead of the scenario's. */
  imdsDocument?: unknown;
  /** PEM of the goal state's certificates (each certificate, then its private key if the VM gets it). */
  certificates?: string;
  /**
   * The fabric runs in this namespace (one with Azure's addresses, ns.ts's createNetns) instead of the VM's, whose
   * loopback then loses them: the VM reaches the fabric only through a NIC the test cables between the two.
   */
  fabricNetns?: string;
  /** A pool VM is claimed once this host file exists (serve.ts --claim-when). */
  claimWhen?: string;
}

export interface Vm {
  name: string;
  sandbox: Sandbox;
  netns: Netns;
  /**
   * Runs the agent once, as a boot of this VM would (with `args`, e.g. a dry run). With `terminateWhen` (a shell
   * condition evaluated inside the VM), the agent gets SIGTERM once the condition holds, as a shutdown would send it.
   * `env` adds to the agent's environment (e.g. NOTIFY_SOCKET, as systemd gives a Type=notify unit). `signal`: KILL
   * instead of TERM, a crash rather than a shutdown.
   */
  boot(args?: string[], options?: { terminateWhen?: string; env?: NodeJS.ProcessEnv; signal?: 'TERM' | 'KILL' }): Promise<BootResult>;
  /** Every request the fabric received so far, in arrival order. */
  requests(): Promise<RecordedRequest[]>;
  /** `state` or `state/subStatus` of each health report so far. */
  reportKinds(): Promise<string[]>;
  /** Argument vectors of shimmed commands the agent ran, e.g. `[['passwd', '-l', 'azureuser'], …]`. */
  commands(): Promise<string[][]>;
  /** Stops the fabric and removes the network namespace (the sandbox tree stays for assertions). */
  shutdown(): Promise<void>;
}

/** Creates the VM: sandbox, namespace, fabric (waits until it listens). Undoes what it did if a step fails. */
export async function createVm(name: string, options: VmOptions = {}): Promise<Vm> {
  if (!existsSync(AGENT)) throw new Error(`${AGENT} is missing: build it first (npm test builds it)`);
  const sandbox = await createSandbox(options);
  let netns: Netns | null = null;
  let fabric: ChildProcess | null = null;
  const record = path.join(sandbox.root, 'fabric-requests.jsonl');
  const shims = path.join(sandbox.root, 'e2e-bin');
  try {
    await writeFile(record, '');
    await mkdir(shims);
    for (const command of SHIMMED) {
      await writeFile(path.join(shims, command), SHIM);
      await chmod(path.join(shims, command), 0o755);
    }
    netns = await createNetns(name);
    const imdsDoc = options.imdsDocument === undefined ? undefined : path.join(sandbox.root, 'imds-document.json');
    if (imdsDoc) await writeFile(imdsDoc, JSON.stringify(options.imdsDocument));
    const certificates = options.certificates === undefined ? undefined : path.join(sandbox.root, 'fabric-certificates.pem');
    if (certificates) await writeFile(certificates, options.certificates!, { mode: 0o600 });
    if (options.fabricNetns) {
      for (const address of ['169.254.169.254/32', '168.63.129.16/32']) await run(['ip', '-n', netns.name, 'addr', 'del', address, 'dev', 'lo']);
    }
    fabric = await startFabric(options.fabricNetns ?? netns.name, options.scenario ?? 'happy', record, imdsDoc, options.imdsDelayMs, {
      certificates,
      claimWhen: options.claimWhen,
    });
  } catch (error) {
    fabric?.kill('SIGKILL');
    await netns?.delete();
    await sandbox.cleanup();
    throw error;
  }
  const ns = netns;
  const server = fabric;

  const requests = () => readRecordedRequests(record);

  return {
    name,
    sandbox,
    netns: ns,
    requests,
    async reportKinds() {
      return reportKindsOf(await requests());
    },
    async commands() {
      const text = await readFile(path.join(sandbox.root, 'argv.log'), 'utf8').catch(() => '');
      return text.split('\n').filter(Boolean).map((line) => line.split('\0'));
    },
    async boot(args: string[] = [], bootOptions: { terminateWhen?: string; env?: NodeJS.ProcessEnv; signal?: 'TERM' | 'KILL' } = {}) {
      const started = performance.now();
      const script = bootOptions.terminateWhen
        ? `PATH="$E2E_SHIMS:$PATH" "$@" & pid=$!; until ${bootOptions.terminateWhen}; do sleep 0.05; done; kill -${bootOptions.signal ?? 'TERM'} $pid; wait $pid; rc=$?; hostname > /run/.e2e-uts-hostname; exit $rc`
        : 'PATH="$E2E_SHIMS:$PATH" "$@"; rc=$?; hostname > /run/.e2e-uts-hostname; exit $rc';
      const result = await runInSandbox(
        sandbox,
        // The shims go first in PATH for the agent only, not for the harness's own mount and hostname calls.
        ['sh', '-c', script, 'boot', process.execPath, AGENT, ...args],
        {
          netns: ns.name,
          timeoutMs: 120_000,
          env: {
            E2E_SHIMS: shims, BOOTSTATE_CONFIG: undefined, BOOTSTATE_USER_GROUPS: undefined, BOOTSTATE_LOG: undefined,
            // Never the socket of whatever started the test run; a test gives its own receiver's in `env`.
            NOTIFY_SOCKET: undefined,
            ...bootOptions.env,
          },
        },
      );
      const uts = await readFile(sandbox.hostPath('/run/.e2e-uts-hostname'), 'utf8').catch(() => '');
      return { exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr, utsHostname: uts.trim(), ms: performance.now() - started };
    },
    async shutdown() {
      await stopProcess(server);
      await ns.delete();
    },
  };
}

/**
 * Starts serve.ts inside `netns` on 169.254.169.254:80 and 168.63.129.16:80/32526; resolves once it listens.
 * `imdsDoc` is a file with the IMDS document to serve instead of the scenario's.
 */
export async function startFabric(
  netns: string,
  scenario: string,
  record: string,
  imdsDoc?: string,
  imdsDelayMs?: number,
  options: { healthUnavailableWhile?: string; certificates?: string; claimWhen?: string } = {},
): Promise<ChildProcess> {
  const argv = [
    'ip', 'netns', 'exec', netns, process.execPath, '--import', 'tsx', SERVE,
    '--imds', '169.254.169.254:80', '--wireserver', '168.63.129.16:80', '--host-plugin', '168.63.129.16:32526',
    '--record', record, '--scenario', scenario, ...(imdsDoc ? ['--imds-doc', imdsDoc] : []),
    ...(imdsDelayMs ? ['--imds-delay-ms', String(imdsDelayMs)] : []),
    ...(options.healthUnavailableWhile ? ['--health-unavailable-while', options.healthUnavailableWhile] : []),
    ...(options.certificates ? ['--certificates', options.certificates] : []),
    ...(options.claimWhen ? ['--claim-when', options.claimWhen] : []),
  ];
  const child = spawn(argv[0]!, argv.slice(1), { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`fake fabric in ${netns} did not start within 30 s: ${stderr}`)), 30_000);
    const fail = (error: Error) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(error);
    };
    child.stdout!.on('data', (d) => {
      stdout += d;
      if (/"ready":true/.test(stdout)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => fail(new Error(`fake fabric in ${netns} exited with ${code}: ${stderr}`)));
    child.once('error', fail);
  });
  return child;
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

/**
 * Attaches `image` read-only to a free loop device and shows it to `sandbox` alone (an entry in its
 * /sys/class/block, see ns.ts); returns its path and a detach function.
 */
export async function attachLoop(image: string, sandbox: Sandbox): Promise<{ device: string; detach(): Promise<void> }> {
  const result = await run(['losetup', '--find', '--show', '--read-only', image]);
  const device = result.stdout.trim();
  const entry = sandbox.hostPath(`/sys/class/block/${path.basename(device)}`);
  await symlink(realpathSync(`/sys/class/block/${path.basename(device)}`), entry);
  return {
    device,
    detach: async () => {
      await rm(entry, { force: true });
      await run(['losetup', '-d', device], { allowFailure: true });
    },
  };
}

/**
 * Writes `ovf` as ovf-env.xml on an ISO 9660 image labelled as Azure's provisioning media, attaches it to a loop
 * device only `vm` sees, runs `use`, and detaches it again.
 */
export async function withMedia<T>(vm: Vm, ovf: string, use: (device: string) => Promise<T>): Promise<T> {
  const content = path.join(vm.sandbox.root, 'media-content');
  await mkdir(content, { recursive: true });
  await writeFile(path.join(content, 'ovf-env.xml'), ovf);
  const iso = path.join(vm.sandbox.root, 'ovf.iso');
  await run(['xorriso', '-as', 'mkisofs', '-quiet', '-V', 'rd_rdfe_stable', '-o', iso, content]);
  const loop = await attachLoop(iso, vm.sandbox);
  try {
    return await use(loop.device);
  } finally {
    await loop.detach();
  }
}

/** Where a VM's command shims live: an executable written here is in the agent's PATH, before the system's. */
export const shimDir = (vm: Vm) => path.join(vm.sandbox.root, 'e2e-bin');

/** Loop devices and their backing files, e.g. `['/dev/loop0 /tmp/x/ovf.iso']`. */
export async function loopDevices(): Promise<string[]> {
  const result = await run(['losetup', '--list', '--noheadings', '--output', 'NAME,BACK-FILE'], { allowFailure: true });
  return result.stdout.split('\n').map((l) => l.trim().replace(/\s+/g, ' ')).filter(Boolean);
}

/** Network namespace names. */
export async function netnsNames(): Promise<string[]> {
  const result = await run(['ip', 'netns', 'list'], { allowFailure: true });
  return result.stdout.split('\n').map((l) => l.split(' ')[0]!).filter(Boolean);
}

/** Mount points of this (the host's) mount namespace. */
export async function mountPoints(): Promise<string[]> {
  return (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter(Boolean).map((l) => l.split(' ')[4]!).sort();
}

/** Verifies `password` against a crypt(3) hash with perl's crypt (libcrypt: yescrypt, SHA-512, …), via stdin. */
export async function cryptMatches(password: string, hash: string): Promise<boolean> {
  const result = await run(['perl', '-e', 'my $h = shift; my $p = <STDIN>; chomp $p; print crypt($p, $h) eq $h ? "match" : "mismatch"', hash], {
    stdin: Buffer.from(`${password}\n`),
  });
  return result.stdout === 'match';
}

/**
 * Creates a VM (added to `keep`, the suite's list for its cleanup), lets `use` boot it, and always stops its fabric
 * and namespace; the sandbox stays for the tests.
 */
export async function withVm<T>(keep: Vm[], name: string, options: VmOptions, use: (vm: Vm) => Promise<T>): Promise<T> {
  const vm = await createVm(name, options);
  keep.push(vm);
  try {
    return await use(vm);
  } finally {
    await vm.shutdown();
  }
}

/** A file of the VM's root, as text. */
export const vmFile = (vm: Vm, p: string): Promise<string> => readFile(vm.sandbox.hostPath(p), 'utf8');

/** The requests a fake fabric started by `startFabric` recorded, one JSON line each, in arrival order. */
export async function readRecordedRequests(record: string): Promise<RecordedRequest[]> {
  return (await readFile(record, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as RecordedRequest);
}

/** The health reports among `requests`, as `Ready` or `NotReady/<subStatus>`, in the order the fabric got them. */
export function reportKindsOf(requests: RecordedRequest[]): string[] {
  return requests
    .filter((r) => r.route === 'health')
    .map((r) => JSON.parse(r.body) as { state: string; details?: { subStatus?: string } })
    .map((b) => (b.details?.subStatus ? `${b.state}/${b.details.subStatus}` : b.state));
}

/** The decoded description of the last ProvisioningFailed report the fabric received. */
export async function lastFailure(vm: Vm): Promise<Map<string, string>> {
  const failed = (await vm.requests())
    .filter((r) => r.route === 'health')
    .map((r) => JSON.parse(r.body) as { details?: { subStatus?: string; description?: string } })
    .filter((b) => b.details?.subStatus === 'ProvisioningFailed');
  return new Map(decodeReport(failed.at(-1)?.details?.description ?? ''));
}
