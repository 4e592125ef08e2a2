/**
 * The local fault matrix: every path bootstate reads or writes × the ways a hostile or broken machine can spoil
 * it. What each case must produce is written here from the guarantees (docs/local-faults.md), never read back
 * from the agent: sinks (journal, log, KVP, lock) never decide the outcome; the state in the data directory and
 * every OS path decide it with the reason of their step; a configuration that cannot be read stops a scratch run.
 */

export type Fault = 'full' | 'no free inodes' | 'read-only' | 'wrong type' | 'symlink to victim' | 'hard link to victim' | 'fifo' | 'permission denied' | 'none' | 'torn pool' | 'pool full of foreign records';

export interface Target {
  /** Shown in the table. */
  name: string;
  /** Path under the scratch root (`{vm}` is the VM id). */
  path: string;
  kind: 'dir' | 'file';
  /** Which rule decides the outcome. */
  role: 'sink' | 'kvp' | 'lock' | 'state' | 'os' | 'config';
  /** The reason a ProvisioningFailed report carries when this path cannot be used (state and os roles). */
  reason?: string;
  /** Faults that make no sense here (a hard link to a directory; a full or read-only config nobody writes). */
  skip?: Fault[];
  /** The sink this path feeds (sink role). */
  sink?: string;
}

export interface Expected {
  result: 'provisioned' | 'failed';
  reason: string | null;
  exitCode: number;
  /** The health reports the fabric must have received, in order. */
  reports: string[];
  /** `written` or `failed` for the KVP copy of the report; unset when the case does not decide it. */
  kvpReport?: 'written' | 'failed';
  /** A sink that must have been turned off (and told) rather than end the run. */
  sinkOff?: string;
}

export interface LocalCase {
  target: Target;
  fault: Fault;
  expected: Expected;
}

/**
 * Bound on a whole run, spawn to exit. The agent's own deadlines (IMDS and wireserver 5 s each) end a healthy run
 * in about a second; the slack is for a shared, overloaded test machine. What it catches is a run that never ends
 * (a blocking open of a FIFO, a retry loop on a broken file).
 */
export const DEADLINE_MS = 60_000;

const MARKER = 'failed to write provisioned marker';
/** The markers are read (the data directory listed, each marker checked) before anything is written. */
const MARKER_READ = 'failed to read marker';
const READY = ['NotReady/Provisioning', 'Ready'];
const FAILED = ['NotReady/Provisioning', 'NotReady/ProvisioningFailed'];
/** The data directory is read (markers) before anything is reported or changed. */
const FAILED_BEFORE_PROVISIONING = ['NotReady/ProvisioningFailed'];
/** Faults that make a directory unreadable, not just unwritable. */
const UNREADABLE: Fault[] = ['wrong type', 'fifo', 'permission denied'];

export const TARGETS: Target[] = [
  { name: 'data dir', path: '/var/lib/bootstate', kind: 'dir', role: 'state', reason: MARKER, sink: 'journal' },
  { name: 'marker (<vm_id>.provisioned)', path: '/var/lib/bootstate/{vm}.provisioned', kind: 'file', role: 'state', reason: MARKER_READ, skip: ['full', 'read-only', 'permission denied'] },
  { name: 'instance lock', path: '/var/lib/bootstate/bootstate.lock', kind: 'file', role: 'lock', skip: ['full', 'read-only'] },
  { name: 'journal dir', path: '/var/lib/bootstate/runs', kind: 'dir', role: 'sink', sink: 'journal' },
  { name: 'log dir', path: '/var/log', kind: 'dir', role: 'sink', sink: 'log file' },
  { name: 'log file', path: '/var/log/bootstate.log', kind: 'file', role: 'sink', sink: 'log file', skip: ['full', 'read-only'] },
  { name: 'KVP dir', path: '/var/lib/hyperv', kind: 'dir', role: 'kvp' },
  { name: 'KVP pool', path: '/var/lib/hyperv/.kvp_pool_1', kind: 'file', role: 'kvp', skip: ['full', 'read-only'] },
  { name: 'sshd drop-in dir', path: '/etc/ssh/sshd_config.d', kind: 'dir', role: 'os', reason: 'failed to update sshd config' },
  { name: 'sudoers dir', path: '/etc/sudoers.d', kind: 'dir', role: 'os', reason: 'failed to provision sudoers' },
  { name: 'home', path: '/home/azureuser', kind: 'dir', role: 'os', reason: 'failed to provision user' },
  { name: '.ssh', path: '/home/azureuser/.ssh', kind: 'dir', role: 'os', reason: 'failed to provision ssh keys' },
  { name: 'authorized_keys', path: '/home/azureuser/.ssh/authorized_keys', kind: 'file', role: 'os', reason: 'failed to provision ssh keys', skip: ['full', 'read-only'] },
  { name: 'config file', path: '/bootstate.toml', kind: 'file', role: 'config', skip: ['full', 'read-only', 'wrong type'] },
];

