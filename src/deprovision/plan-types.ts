/** The changes a deprovision plan is made of (plan.ts finds them, apply.ts makes them). */
import type { FirewallPiece } from '../firewall/firewall.js';

export type Change =
  /**
   * A file (or, `recursive`, a directory and what it holds; a link is removed itself, never followed) removed. A
   * `proof` is kept when an earlier change failed: it is what proves the rest bootstate's to the next run.
   */
  | { kind: 'remove'; path: string; what: string; recursive?: boolean; proof?: true }
  /** `/etc/machine-id` rewritten to `uninitialized`: the next boot is a first boot with an id of its own. */
  | { kind: 'machine-id'; path: string }
  /** `/etc/hostname` rewritten to `localhost`: the build VM's name does not ship; a first boot names each VM. */
  | { kind: 'hostname'; path: string }
  /** root's password hash replaced by `*` in these shadow files (the file and the backup shadow-utils keeps). */
  | { kind: 'lock-root'; paths: string[] }
  /** A KVP pool file emptied in place, under its lock (other writers keep it open). */
  | { kind: 'empty-kvp'; path: string }
  /** `userdel -r`: the account, its home and mail spool. */
  | { kind: 'remove-user'; username: string; home: string | null }
  /**
   * The backups shadow-utils keeps of the account files (`/etc/passwd-` …), made the same as the file itself where
   * they still name a deleted account: `userdel` copies the file, with the account, to the backup before editing it.
   */
  | { kind: 'account-backups'; usernames: string[] }
  /** The running system's wireserver firewall rules (kernel state: only on `/`), as `bootstate firewall remove`. */
  | { kind: 'remove-firewall'; pieces: FirewallPiece[] };

/** Changes found for one concern, what was found and deliberately left alone, and what was refused. */
export interface PlanPart {
  changes: Change[];
  /** What was found and deliberately left alone, e.g. an account bootstate did not create. */
  notes: string[];
  /**
   * What should go but is not safe to change (a symlink where a directory or file of bootstate's was): the rest is
   * done, and the run exits 1, because the image is not ready for capture.
   */
  refused: string[];
}
