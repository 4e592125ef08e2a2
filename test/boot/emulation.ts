/**
 * Booting another architecture's Debian (arm64) on this amd64 machine: the kernel runs the root's executables
 * under qemu-user through a binfmt_misc handler with the F flag (the interpreter opened once, at registration, so
 * it runs inside a root that has no qemu), and a layer of drop-ins lets Debian's own units start under emulation.
 *
 * The handler is Debian's (qemu-user-static's /usr/lib/binfmt.d/qemu-aarch64.conf). On a machine without systemd
 * nothing mounts binfmt_misc or registers it (systemd-binfmt does both at boot); since Linux 6.7 a registration lives
 * only as long as some mount of binfmt_misc does, so holdBinfmt() mounts one in a private mount namespace, registers
 * the handler there unless it already is, and keeps that mount for as long as the test runs: the host's mount table
 * is not touched, and when the test ends (or dies) the handler it registered goes with its mount.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** QEMU's name for each foreign Debian architecture the boot tests run. */
const QEMU_NAME: Record<string, string> = { arm64: 'aarch64' };

// $1: the handler's name, $2: Debian's binfmt.d file. Prints the handler's status, then holds the mount until stdin
// closes (the test process ending, however it ends).
const HOLD = `set -eu
mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
entry=/proc/sys/fs/binfmt_misc/$1
if [ -e "$entry" ]; then echo "registered before"; else grep -v '^#' "$2" > /proc/sys/fs/binfmt_misc/register; echo "registered here"; fi
cat "$entry"
echo "--- held"
exec cat > /dev/null`;

export interface BinfmtHold {
  /** `registered before` or `registered here`, then the kernel's description of the handler. */
  status: string;
  release(): Promise<void>;
}

/**
 * Makes the kernel run `arch`'s ELF executables under qemu-user-static with the F flag, until `release()`; throws
 * (never skips) when qemu-user-static is not installed, or when a handler already registered lacks the F flag (the
 * container's root has no qemu to load, and this does not replace a handler someone else registered).
 */
export async function holdBinfmt(arch: string): Promise<BinfmtHold> {
  const qemu = QEMU_NAME[arch];
  if (!qemu) throw new Error(`no qemu-user handler known for ${arch}`);
  const conf = `/usr/lib/binfmt.d/qemu-${qemu}.conf`;
  if (!existsSync(conf)) throw new Error(`${conf} is missing: the ${arch} boot needs qemu-user-static (scripts/test-packages.txt)`);
  const holder: ChildProcess = spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', HOLD, 'binfmt', `qemu-${qemu}`, conf], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  holder.stdout!.on('data', (d) => (output += d));
  holder.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<void>((resolve) => holder.once('exit', () => resolve()));
  const held = await Promise.race([
    exited.then(() => false),
    (async () => {
      while (!output.includes('--- held')) await new Promise((resolve) => setTimeout(resolve, 20));
      return true;
    })(),
  ]);
  const release = async () => {
    holder.stdin!.end();
    await exited;
  };
  if (!held) throw new Error(`registering the qemu-${qemu} binfmt_misc handler failed (${holder.exitCode}): ${output}`);
  const status = output.slice(0, output.indexOf('--- held')).trim();
  if (!/^flags: \S*F/m.test(status)) {
    await release();
    throw new Error(`the qemu-${qemu} binfmt_misc handler has no F flag, so a root without qemu cannot run under it:\n${status}`);
  }
  return { status, release };
}

/**
 * What stops Debian 12's own units from starting under qemu-user, and the drop-in that lets each one start (none
 * is bootstate's: its units run as shipped). Setting up LoadCredential= fails under emulation ("Failed to set up
 * credentials: Invalid argument", 243/CREDENTIALS) and so does PrivateNetwork= ("Failed to set up network namespacing:
 * Input/output error", 225/NETWORK): without these, /dev's static nodes, the system users and tmpfiles' directories
 * are not made and the boot is degraded, and systemd-hostnamed, which hostnamectl asks over D-Bus, never starts.
 * The credentials would be the VM's to pass (it passes none), and the VM's only network is its namespace's.
 */
export const EMULATION_DROP_INS: Record<string, string> = {
  'systemd-tmpfiles-setup.service': '[Service]\nLoadCredential=\n',
  'systemd-tmpfiles-setup-dev.service': '[Service]\nLoadCredential=\n',
  'systemd-sysusers.service': '[Service]\nLoadCredential=\n',
  'systemd-hostnamed.service': '[Service]\nPrivateNetwork=no\n',
};

/** A layer holding EMULATION_DROP_INS under /etc/systemd/system, to stack over the root; returns its directory. */
export async function emulationLayer(dir: string): Promise<string> {
  for (const [unit, text] of Object.entries(EMULATION_DROP_INS)) {
    const dropIns = path.join(dir, 'etc/systemd/system', `${unit}.d`);
    await mkdir(dropIns, { recursive: true });
    await writeFile(path.join(dropIns, '50-emulated.conf'), text);
  }
  return dir;
}
