/**
 * What the boot tests and the boot benchmark share: the root with the project's .deb installed in a layer of its
 * own, an SSH key pair whose public half the fake IMDS hands out, the metadata documents, and the media image.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Observation } from '../../src/azure/healthservice.js';
import type { RecordedRequest } from '../../src/fabric/behaviours.js';
import { withOsProfile } from '../../src/fabric/imds-document.js';
import { run } from '../../src/system/exec.js';
import { REPO } from '../e2e/ns.js';
import { buildDeb, debianRoot, installDeb, requireTools } from './debian-root.js';
import type { Boot, Machine } from './machine.js';
import { ovfDocument } from '../../src/fabric/ovf-document.js';

export interface Rig {
  /** Where every VM of this run keeps its disk; removed by `cleanup`. */
  workDir: string;
  /** The cached Debian root, read-only. */
  debian: string;
  /** The layer the .deb was installed into, to stack over `debian`. */
  debLayer: string;
  /** The .deb itself (null with `deb: false`), for a root with other packages. */
  deb: string | null;
  /** Private key whose public half the metadata carries. */
  key: string;
  publicKey: string;
  /**
   * A root with `extra` Debian packages beside the image's own (e.g. `waagent`, `cloud-init`), built once and cached
   * like the plain one, with the .deb installed over it in a layer of its own.
   */
  withPackages(extra: string[]): Promise<{ debian: string; debLayer: string }>;
  cleanup(): Promise<void>;
}

/** Builds (or finds) the Debian root, builds and installs the .deb, makes a key pair. */
export async function createRig(options: { deb?: boolean } = {}): Promise<Rig> {
  requireTools(['systemd-nspawn', 'mmdebstrap', 'ssh', 'ssh-keygen', 'nsenter', 'unshare', 'ip', 'xorriso']);
  const workDir = await mkdtemp(path.join(tmpdir(), 'bootstate-boot-'));
  try {
    const [debian, deb] = await Promise.all([debianRoot(), options.deb === false ? null : buildDeb(REPO, path.join(workDir, 'dist'))]);
    const debLayer = path.join(workDir, 'deb-layer');
    if (deb) await installDeb(debian, deb, debLayer);
    const key = path.join(workDir, 'admin-key');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'admin@boot-test', '-f', key]);
    const publicKey = (await readFile(`${key}.pub`, 'utf8')).trim();
    const roots = new Map<string, Promise<{ debian: string; debLayer: string }>>();
    const withPackages = (extra: string[]) => {
      const name = [...extra].sort().join('+');
      if (!roots.has(name)) {
        roots.set(
          name,
          (async () => {
            const root = await debianRoot(extra);
            const layer = path.join(workDir, `deb-layer-${name}`);
            if (deb) await installDeb(root, deb, layer);
            return { debian: root, debLayer: path.join(layer, 'upper') };
          })(),
        );
      }
      return roots.get(name)!;
    };
    return {
      workDir, debian, debLayer: path.join(debLayer, 'upper'), deb, key, publicKey, withPackages,
      cleanup: () => rm(workDir, { recursive: true, force: true }),
    };
  } catch (error) {
    await rm(workDir, { recursive: true, force: true });
    throw error;
  }
}

/** The example IMDS document with `publicKey` as the admin's only key and some osProfile fields changed. */
export function imdsDocument(publicKey: string, osProfile: Record<string, unknown> = {}): Record<string, any> {
  const doc = withOsProfile(osProfile);
  const user = String(doc.compute.osProfile.adminUsername);
  doc.compute.publicKeys = [{ keyData: `${publicKey}\n`, path: `/home/${user}/.ssh/authorized_keys` }];
  return doc;
}

/** An ISO 9660 image labelled as Azure's provisioning media, holding one ovf-env.xml. */
export async function mediaImage(dir: string, options: { username: string; hostname: string; password: string; key: string }): Promise<string> {
  const content = path.join(dir, 'media-content');
  await mkdir(content, { recursive: true });
  await writeFile(path.join(content, 'ovf-env.xml'), ovfEnv(options));
  const iso = path.join(dir, 'ovf.iso');
  execFileSync('xorriso', ['-as', 'mkisofs', '-quiet', '-V', 'rd_rdfe_stable', '-o', iso, content], { stdio: 'pipe' });
  return iso;
}

/** The media's ovf-env.xml: the fake fabric's document builder, with password logins on. */
function ovfEnv(options: { username: string; hostname: string; password: string; key: string }): string {
  const { key, ...rest } = options;
  return ovfDocument({ ...rest, keys: [key], disableSshPasswordAuthentication: false });
}

/**
 * A layer over the Debian root with `user` and the rig's key made by the image's own useradd: the no-agent boot
 * (the physical limit of a boot to the first login) that the benchmark and the readiness tests compare with.
 */
export async function bakeKey(rig: Rig, user: string): Promise<string> {
  const inRoot = `useradd -m -s /bin/bash -U "$1"
install -d -m 0700 -o "$1" -g "$1" "/home/$1/.ssh"
printf '%s\\n' "$2" > "/home/$1/.ssh/authorized_keys"
chown "$1:$1" "/home/$1/.ssh/authorized_keys"
chmod 0600 "/home/$1/.ssh/authorized_keys"`;
  return bakeLayer(rig, `baked-${user}`, [rig.debian], inRoot, [user, rig.publicKey]);
}

