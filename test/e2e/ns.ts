/**
 * The namespace harness for e2e tests. A sandbox is a temp tree with its own /etc, /home, /var/lib, /var/log,
 * /run and a fake product_uuid; `runInSandbox` runs a command in fresh mount + UTS namespaces (optionally inside
 * a network namespace) with that tree bind-mounted over the real paths (/root too: nothing a test runs may write the
 * host's own home of root), so real useradd, passwd, chpasswd,
 * hostname and sshd act on the temp tree and the host is untouched. As root on Linux a missing namespace
 * facility throws: these tests fail loudly rather than skip.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { run, type RunResult } from '../../src/system/exec.js';
import { AZURE_CHASSIS_ASSET_TAG } from '../../src/azure/platform.js';


/** True when this process can build sandboxes (root on Linux); elsewhere e2e suites skip. */
export const canSandbox = process.platform === 'linux' && process.getuid?.() === 0;

export interface Sandbox {
  /** The temp tree that becomes `/etc`, `/home`, … inside the namespaces. */
  root: string;
  /** Host path of a sandbox path, e.g. `hostPath('/etc/passwd')`. */
  hostPath(p: string): string;
  cleanup(): Promise<void>;
}

export interface SandboxOptions {
  productUuid?: string;
  /** The DMI chassis asset tag; default Azure's. An empty string stands for a machine that is not an Azure VM. */
  chassisAssetTag?: string;
  /** 1: no /sys/firmware/efi (BIOS); 2: UEFI. */
  generation?: 1 | 2;
  hostname?: string;
  /** Extra text appended to the sandbox's sshd_config (before nothing: the Include comes first). */
  sshdConfigExtra?: string;
}

const FROM_HOST = [
  'login.defs', 'default', 'skel', 'pam.d', 'pam.conf', 'security', 'nsswitch.conf', 'ld.so.cache', 'ld.so.conf',
  'ld.so.conf.d', 'alternatives', 'sudoers', 'sudo.conf', 'hosts', 'localtime', 'shells', 'os-release', 'subuid',
  'subgid', 'adduser.conf', 'environment', 'ssh/moduli',
];

const PASSWD = `root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
bin:x:2:2:bin:/bin:/usr/sbin/nologin
sys:x:3:3:sys:/dev:/usr/sbin/nologin
sshd:x:100:65534::/run/sshd:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
`;
const GROUP = `root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
sudo:x:27:
shadow:x:42:
users:x:100:
nogroup:x:65534:
`;

/** Builds a sandbox tree (root only): minimal accounts, what useradd/chpasswd/sshd need, a fake product_uuid. */
export async function createSandbox(options: SandboxOptions = {}): Promise<Sandbox> {
  assertNamespaces();
  const root = await mkdtemp(path.join(tmpdir(), 'bootstate-sandbox-'));
  const at = (p: string) => path.join(root, p);
  // sys/class/block lists only this VM's own block devices (none until a test attaches one: attachLoop).
  for (const dir of ['etc/ssh/sshd_config.d', 'etc/sudoers.d', 'home', 'root', 'var/lib', 'var/log', 'run', 'sys/class/dmi/id', 'sys/class/block', 'sys/firmware']) {
    await mkdir(at(dir), { recursive: true });
  }
  for (const item of FROM_HOST) {
    const source = path.join('/etc', item);
    if (existsSync(source)) await cp(source, at(`etc/${item}`), { recursive: true, verbatimSymlinks: true });
  }
  await writeFile(at('etc/passwd'), PASSWD);
  await writeFile(at('etc/group'), GROUP);
  await writeFile(at('etc/shadow'), shadowFor(PASSWD), { mode: 0o640 });
  await writeFile(at('etc/gshadow'), GROUP.replace(/:x:\d+:/g, ':*::'), { mode: 0o640 });
  await chown(at('etc/shadow'), 0, 42);
  await chown(at('etc/gshadow'), 0, 42);
  await chmod(at('etc/sudoers.d'), 0o755);
  await chmod(at('root'), 0o700);
  await writeFile(at('etc/hostname'), `${options.hostname ?? 'sandbox'}\n`);
  await writeFile(
    at('etc/ssh/sshd_config'),
    `Include /etc/ssh/sshd_config.d/*.conf\nHostKey /etc/ssh/ssh_host_ed25519_key\nKbdInteractiveAuthentication no\nUsePAM yes\n${options.sshdConfigExtra ?? ''}`,
  );
  if (existsSync('/usr/bin/ssh-keygen')) {
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'sandbox', '-f', at('etc/ssh/ssh_host_ed25519_key')]);
  }
  await writeFile(at('sys/class/dmi/id/product_uuid'), `${options.productUuid ?? '550E8400-E29B-41D4-A716-446655440000'}\n`, { mode: 0o400 });
  await writeFile(at('sys/class/dmi/id/chassis_asset_tag'), `${options.chassisAssetTag ?? AZURE_CHASSIS_ASSET_TAG}\n`, { mode: 0o444 });
  if (options.generation === 2) await mkdir(at('sys/firmware/efi'));
  return {
    root,
    hostPath: (p) => path.join(root, path.posix.normalize(`/${p}`)),
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
}

