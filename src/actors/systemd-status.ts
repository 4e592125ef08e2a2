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
import { KEYGEN_TIMEOUT_SECS } from '../os/host-keys.js';

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
}

/** The phase a snapshot is in, or null before there is anything to say (`starting`, which routes on what was read). */
export function phaseOf(snapshot: StatusSnapshot): Phase | null {
  const { config, failure, terminating } = snapshot.context;
  const code = failure?.code ?? 'UNKNOWN';
  const is = (value: unknown) => snapshot.matches(value);
  const final = (text: string): Phase => ({ key: `end ${text}`, budgetSecs: null, text: () => text });
  const seconds = (left: number | null) => (left === null ? '' : `, ${left} s left`);

  if (is('provisioned') || is('markingProvisioned')) return final('provisioned');
  if (is('alreadyProvisioned')) return final('already provisioned: nothing to do');
  if (is('notOnAzure')) return final('not an Azure VM: nothing to do');
  if (is('alreadyRunning')) return final('another bootstate is provisioning this machine: nothing to do');
  if (is('waitingInterrupted')) return final('pool VM: stopped while waiting to be claimed; the next boot waits again');
  if (is('readyNotAccepted')) return final('provisioned, but the wireserver did not accept Ready; the next boot reports it');
  if (is('markerNotWritten')) return final('provisioned and Ready reported, but the provisioned marker was not written');
  if (is('failed')) return final(`provisioning failed (${code}); the failure was reported`);
  if (is('failedUnreported')) return final(`provisioning failed (${code}); the failure report was not accepted`);

  if (is('reportingReady')) {
    return {
      key: 'ready',
      attempts: 'readyReport',
      budgetSecs: config.wireserver.total_retry_timeout_secs,
      text: ({ attempt, left }) => `reporting Ready: attempt ${attempt}${seconds(left)}`,
    };
  }
  if (is('reportingFailure')) {
    return {
      key: terminating ? 'failure on stop' : 'failure',
      attempts: 'failureReport',
      budgetSecs: terminating ? 1.5 : config.wireserver.total_retry_timeout_secs,
      text: ({ attempt, left }) => `${terminating ? 'stopping: ' : ''}reporting ProvisioningFailed (${code}): attempt ${attempt}${seconds(left)}`,
    };
  }
  // Before READY=1: one ssh-keygen per missing type, side by side, each bounded by its own timeout.
  if (is('completingHostKeys')) return { key: 'missing host keys', budgetSecs: KEYGEN_TIMEOUT_SECS, text: () => 'provisioned earlier: making the ssh host keys a stop left missing' };
  if (is({ preprovisioned: 'reportingPoolReady' })) {
    return {
      key: 'pool ready',
      attempts: 'poolReadyReport',
      budgetSecs: config.wireserver.total_retry_timeout_secs,
      text: ({ attempt, left }) => `pool VM: reporting Ready to the pool: attempt ${attempt}${seconds(left)}`,
    };
  }
  if (is({ preprovisioned: 'markingWaiting' })) return { key: 'pool marker', budgetSecs: null, text: () => 'pool VM: waiting to be claimed' };
  if (is({ preprovisioned: 'waiting' })) {
    // No deadline: each poll is covered by its own extension (the pause, then one request's timeouts).
    return {
      key: 'pool wait',
      attempts: 'reprovision',
      budgetSecs: null,
      text: ({ attempt }) => `pool VM: waiting to be claimed, poll ${attempt}`,
    };
  }
  if (is({ provisioning: { work: 'checkingProxyAgent' } })) {
    return {
      key: 'proxy agent',
      budgetSecs: config.azure_proxy_agent.wait_secs + 10,
      text: ({ left }) => `waiting for the Azure Guest Proxy Agent${seconds(left)}`,
    };
  }
  if (is({ provisioning: { work: 'validating' } })) return { key: 'validating', budgetSecs: config.os.timeout_secs, text: () => 'configuring the OS' };
  if (is({ provisioning: { work: { configuringOs: { account: { credentials: { sshKeys: 'fetchingCertificates' } } } } } })) {
    return {
      key: 'certificates',
      attempts: 'certificates',
      budgetSecs: config.certificates.total_retry_timeout_secs,
      text: ({ attempt, left }) => `configuring the OS: fetching the goal state's certificates: attempt ${attempt}${seconds(left)}`,
    };
  }
  if (is({ provisioning: { work: 'configuringOs' } })) return { key: 'os', budgetSecs: config.os.timeout_secs, text: () => 'configuring the OS' };
  if (is({ provisioning: { work: 'configured' } })) {
    return { key: 'configured', budgetSecs: config.os.timeout_secs, text: () => 'OS configured, logins open: making the last ssh host keys' };
  }
  if (is({ provisioning: { work: { gathering: { imds: 'fetching' } } } })) {
    return {
      key: 'gathering',
      attempts: 'imds',
      budgetSecs: config.imds.total_retry_timeout_secs,
      text: ({ attempt, left }) => `waiting for IMDS: attempt ${attempt}${seconds(left)}`,
    };
  }
  if (is({ provisioning: { work: 'gathering' } })) {
    // IMDS is done; the media's own deadline counts from the start of gathering too.
    return { key: 'gathering', budgetSecs: config.provisioning_media.timeout_secs, text: () => 'reading the provisioning media' };
  }
  return null;
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
    private readonly now: () => number = () => performance.now(),
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
    const covered = phase.key === 'pool wait' ? pollSecs(snapshot.context.config) : (left ?? 0);
    this.sink.status(phase.text({ attempt, left }), snapshot.status === 'active' ? (covered + EXTEND_SLACK_SECS) * 1e6 : undefined);
  }
}
