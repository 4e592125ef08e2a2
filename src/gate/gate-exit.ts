/**
 * Exit codes of `bootstate gate`, all in 1..254 but `open`: systemd skips a unit whose ExecCondition= exits so, without
 * failing it. Apart from the gate itself, so the CLI's table (index.ts) can name the code its output errors exit with.
 */
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';

export const GATE_EXIT = {
  /** Provisioned (this VM id's marker), or not an Azure VM: the other agent may start. */
  open: EXIT_OK,
  /** No provisioned marker for this VM id: provisioning failed or never ran (also: the markers cannot be read). */
  notProvisioned: EXIT_FAILURE,
  /** Provisioned, but the wireserver has not accepted Ready yet: the next boot reports it. */
  readyPending: 3,
  /** A pre-provisioned pool VM waiting to be claimed. */
  waitingForClaim: 4,
  /** A provisioning run still held the instance lock when the wait ran out. */
  timedOut: 5,
  /** No proof either way: the configuration does not load, the instance lock cannot be read, or the gate's own output failed. */
  undecided: 6,
} as const;
