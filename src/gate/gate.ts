/**
 * `bootstate gate [--timeout SECS]`: whether another agent on the image (WALinuxAgent, for extensions) may start
 * now. The package's drop-ins run it as that unit's `ExecCondition=` (docs/coexistence.md): it waits while a
 * provisioning run holds the instance lock, then opens (exit 0) only when this VM id is provisioned — bootstate's
 * marker, or azure-init's as a run accepts it — and stays shut with its own exit code when provisioning failed, Ready
 * is still pending, or this is a pool VM waiting to be claimed, so the other agent never reports Ready for a VM
 * bootstate has not. It reads and never writes: no lock taken, no marker tidied.
 *
 * It opens only on proof. Whatever keeps it from deciding shuts it with its own code (`undecided`): a configuration
 * that does not load (the markers and the lock it names are unknown), a lock it cannot read, its own output failing
 * (the CLI exits with it, src/commands/index.ts). Its wait is measured on the monotonic clock: a step of the wall clock
 * (chrony's makestep, Hyper-V time sync, early in a VM's life) neither ends nor stretches it.
 */
import { SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE, type Config } from '../config/defaults.js';
import { loadConfig } from '../config/load.js';
import type { MarkerState } from '../os/provisioner.js';
import { markerStore } from '../provision/marker.js';
import { checkPlatform } from '../azure/platform.js';
import { readVmId } from '../azure/vmid.js';
import { instanceLockPaths, lockHolder } from '../provision/instance-lock.js';
import { GATE_EXIT } from './gate-exit.js';
import { sinceStartMs } from '../core/clock.js';

export { GATE_EXIT };

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
  const config = await loadedConfig(options);
  if (!config) return GATE_EXIT.undecided;
  const sysRoot = options.sysRoot ?? '/';
  const platform = await checkPlatform(config, sysRoot).catch(() => null);
  if (platform && !platform.onAzure) {
    say(`open: not an Azure VM (${platform.why}); bootstate provisions nothing here`);
    return GATE_EXIT.open;
  }
  const timeoutSecs = options.timeoutSecs ?? defaultGateTimeoutSecs(config);
  const holder = await waitForLock(config, timeoutSecs, say);
  if (holder === 'unknown') return GATE_EXIT.undecided;
  const { vmId } = await readVmId({ sysRoot });
  let state: MarkerState;
  try {
    state = await markerStore(config).state(vmId, { tidy: false });
  } catch (error) {
    say(`shut: cannot read the markers of VM ${vmId}: ${(error as Error).message}`);
    return GATE_EXIT.notProvisioned;
  }
  if (state === 'waiting-for-reuse' || state === 'waiting-for-reuse-savable') {
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
    case 'waiting-for-shutdown':
      say(`shut: VM ${vmId} is an OS-disk pool VM that reported Ready to the pool and waits for the host to shut it down`);
      return GATE_EXIT.notProvisioned;
    default:
      say(`shut: VM ${vmId} is not provisioned: provisioning failed, or bootstate has not run for this VM id (its log: bootstate trace)`);
      return GATE_EXIT.notProvisioned;
  }
}

/**
 * Waits up to `timeoutSecs`, on the monotonic clock, while a provisioning run holds the instance lock: the holder
 * still there when the wait ran out, null once none is, or `unknown` (said why) when a lock cannot be read.
 */
async function waitForLock(config: Config, timeoutSecs: number, say: (text: string) => void): Promise<{ path: string; pid: number } | null | 'unknown'> {
  const deadline = sinceStartMs() + timeoutSecs * 1000;
  let waiting = false;
  for (;;) {
    const holder = heldLock(config);
    if (holder && 'unknown' in holder) {
      say(`shut: cannot tell whether a provisioning run holds ${holder.path}: ${holder.unknown}`);
      return 'unknown';
    }
    if (!holder || sinceStartMs() >= deadline) return holder;
    if (!waiting) say(`waiting up to ${timeoutSecs} s for the provisioning run${holder.pid > 0 ? ` (pid ${holder.pid})` : ''} holding ${holder.path}`);
    waiting = true;
    await new Promise((resolve) => setTimeout(resolve, Math.min(POLL_MS, Math.max(deadline - sinceStartMs(), 0))));
  }
}

/**
 * The configuration a run would use, or null when it does not load. A run then reports ProvisioningFailed, and the
 * gate says why it stays shut: it never opens on a configuration error, since the markers and lock it would read are
 * those of a configuration nobody can read.
 */
async function loadedConfig(options: GateOptions): Promise<Config | null> {
  try {
    const { config } = await loadConfig({
      systemFile: SYSTEM_CONFIG_FILE,
      dropinDir: SYSTEM_CONFIG_DROPIN_DIR,
      override: options.config ?? process.env.BOOTSTATE_CONFIG,
    });
    return config;
  } catch (error) {
    options.stdout(`bootstate gate: shut: the configuration does not load (${(error as Error).message}); the gate never opens on a configuration error\n`);
    return null;
  }
}

/** The instance lock a provisioning run holds now, if any; `unknown` when a lock cannot be read, which is no proof it is free. */
function heldLock(config: Config): { path: string; pid: number } | { path: string; unknown: string } | null {
  for (const path of instanceLockPaths(config)) {
    try {
      const pid = lockHolder(path);
      if (pid !== null) return { path, pid };
    } catch (error) {
      return { path, unknown: (error as Error).message };
    }
  }
  return null;
}
