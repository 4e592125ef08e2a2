/**
 * What `systemctl status bootstate` shows while a run goes on: one STATUS= line derived from the chart's snapshots
 * and the actors it starts (each start of `imds`, `readyReport`, … is an attempt), never from I/O of its own. While
 * the start job still waits (before READY=1) each line also carries EXTEND_TIMEOUT_USEC=, the rest of the budget the
 * chart gives that phase (config) plus slack, so systemd never kills a run that is within its deadlines; a pool VM's
 * unbounded wait is covered one poll at a time.
 *
 * The lines name states, attempts, seconds and fixed failure codes only: no value from the metadata or the media.
 */
import type { InspectionEvent } from 'xstate';
import type { ProvisioningContext } from '../../machines/provisioning.js';
import type { Config } from '../config/defaults.js';
import type { PhaseMeta } from '../../machines/retry.js';
import { SHUTDOWN_TICK_MS } from '../../machines/provisioning/delays.js';
import { sinceStartMs } from '../core/clock.js';

/** What a phase gives its STATUS line and its extension. */
export interface Phase {
  /** A new key starts a new phase: its clock and its attempt count start again. */
  key: string;
  /** The invoked actor whose starts are this phase's attempts. */
  attempts?: string;
  /** Seconds the chart allows the phase from its start; null when it has no deadline of its own. */
  budgetSecs: number | null;
  text(progress: { attempt: number; left: number | null }): string;
}

/** Seconds added to every extension: the transition out of a phase, and a loaded 2-core machine. */
export const EXTEND_SLACK_SECS = 30;

/** The parts of a snapshot this module reads. */
export interface StatusSnapshot {
  value: unknown;
  status: string;
  context: Pick<ProvisioningContext, 'config' | 'failure' | 'terminating'>;
  matches(value: unknown): boolean;
  /** The `meta` of each state the chart is in, by state id: each state's budget and attempts (machines/retry.ts). */
  getMeta(): Record<string, PhaseMeta | undefined>;
  machine: { implementations: { delays: Record<string, unknown> } };
}

type Facts = { code: string; terminating: boolean };
type Progress = { attempt: number; left: number | null };

/** The ends of a run, by final state: nothing is in flight, nothing is extended. */
const ENDS: Array<[string, (facts: Facts) => string]> = [
  ['provisioned', () => 'provisioned'],
  ['markingProvisioned', () => 'provisioned'],
  ['alreadyProvisioned', () => 'already provisioned: nothing to do'],
  ['notOnAzure', () => 'not an Azure VM: nothing to do'],
  ['alreadyRunning', () => 'another bootstate is provisioning this machine: nothing to do'],
  ['waitingInterrupted', () => 'pool VM: stopped while waiting to be claimed; the next boot waits again'],
  ['shutDownInPool', () => 'OS-disk pool VM: shut down by the host, as it waited to be'],
  ['readyNotAccepted', () => 'provisioned, but the wireserver did not accept Ready; the next boot reports it'],
  ['markerNotWritten', () => 'provisioned and Ready reported, but the provisioned marker was not written'],
  ['failed', ({ code }) => `provisioning failed (${code}); the failure was reported`],
  ['failedUnreported', ({ code }) => `provisioning failed (${code}); the failure report was not accepted`],
];

const left = (s: number | null) => (s === null ? '' : `, ${s} s left`);

/**
 * The phases with work in flight, the more specific first: the state (its path under the root), the phase's key, and
 * its line. The state's `meta` gives the budget and the actor whose starts are attempts.
 */
const PHASES: Array<{ path: string; key: string | ((facts: Facts) => string); text: (progress: Progress, facts: Facts) => string }> = [
  { path: 'reportingReady', key: 'ready', text: (p) => `reporting Ready: attempt ${p.attempt}${left(p.left)}` },
  {
    path: 'reportingFailure',
    key: ({ terminating }) => (terminating ? 'failure on stop' : 'failure'),
    text: (p, { code, terminating }) => `${terminating ? 'stopping: ' : ''}reporting ProvisioningFailed (${code}): attempt ${p.attempt}${left(p.left)}`,
  },
  { path: 'completingHostKeys', key: 'missing host keys', text: () => 'provisioned earlier: making the ssh host keys a stop left missing' },
  { path: 'preprovisioned.reportingPoolReady', key: 'pool ready', text: (p) => `pool VM: reporting Ready to the pool: attempt ${p.attempt}${left(p.left)}` },
  { path: 'preprovisioned.markingWaiting', key: 'pool marker', text: () => 'pool VM: waiting to be claimed' },
  // No deadline: each poll is covered by its own extension (the pause, then one request's timeouts).
  { path: 'preprovisioned.waiting.polling', key: 'pool wait', text: (p) => `pool VM: waiting to be claimed, poll ${p.attempt}` },
  { path: 'preprovisioned.detachingNic', key: 'pool nic detach', text: (p) => `Savable pool VM: waiting for the host to detach the network interface${left(p.left)}` },
  { path: 'preprovisioned.attachingNic', key: 'pool nic attach', text: (p) => `Savable pool VM: waiting for the customer's network interface${left(p.left)}` },
  { path: 'preprovisioned.markingShutdown', key: 'pool shutdown marker', text: () => 'OS-disk pool VM: waiting for the host to shut it down' },
  // No deadline: the chart re-enters the state every tick, and each line covers one tick.
  { path: 'preprovisioned.awaitingShutdown', key: 'pool shutdown', text: () => 'OS-disk pool VM: waiting for the host to shut it down' },
  { path: 'provisioning.work.checkingProxyAgent', key: 'proxy agent', text: (p) => `waiting for the Azure Guest Proxy Agent${left(p.left)}` },
  { path: 'provisioning.work.validating', key: 'validating', text: () => 'configuring the OS' },
  {
    path: 'provisioning.work.configuringOs.account.credentials.sshKeys.fetchingCertificates',
    key: 'certificates',
    text: (p) => `configuring the OS: fetching the goal state's certificates: attempt ${p.attempt}${left(p.left)}`,
  },
  { path: 'provisioning.work.configuringOs', key: 'os', text: () => 'configuring the OS' },
  { path: 'provisioning.work.configured', key: 'configured', text: () => 'OS configured, logins open: making the last ssh host keys' },
  { path: 'provisioning.work.gathering.imds.fetching', key: 'gathering', text: (p) => `waiting for IMDS: attempt ${p.attempt}${left(p.left)}` },
  // IMDS is done; the media's own deadline counts from the start of gathering too.
  { path: 'provisioning.work.gathering', key: 'gathering', text: () => 'reading the provisioning media' },
];