/**
 * Runs `script` (sh -e, with `args`) chrooted in an overlay of `lowers` (top first) and returns the new layer's upper
 * directory: what the script changed, to stack over those layers.
 */
export async function bakeLayer(rig: Rig, name: string, lowers: string[], script: string, args: string[] = []): Promise<string> {
  const layer = path.join(rig.workDir, name);
  for (const d of ['upper', 'work', 'merged']) await mkdir(path.join(layer, d), { recursive: true });
  await run([
    'unshare', '--mount', '--propagation', 'private', 'sh', '-c',
    'set -e; mount -t overlay overlay -o "lowerdir=$1,upperdir=$2/upper,workdir=$2/work" "$2/merged"; shift 2; exec chroot "$@"',
    'bake', lowers.join(':'), layer, path.join(layer, 'merged'), 'sh', '-ec', script, 'bake', ...args,
  ]);
  return path.join(layer, 'upper');
}

/** A layer holding only a drop-in of bootstate's configuration, to stack over the .deb's layer. */
export async function configLayer(rig: Rig, name: string, toml: string): Promise<string> {
  const dir = path.join(rig.workDir, `config-${name}`);
  await mkdir(path.join(dir, 'etc/bootstate/bootstate.toml.d'), { recursive: true });
  await writeFile(path.join(dir, 'etc/bootstate/bootstate.toml.d', `50-${name}.toml`), toml);
  return dir;
}

/**
 * A layer that enables bootstate-monitor.timer (what `systemctl enable` links) with its period shortened to `period`
 * (a systemd time span), so the cycles of minutes run in seconds. Started that often, the service would meet
 * systemd's default start rate limit (5 starts in 10 s), which a cycle a minute never does: the drop-in lifts it.
 * `service` is more of the service's drop-in (e.g. `[Service]` lines).
 */
export async function monitorTimerLayer(rig: Rig, name: string, period: string, service = ''): Promise<string> {
  const dir = path.join(rig.workDir, `timer-${name}`);
  const system = path.join(dir, 'etc/systemd/system');
  for (const d of ['timers.target.wants', 'bootstate-monitor.timer.d', 'bootstate-monitor.service.d']) await mkdir(path.join(system, d), { recursive: true });
  await symlink('/usr/lib/systemd/system/bootstate-monitor.timer', path.join(system, 'timers.target.wants/bootstate-monitor.timer'));
  await writeFile(
    path.join(system, 'bootstate-monitor.timer.d/50-shortened.conf'),
    // An empty assignment resets every trigger of the timer, not only its own kind: one reset, then both.
    `[Timer]\nOnActiveSec=\nOnActiveSec=${period}\nOnUnitActiveSec=${period}\nAccuracySec=1ms\n`,
  );
  await writeFile(path.join(system, 'bootstate-monitor.service.d/50-shortened.conf'), `[Unit]\nStartLimitIntervalSec=0\n${service}`);
  return dir;
}

/** The GuestAgentPluginHeartbeat observations among the requests the fabric recorded: one per monitor cycle. */
export function monitorHeartbeats(requests: RecordedRequest[]): Observation[] {
  return requests
    .filter((r) => r.route === 'healthService')
    .flatMap((r) => JSON.parse(r.body).Observations as Observation[])
    .filter((o) => o.ObservationName === 'GuestAgentPluginHeartbeat');
}

/** Waits until the fabric has received `n` heartbeats; throws with what systemd says of the monitor's units if not. */
export async function untilMonitorHeartbeats(machine: Machine, boot: Boot, n: number, timeoutMs = 240_000): Promise<void> {
  for (const until = Date.now() + timeoutMs; Date.now() < until; ) {
    if (monitorHeartbeats(await machine.requests()).length >= n) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  const status = await boot.exec(['systemctl', 'status', '--no-pager', '-l', 'bootstate-monitor.timer', 'bootstate-monitor.service']);
  const log = await boot.exec(['journalctl', '--no-pager', '-b', '-n', '100', '-u', 'bootstate-monitor.service', '-u', 'bootstate-monitor.timer']);
  const jobs = await boot.exec(['systemctl', 'list-jobs', '--no-pager']);
  const timers = await boot.exec(['systemctl', 'list-timers', '--all', '--no-pager']);
  const system = await boot.exec(['systemctl', 'is-system-running']);
  const started = await boot.exec(['systemctl', 'start', 'bootstate-monitor.service'], 120_000);
  const after = await boot.exec(['journalctl', '--no-pager', '-b', '-n', '100', '-u', 'bootstate-monitor.service', '-p', 'debug']);
  throw new Error(
    `fewer than ${n} heartbeats reached the fabric in ${timeoutMs / 1000} s:\n${status.stdout}\n${log.stdout}\njobs: ${jobs.stdout}\n` +
      `timers: ${timers.stdout}\nsystem: ${system.stdout}\nstart: ${started.exitCode} ${started.stderr}\n${after.stdout}`,
  );
}
