/**
 * `bootstate gate [--timeout SECS]`: whether another agent on the image (WALinuxAgent, for extensions) may start
 * now. The package's drop-ins run it as that unit's `ExecCondition=` (docs/coexistence.md): it waits while a
 * provisioning run holds the instance lock, then opens (exit 0) only when this VM id is provisioned — bootstate's
 * marker, or azure-init's as a run accepts it — and stays shut with its own exit code when provisioning failed, Ready
 * is still pending, or this is a pool VM waiting to be claimed, so the other agent never reports Ready for a VM
 * bootstate has not. It reads and never writes: no lock taken, no marker tidied.
 */
import { DEFAULT_CONFIG, SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE, type Config } from '../config/defaults.js';
import { loadConfig } from '../config/load.js';
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';
import type { MarkerState } from '../os/provisioner.js';
import { markerStore } from '../os/marker.js';
import { checkPlatform } from '../os/platform.js';
import { readVmId } from '../os/vmid.js';
import { instanceLockPaths, lockHolder } from '../run/instance-lock.js';

/** Exit codes of `bootstate gate`, all in 1..254: systemd skips a unit whose ExecCondition= exits so, without failing it. */
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
} as const;

/** How often the wait looks at the lock again: a run's end is noticed within this. */
const POLL_MS = 250;

/**
 * The longest a first boot holds the lock outside a pool VM's wait: the IMDS and Ready budgets, plus slack for the
 * steps between them (media, OS changes, host keys).
 */
export const defaultGateTimeoutSecs = (config: Config): number => config.imds.total_retry_timeout_secs + config.wireserver.total_retry_timeout_secs + 300;

export interface GateOptions {
  config?: string;
  /** Seconds to wait for a provisioning run that holds the instance lock (default: defaultGateTimeoutSecs). */
  timeoutSecs?: number;
  /** Where sysfs is read (the VM id, the chassis asset tag); `/` except in tests. */
  sysRoot?: string;
  stdout(text: string): void;
  stderr(text: string): void;
}

/** Decides once the lock is free (or the wait ran out) and resolves to the exit code; prints one line saying why. */
export async function gate(options: GateOptions): Promise<number> {
  const say = (text: string) => options.stdout(`bootstate gate: ${text}\n`);
  const config = await configOrDefaults(options);
  const sysRoot = options.sysRoot ?? '/';
  const platform = await checkPlatform(config, sysRoot).catch(() => null);
  if (platform && !platform.onAzure) {
    say(`open: not an Azure VM (${platform.why}); bootstate provisions nothing here`);
    return GATE_EXIT.open;
  }
  const timeoutSecs = options.timeoutSecs ?? defaultGateTimeoutSecs(config);
  const deadline = Date.now() + timeoutSecs * 1000;
  let holder = heldLock(config);
  if (holder) say(`waiting up to ${timeoutSecs} s for the provisioning run${holder.pid > 0 ? ` (pid ${holder.pid})` : ''} holding ${holder.path}`);
  while (holder && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(POLL_MS, Math.max(deadline - Date.now(), 0))));
    holder = heldLock(config);
  }
  const { vmId } = await readVmId({ sysRoot });
  let state: MarkerState;
  try {
    state = await markerStore(config).state(vmId, { tidy: false });
  } catch (error) {
    say(`shut: cannot read the markers of VM ${vmId}: ${(error as Error).message}`);
    return GATE_EXIT.notProvisioned;
  }
  if (state === 'waiting-for-reuse') {
    say(`shut: VM ${vmId} is a pre-provisioned pool VM waiting to be claimed${holder ? ` (still waiting after ${timeoutSecs} s)` : ''}`);
    return GATE_EXIT.waitingForClaim;
  }
  if (holder) {
    say(`shut: the provisioning run still holds ${holder.path} after ${timeoutSecs} s`);
    return GATE_EXIT.timedOut;
  }
  switch (state) {
    case 'provisioned':
      say(`open: VM ${vmId} is provisioned`);
      return GATE_EXIT.open;
    case 'report-pending':
      say(`shut: VM ${vmId} is provisioned but the wireserver has not accepted Ready yet (the next boot reports it)`);
      return GATE_EXIT.readyPending;
    default:
      say(`shut: VM ${vmId} is not provisioned: provisioning failed, or bootstate has not run for this VM id (its log: bootstate trace)`);
      return GATE_EXIT.notProvisioned;
  }
}

/** The configuration a run would use: on a load failure a run falls back to the defaults, and so does the gate. */
async function configOrDefaults(options: GateOptions): Promise<Config> {
  try {
    const { config } = await loadConfig({
      systemFile: SYSTEM_CONFIG_FILE,
      dropinDir: SYSTEM_CONFIG_DROPIN_DIR,
      override: options.config ?? process.env.BOOTSTATE_CONFIG,
    });
    return config;
  } catch (error) {
    options.stderr(`bootstate gate: ${(error as Error).message}; using the defaults, as a provisioning run would\n`);
    return DEFAULT_CONFIG;
  }
}

/** The instance lock a provisioning run holds now, if any. */
function heldLock(config: Config): { path: string; pid: number } | null {
  for (const path of instanceLockPaths(config)) {
    const pid = lockHolder(path);
    if (pid !== null) return { path, pid };
  }
  return null;
}