/** A state's path under the root as the state value `matches` takes: `a.b.c` → `{ a: { b: 'c' } }`. */
const valueOf = (path: string): unknown =>
  path
    .split('.')
    .reduceRight<unknown>((inner, key) => (inner === undefined ? key : { [key]: inner }), undefined);

/** Seconds the chart gives the state at `path`, from its `meta.budget`: a delay of the chart, or seconds. */
function budgetOf(snapshot: StatusSnapshot, meta: PhaseMeta | undefined): number | null {
  const budget = meta?.budget;
  if (budget === undefined) return null;
  if (typeof budget === 'number') return budget;
  const delay = snapshot.machine.implementations.delays[budget];
  const ms = typeof delay === 'function' ? (delay as (args: { context: unknown }) => number)({ context: snapshot.context }) : delay;
  return (ms as number) / 1000;
}

/** The phase a snapshot is in, or null before there is anything to say (`starting`, which routes on what was read). */
export function phaseOf(snapshot: StatusSnapshot): Phase | null {
  const facts: Facts = { code: snapshot.context.failure?.code ?? 'UNKNOWN', terminating: snapshot.context.terminating };
  const end = ENDS.find(([state]) => snapshot.matches(state));
  if (end) {
    const text = end[1](facts);
    return { key: `end ${text}`, budgetSecs: null, text: () => text };
  }
  const phase = PHASES.find(({ path }) => snapshot.matches(valueOf(path)));
  if (!phase) return null;
  const meta = snapshot.getMeta()[`provisioning.${phase.path}`];
  return {
    key: typeof phase.key === 'string' ? phase.key : phase.key(facts),
    ...(meta?.attempts ? { attempts: meta.attempts } : {}),
    budgetSecs: budgetOf(snapshot, meta),
    text: (progress) => phase.text(progress, facts),
  };
}

/** Seconds one poll of a pool VM's wait may take: the pause before it and its request's timeouts. */
export function pollSecs(config: Config): number {
  return config.preprovisioning.poll_interval_secs + config.imds.connection_timeout_secs + config.imds.request_timeout_secs;
}

/** Where the STATUS lines go: an SdNotifier. */
export interface StatusSink {
  status(text: string, extendUsec?: number): void;
}

/**
 * Feeds the sink from the run's inspection events: `inspect` every event; after each macrostep of the root (its
 * snapshot) one STATUS line, with the attempts the phase's actor was started so far.
 */
export class SystemdStatus {
  private phaseKey: string | null = null;
  private phaseStarted = 0;
  private readonly started = new Map<string, number>();
  private readonly startedThisStep = new Map<string, number>();

  constructor(
    private readonly sink: StatusSink,
    private readonly now: () => number = sinceStartMs,
  ) {}

  inspect(event: InspectionEvent): void {
    if (event.type === '@xstate.actor') {
      const id = (event.actorRef as { id?: string }).id ?? '';
      this.startedThisStep.set(id, (this.startedThisStep.get(id) ?? 0) + 1);
      return;
    }
    if (event.type !== '@xstate.snapshot' || event.actorRef.sessionId !== event.rootId) return;
    this.update(event.snapshot as unknown as StatusSnapshot);
  }

  /** One macrostep of the root ended in `snapshot`. */
  update(snapshot: StatusSnapshot): void {
    const phase = snapshot.status === 'error' ? null : phaseOf(snapshot);
    if (phase && phase.key !== this.phaseKey) {
      this.phaseKey = phase.key;
      this.phaseStarted = this.now();
      this.started.clear();
    }
    for (const [id, n] of this.startedThisStep) this.started.set(id, (this.started.get(id) ?? 0) + n);
    this.startedThisStep.clear();
    if (!phase) return;
    const elapsed = (this.now() - this.phaseStarted) / 1000;
    const left = phase.budgetSecs === null ? null : Math.max(0, Math.round(phase.budgetSecs - elapsed));
    const attempt = Math.max(1, phase.attempts ? (this.started.get(phase.attempts) ?? 0) : 1);
    const covered = phase.key === 'pool wait' ? pollSecs(snapshot.context.config) : phase.key === 'pool shutdown' ? SHUTDOWN_TICK_MS / 1000 : (left ?? 0);
    this.sink.status(phase.text({ attempt, left }), snapshot.status === 'active' ? (covered + EXTEND_SLACK_SECS) * 1e6 : undefined);
  }
}