/** Inode exhaustion only where creating an empty file is what matters: the data directory and the sinks. */
const INODE_TARGETS = ['data dir', 'journal dir', 'log dir', 'KVP dir'];
const DIR_FAULTS: Fault[] = ['full', 'no free inodes', 'read-only', 'wrong type', 'symlink to victim', 'fifo', 'permission denied'];
const FILE_FAULTS: Fault[] = ['wrong type', 'symlink to victim', 'hard link to victim', 'fifo', 'permission denied'];

const provisioned = (kvpReport?: Expected['kvpReport']): Expected => ({ result: 'provisioned', reason: null, exitCode: 0, reports: READY, kvpReport });
const failed = (reason: string, reports = FAILED): Expected => ({ result: 'failed', reason, exitCode: 1, reports, kvpReport: 'written' });

/** The outcome the guarantees demand for `fault` on `target`. */
export function expectedFor(target: Target, fault: Fault): Expected {
  if (fault === 'none') return provisioned('written');
  // A directory reached through a symlink is still a directory of ours: what lands there is new files only.
  const followsDir = target.kind === 'dir' && fault === 'symlink to victim';
  switch (target.role) {
    case 'sink':
      // bootstate sets the mode of its own directories (runs/ 0700), which also lifts a planted mode 000.
      if (target.name === 'journal dir' && fault === 'permission denied') return provisioned('written');
      return { ...provisioned('written'), sinkOff: followsDir ? undefined : target.sink };
    case 'lock':
      return provisioned('written');
    case 'kvp':
      return provisioned(followsDir ? 'written' : 'failed');
    case 'state':
      if (followsDir) return provisioned('written');
      // Markers are empty files: a disk without free blocks still takes them; only the journal's lines are lost.
      if (fault === 'full') return { ...provisioned('written'), sinkOff: target.sink };
      // A marker is read before InProgress; so is the directory, unless only writing to it fails: a fault found
      // while reading is a failure to read the markers, not to write one.
      if (target.kind === 'file' || UNREADABLE.includes(fault)) return failed(MARKER_READ, FAILED_BEFORE_PROVISIONING);
      return failed(target.reason!);
    case 'os':
      if (target.name === 'home') {
        // The user step creates the home and sets its mode (0750), which also lifts a planted mode 000; the keys
        // step then needs room in it for .ssh.
        if (fault === 'permission denied') return provisioned('written');
        if (fault === 'full' || fault === 'symlink to victim') return failed('failed to provision ssh keys');
        return failed(target.reason!);
      }
      // sshd's and sudo's drop-in directories are commonly links; home and .ssh are walked without following.
      return followsDir && (target.name === 'sshd drop-in dir' || target.name === 'sudoers dir') ? provisioned('written') : failed(target.reason!);
    case 'config':
      // A scratch run refuses to fall back to the defaults (they point at the real fabric): exit 78, nothing sent.
      return { result: 'failed', reason: 'failed to load config', exitCode: 78, reports: [] };
  }
}

export const LOCAL_CASES: LocalCase[] = [
  { target: TARGETS[0]!, fault: 'none', expected: expectedFor(TARGETS[0]!, 'none') },
  ...TARGETS.flatMap((target) =>
    (target.kind === 'dir' ? DIR_FAULTS : FILE_FAULTS)
      .filter((fault) => !target.skip?.includes(fault) && (fault !== 'no free inodes' || INODE_TARGETS.includes(target.name)))
      .map((fault) => ({ target, fault, expected: expectedFor(target, fault) })),
  ),
  ...(['torn pool', 'pool full of foreign records'] as const).map((fault) => {
    const target = TARGETS.find((t) => t.name === 'KVP pool')!;
    return { target, fault, expected: provisioned('failed') };
  }),
];