// Runs inside the new namespaces: mounts the sandbox over the real paths, then execs the command.
// The paths arrive as positional parameters, never interpolated into the script.
const ENTER = `set -eu
r=$1; shift
for d in etc home root var/lib var/log run; do mount --bind "$r/$d" "/$d"; done
# The media probe lists /sys/class/block: a VM sees its own devices there, never the host's disks or drive (on an
# Azure machine that is the host's own provisioning media) nor another VM's media attached at the same time.
if [ -e /sys/class/dmi/id/product_uuid ]; then
  mount --bind "$r/sys/class/dmi/id/product_uuid" /sys/class/dmi/id/product_uuid
  if [ -e /sys/class/dmi/id/chassis_asset_tag ]; then mount --bind "$r/sys/class/dmi/id/chassis_asset_tag" /sys/class/dmi/id/chassis_asset_tag; fi
  mount --bind "$r/sys/class/block" /sys/class/block
else
  mount --rbind "$r/sys/class" /sys/class
fi
mount --bind "$r/sys/firmware" /sys/firmware
hostname -F /etc/hostname
exec "$@"`;

export interface RunInSandboxOptions {
  env?: NodeJS.ProcessEnv;
  /** Network namespace (from createNetns) to run in. */
  netns?: string;
  stdin?: Buffer;
  timeoutMs?: number;
  cwd?: string;
}

/** Runs `argv` inside the sandbox's mount + UTS namespaces; resolves with its result whatever the exit code. */
export async function runInSandbox(sandbox: Sandbox, argv: string[], options: RunInSandboxOptions = {}): Promise<RunResult> {
  const prefix = options.netns ? ['ip', 'netns', 'exec', options.netns] : [];
  const full = [...prefix, 'unshare', '--mount', '--uts', '--propagation', 'private', '--fork', '--kill-child', 'sh', '-c', ENTER, 'sandbox-enter', sandbox.root, ...argv];
  return run(full, {
    env: { ...process.env, ...options.env },
    stdin: options.stdin,
    timeoutMs: options.timeoutMs ?? 60_000,
    cwd: options.cwd,
    allowFailure: true,
  });
}

/** Runs a TypeScript file with node + tsx inside the sandbox (cwd: the repository, for module resolution). */
export function runTsInSandbox(sandbox: Sandbox, script: string, args: string[], options: RunInSandboxOptions = {}): Promise<RunResult> {
  return runInSandbox(sandbox, [process.execPath, '--import', 'tsx', script, ...args], { cwd: REPO, ...options });
}

export const REPO = path.resolve(import.meta.dirname, '../..');

export interface Netns {
  name: string;
  delete(): Promise<void>;
}

/** Creates a network namespace with `lo` up and 169.254.169.254/32 and 168.63.129.16/32 on it. */
export async function createNetns(name: string): Promise<Netns> {
  assertNamespaces();
  await run(['ip', 'netns', 'add', name]);
  try {
    await run(['ip', '-n', name, 'link', 'set', 'lo', 'up']);
    await run(['ip', '-n', name, 'addr', 'add', '169.254.169.254/32', 'dev', 'lo']);
    await run(['ip', '-n', name, 'addr', 'add', '168.63.129.16/32', 'dev', 'lo']);
  } catch (error) {
    await run(['ip', 'netns', 'del', name], { allowFailure: true });
    throw error;
  }
  return { name, delete: async () => void (await run(['ip', 'netns', 'del', name], { allowFailure: true })) };
}

let probed = false;

/** Throws when this is root on Linux but mount/UTS namespaces cannot be created: never skip silently. */
export function assertNamespaces(): void {
  if (!canSandbox) throw new Error('the namespace sandbox needs root on Linux; guard the suite with canSandbox');
  if (probed) return;
  try {
    execFileSync('unshare', ['--mount', '--uts', '--fork', 'true'], { stdio: 'pipe' });
  } catch (error) {
    throw new Error(`running as root on Linux but unshare cannot create namespaces: ${(error as Error).message}`);
  }
  probed = true;
}

function shadowFor(passwd: string): string {
  return passwd
    .trim()
    .split('\n')
    .map((line) => `${line.split(':')[0]}:*:19000:0:99999:7:::`)
    .join('\n')
    .concat('\n');
}
