/**
 * What the outside world must see during `bootstate provision`, written from the protocol (docs/protocol.md#imds,
 * docs/protocol.md#health-reports, docs/protocol.md#provisioning-report) and docs/architecture.md, not from
 * `machines/provisioning.ts`: it never reads the chart. It is built from what the run read before the chart (the
 * config, the platform check, the instance lock, the VM id, the marker) and told what happened — an actor finished or
 * failed, the IMDS request was written, the clock moved, SIGTERM arrived — and answers which actors are in flight,
 * which were started (reports with their health and encoded failure, OS steps with the plan, marker writes), which
 * KVP records were written, and, once the run is over, its output (result, exit code, failure code, whether the
 * fabric accepted it).
 *
 * The rules, one line each:
 * - what was read before the chart decides at once, in this order: the instance lock held by another agent → nothing
 *   is reported, READY, its ALREADY_RUNNING exit code; not an Azure VM → nothing is sent, exit 0 (`not-on-azure`),
 *   the config failure or not; the VM id unreadable → report that; a config failure → report it (the VM id is
 *   known) unless the marker proves the outcome (below); the marker unreadable → report that. A platform check that
 *   failed → a warning "platform check failed: …; provisioning goes on", and the run goes on.
 * - marker `provisioned` → nothing is reported, exit 0; `report-pending` → make the host keys an earlier, stopped
 *   boot left missing (its failure is a warning "missing ssh host keys not made: …"; left out with the host keys
 *   step), then READY and Ready; `none` → provision. An outcome once known is never reported as its opposite: with a
 *   config that failed to load, `provisioned` and `report-pending` still decide (nothing reported, exit 0; Ready
 *   reported), the config failure a warning naming it; only a boot that would provision or wait again reports it
 *   (ProvisioningFailed).
 * - provisioning: InProgress report ‖ IMDS (retry on retryable errors until its total deadline) ‖ media. The
 *   IMDS request gets a head start: the media read and the host keys start once it has been written (or its
 *   attempt ended), or 50 ms after the work began, whichever is first; the InProgress report starts at once.
 * - gathering ends when both IMDS and the media are over, in whichever order they answer: the media's pool flags,
 *   CustomData and password are inputs of the plan even when IMDS names none of them. The media read has its own
 *   deadline (`[provisioning_media] timeout_secs`): then a warning "provisioning media: not read within N s; …"
 *   and the plan is made without it.
 * - once gathered, when `[azure_proxy_agent] require`, or `enable` and this run's media (the customer's once claimed)
 *   says ProvisionGuestProxyAgent: wait for the Guest Proxy Agent first (its failure fails the run; no answer within
 *   wait_secs + 10 s → PROXY_AGENT_STATUS_FAILURE); then the decisions below.
 * - the SSH host keys are replaced from the start of the work, beside IMDS and the media (they depend on neither);
 *   their failure fails the run at once; a pool VM leaves them unfinished and makes them again once claimed. The
 *   types that step leaves for the background (sshd reads keys per connection) are made once the OS is configured
 *   (READY); their failure, or the OS timeout counted from then, is a warning, and the run goes on.
 * - keys named by fingerprint or key pairs in the plan, or `[certificates] place = true`: the goal state's
 *   certificates are fetched once the user exists, before the SSH keys (retried while retryable, until
 *   `[certificates] total_retry_timeout_secs`); their keys join the plan's. A failure, or that deadline, is a warning
 *   "certificates: …" naming the keys not installed, unless those keys were the only way in (no other key, password
 *   logins off): then the run fails with it.
 * - with a plan (IMDS, else media with a username) → validate → hostname ‖ (user → (password ‖ SSH keys)) ‖ (host
 *   keys done → sshd), each phase bounded by the OS timeout; then (configured, READY) the report-pending marker beside
 *   the background host keys and the hostname's publication; once all three are over, Ready; then the provisioned
 *   marker. The report-pending marker that
 *   cannot be written fails the run (Ready would promise a VM that stays provisioned after a reboot).
 * - systemd is told READY (once) when the OS is configured, when the Ready report (a resumed one) or the failure
 *   report starts, or when the run ends without provisioning (already provisioned, not on Azure): logins never wait
 *   for a report, nor for the background host keys. A pool VM waiting to be claimed
 *   has not told it; stopped while waiting, it never does.
 * - once the OS is configured (READY: logins do not wait for it) and the hostname step was not left out, the DHCP
 *   client is asked to send the name (Azure DNS); best effort: its failure or its own deadline
 *   (`[hostname_publishing] timeout_secs`) is a warning "hostname not published: …" and the run goes on; the Ready
 *   report waits for it. A stop once the marker is down abandons it, as it does the background host keys.
 * - any failing step → ProvisioningFailed naming that step (its code), no marker, its exit code.
 * - a final report: KVP record first, then HTTP attempts (retry while retryable) until its total deadline.
 * - Ready not accepted → failed, exit 1, nothing more; the provisioned marker failing after Ready → failed, reported.
 * - SIGTERM → ProvisioningFailed "terminated" with a 1.5 s budget (first SIGTERM counts); ignored while writing
 *   the provisioned marker. Once the OS is configured an outcome is known and a stop never reports its opposite: no
 *   ProvisioningFailed, the report-pending marker on disk, exit 1 `terminated`, nothing reported — while that marker
 *   is written the run waits for it (if it then fails, the marker's failure is reported, with the short budget);
 *   once it is down (background host keys, the resumed boot's missing keys, the Ready report) the run ends at once.
 *   The marker on disk is checked after every event.
 * - steps left out (`--only`/`--skip`) never start; the others run as usual (keys and password once the user exists
 *   or its step is left out); validation and every report still happen.
 * Pool VMs (docs/preprovisioned.md, docs/protocol.md#pre-provisioning-type):
 * - a pool type from IMDS or the media: Savable, PreprovisionedOSDisk or unknown wins over Running (the first of IMDS,
 *   media that is neither None nor Running); an unknown type fails the run naming it (`pps_type`). Every report and
 *   KVP record of a pool VM carries its type.
 * - Running → Ready to the pool (KVP first) → waiting marker → poll reprovisiondata (a "not yet" waits the poll
 *   interval, counting attempts and remembering the error kind; anything else fails).
 * - Savable → the same Ready, told that its answer may be lost (the NIC is unplugged or the VM saved once the host has
 *   it) → waiting marker → wait for the host to detach the NIC (deadline `nic_detach_timeout_secs`: TIMEOUT, phase
 *   preprovisioning) → wait for a NIC not tried yet to be attached, then try it as the primary one (link, DHCP, the
 *   fabric answers through it); one that is not goes back to the wait, remembered as tried; the whole of this, from
 *   the detach, within `nic_attach_timeout_secs` (TIMEOUT, phase preprovisioning); any other failure of these waits
 *   fails the run → poll as Running.
 * - while a Running or Savable VM polls (a resumed one too), beside the polls: wait for a NIC's carrier to go down and
 *   up (the claim moving it), then renew its lease through the OS's stack, then wait again; a renewal that fails is a
 *   warning "lease not renewed: …", a watch that fails a warning "network watch stopped: …" and the polls go on
 *   alone. Both are given up with the wait (the claim, SIGTERM, a poll failing for good).
 * - PreprovisionedOSDisk → the same Ready → its own marker (waiting-for-shutdown), never the reuse marker → wait with
 *   no deadline; SIGTERM there is the host's shutdown: exit 0, `pool-shutdown`, nothing reported. A boot that finds
 *   that marker and is still such a pool VM was started again instead of shut down: ProvisioningFailed
 *   PPS_NOT_SHUT_DOWN naming the type; with any other type it goes on as that type says.
 * - the claim replaces what the pool VM had (metadata, media, their failures): provisioning starts again (InProgress,
 *   IMDS afresh, the media reader told the VM is claimed) with the customer's document; IMDS still naming a pool
 *   type then fails (`key=extended.compute.ppsType`).
 * - marker `waiting-for-reuse` → straight back to polling as Running; `waiting-for-reuse-savable` (a Savable VM's own)
 *   → as Savable, the wait for an attached NIC (one present counts) and the probe, within `nic_attach_timeout_secs`,
 *   then polling. While a Savable VM polls, the NIC's going away (a resumed run may have found the pool's) sends it
 *   back to that wait, its deadline afresh; a watch that fails is a warning "NIC watch stopped: …". SIGTERM while
 *   waiting (a Savable VM's NIC waits included) → exit 0, `waiting-for-reuse`, no failure report.
 * - SIGTERM while the waiting or shutdown marker is written (the pool's Ready accepted): the run waits for the marker,
 *   then ends as a stop in the wait does (`waiting-for-reuse` or `pool-shutdown`, exit 0, no failure report); if the
 *   marker then fails, that failure is reported, with the short budget.
 */
// How long the media read and the host keys wait at most for the IMDS request to be written: one bound, the chart's.
import { IMDS_HEAD_START_MS } from '../../machines/provisioning/head-start.js';
import type { InstanceMetadata, MediaMetadata } from '../../src/core/metadata.js';
import { DEFAULT_CONFIG, type Config } from '../../src/config/defaults.js';
import type { Failure } from '../../src/core/errors.js';
import { describeFailure as describeReported, failure as failureOf, KINDS, toFailure } from '../../src/core/errors.js';
import { canonicalPpsType, describeFailure, describePlan, expectedPlan, pollKind, poolOf, reasonOf, seen, type SeenFailure, type SeenOutput, type SeenPlan } from './oracle-seen.js';

export { describeFailure, describePlan, expectedPlan, type SeenFailure, type SeenOutput, type SeenPlan } from './oracle-seen.js';

type Lane = string[];

/** What the run read before the chart, as the protocol names it: each read, or the failure it ended in. */
export interface OracleStart {
  config?: Config;
  startup?: {
    configFailure?: Failure | null;
    platform?: { onAzure: boolean; why: string } | { failure: Failure };
    lockRefused?: Failure | null;
    vmId?: string | null;
    vmIdFailure?: Failure | null;
    marker?: 'none' | 'provisioned' | 'report-pending' | 'waiting-for-reuse' | 'waiting-for-reuse-savable' | 'waiting-for-shutdown' | null;
    markerFailure?: Failure | null;
  };
}

type Report = { kind: 'ready' | 'failure'; attempt: 'requesting' | 'backoff'; retryAt: number; deadline: number; lastError?: string };
const OS_LANES: Lane[] = [['hostname'], ['user', 'password'], ['sshd'], ['custom-data']];
/** The lane sshd is in: it waits for the host keys, made since the work began. */
const SSHD_LANE = 2;
/** Started beside the password once the user exists, as a lane of its own right after the account's. */
const KEYS_LANE: Lane = ['ssh-keys'];
/** The name `--only`/`--skip` give each OS step; publishing the hostname goes with the hostname. */
const STEP_OF: Record<string, string> = {
  hostname: 'hostname',
  hostnamePublish: 'hostname',
  user: 'user',
  password: 'password',
  'ssh-keys': 'ssh-keys',
  sshd: 'sshd',
  'host-keys': 'host-keys',
  'custom-data': 'custom-data',
};

export class ProvisioningOracle {
  now = 0;
  /** Every actor start so far, described (`readyReport Ready vm=…`, `user imds:azureuser@vm`). */
  starts: string[] = [];
  kvp: string[] = [];
  /** What systemd was told. */
  systemd: string[] = [];
  output: SeenOutput | null = null;
  private warnings: string[] = [];
  /** The warnings the run has collected by now (the log lists them at its end). */
  get warningsSoFar(): readonly string[] {
    return this.warnings;
  }

  private phase: 'work' | 'pool' | 'completingKeys' | 'report' | 'provisionedMarker' | 'end' = 'work';
  /**
   * This VM id's report-pending marker: `writing` once the OS is configured, `down` when that write finished (the
   * next boot reports Ready), or found by the run before the chart. Once it is down, nothing turns into a failure.
   */
  reportPending: 'none' | 'writing' | 'down' = 'none';
  /** The marker this VM id has on disk: the one the run found, then the last one written. */
  marker: 'none' | 'provisioned' | 'report-pending' | 'waiting-for-reuse' | 'waiting-for-reuse-savable' | 'waiting-for-shutdown' = 'none';
  /** The marker the run found before the chart. */
  private found: string | null = 'none';
  private config: Config = DEFAULT_CONFIG;
  private vmId = '00000000-0000-0000-0000-000000000000';
  private failure: SeenFailure | null = null;
  private terminating = false;
  /** False once the KVP writer has failed: reports still go over HTTP, without their KVP records. */
  kvpAlive = true;
  // provisioning
  private inProgress: 'sending' | 'backoff' | 'over' = 'over';
  private inProgressRetryAt = 0;
  private imds: 'requesting' | 'backoff' | 'over' = 'over';
  private imdsRetryAt = 0;
  private imdsDeadline = 0;
  private imdsFailure: SeenFailure | null = null;
  private lastImdsError: string | undefined;
  private metadata: InstanceMetadata | null = null;
  /** The IMDS request's head start: the media read and the host keys wait until it is over. */
  private headStart: 'waiting' | 'over' = 'over';
  private headStartEnds = 0;
  private mediaReading = false;
  /**
   * The host keys wait for the head start, then are made (until done, failed or the work is left); `waiting`: the
   * step left types for the background; `adding`: those are being made.
   */
  private hostKeys: 'pending' | 'running' | 'waiting' | 'adding' | 'over' = 'over';
  private hostKeysLater: string[] = [];
  private mediaDeadline = 0;
  private mediaFailure: SeenFailure | null = null;
  private media: MediaMetadata | null = null;
  private stage: 'gathering' | 'proxyAgent' | 'validating' | 'os' | 'configured' = 'gathering';
  private proxyChecked = false;
  private proxyDeadline = 0;
  private plan: SeenPlan | null = null;
  /** The keys named by fingerprint and the key pairs of the validated plan. */
  private fingerprints: string[] = [];
  private keyPairs: string[] = [];
  private certificates: 'requesting' | 'backoff' | 'over' = 'over';
  private certificatesRetryAt = 0;
  private certificatesDeadline = 0;
  private certificatesLastError: string | undefined;
  private certificatesSettled = false;
  private osDeadline = 0;
  private publishDeadline = 0;
  /** The hostname's publication, started once the OS is configured (READY) unless the hostname step was left out. */
  private publishing: 'none' | 'running' | 'over' = 'none';
  private warningsBeforeOs: number | null = null;
  private lanes: Lane[] = [];
  private report: Report | null = null;
  // a pool VM
  /** The pool type every report and KVP record carries. */
  private ppsType = 'None';
  private pool: 'ready' | 'readyBackoff' | 'marker' | 'detaching' | 'listening' | 'probing' | 'polling' | 'pausing' | 'shutdownMarker' | 'awaitingShutdown' = 'ready';
  private poolDeadline = 0;
  /** A Savable VM's NIC waits: their deadlines, the NIC being tried, those tried that were not the primary. */
  private detachDeadline = 0;
  private attachDeadline = 0;
  private nic: string | null = null;
  private nicsTried: string[] = [];
  /** While polling: the watch of the NIC's carrier, the renewal of its lease, or neither once the watch failed. */
  private lease: 'watching' | 'renewing' | 'off' = 'off';
  /** While a Savable VM polls: the watch for its NIC going away. */
  private nicWatch: 'watching' | 'off' = 'off';
  private poolRetryAt = 0;
  private polls = 0;
  private pollError: string | null = null;
  /** The customer's ovf-env.xml, once claimed. */
  private claim: MediaMetadata | null = null;
  private placeholderMediaFailure = false;

  constructor({ config, startup = {} }: OracleStart = {}) {
    this.config = config ?? DEFAULT_CONFIG;
    this.begin(startup);
  }

  /** Where what was read before the chart leads. */
  private begin(startup: NonNullable<OracleStart['startup']>): void {
    this.marker = startup.marker ?? 'none';
    this.found = startup.markerFailure ? null : this.marker;
    const platform = startup.platform;
    if (platform && 'failure' in platform) this.warnings.push(`platform check failed: ${reasonOf(platform.failure)}; provisioning goes on`);
    if (startup.lockRefused) {
      this.tellReady();
      return this.end(this.failedOutput('alreadyRunning', seen(startup.lockRefused), false));
    }
    if (platform && 'onAzure' in platform && !platform.onAzure) {
      this.tellReady();
      return this.end({ state: 'notOnAzure', result: 'not-on-azure', exitCode: 0, reported: false });
    }
    if (startup.vmIdFailure) {
      this.failure = seen(startup.vmIdFailure);
      return this.reportFailure();
    }
    this.vmId = startup.vmId ?? this.vmId;
    const marker = startup.markerFailure ? null : (startup.marker ?? 'none');
    // The marker proves the outcome: a config that failed to load cannot turn it into its opposite, only warn.
    const configIgnored = (then: string) => {
      if (startup.configFailure) this.warnings.push(`${describeReported(startup.configFailure)}; ${then}`);
    };
    if (marker === 'provisioned') {
      configIgnored('already provisioned: nothing is reported');
      this.tellReady();
      return this.end({ state: 'alreadyProvisioned', result: 'already-provisioned', exitCode: 0, reported: false });
    }
    if (marker === 'report-pending') {
      configIgnored('the OS was configured on an earlier boot: Ready is reported');
      this.reportPending = 'down';
      return this.completeHostKeys();
    }
    if (startup.configFailure) {
      this.failure = seen(startup.configFailure);
      return this.reportFailure();
    }
    if (startup.markerFailure) {
      this.failure = seen(startup.markerFailure);
      return this.reportFailure();
    }
    switch (marker) {
      case 'waiting-for-reuse':
        this.ppsType = 'Running';
        return this.poll();
      case 'waiting-for-reuse-savable':
        // The NIC may be the pool's, gone or the customer's: one present, or the next attached, is tried again.
        this.ppsType = 'Savable';
        this.phase = 'pool';
        this.attachDeadline = this.now + this.config.preprovisioning.nic_attach_timeout_secs * 1000;
        return this.listenForNic();
      default:
        return this.provision();
    }
  }

  /** The ids of the actors in flight. */
  live(): string[] {
    const ids: string[] = [];
    switch (this.phase) {
      case 'provisionedMarker':
        ids.push(this.phase);
        break;
      case 'completingKeys':
        ids.push('missingHostKeys');
        break;
      case 'work':
        if (this.inProgress === 'sending') ids.push('inProgressReport');
        // In the OS stage the host keys head sshd's lane.
        if (this.hostKeys === 'running' && this.stage !== 'os') ids.push('host-keys');
        if (this.hostKeys === 'adding') ids.push('laterHostKeys');
        if (this.reportPending === 'writing') ids.push('pendingMarker');
        if (this.publishing === 'running') ids.push('hostnamePublish');
        if (this.stage === 'gathering') {
          if (this.imds === 'requesting') ids.push('imds');
          if (this.mediaReading) ids.push('media');
        }
        if (this.stage === 'proxyAgent') ids.push('proxyAgent');
        if (this.stage === 'validating') ids.push('validate');
        if (this.stage === 'os') for (const lane of this.lanes) if (lane.length && (lane[0] !== 'certificates' || this.certificates === 'requesting')) ids.push(lane[0]!);
        break;
      case 'pool':
        if (this.pool === 'ready') ids.push('poolReadyReport');
        if (this.pool === 'marker') ids.push('waitingMarker');
        if (this.pool === 'polling') ids.push('reprovision');
        if ((this.pool === 'polling' || this.pool === 'pausing') && this.lease !== 'off') ids.push(this.lease === 'watching' ? 'carrier' : 'lease');
        if ((this.pool === 'polling' || this.pool === 'pausing') && this.nicWatch === 'watching') ids.push('nicGone');
        if (this.pool === 'detaching') ids.push('nicDetach');
        if (this.pool === 'listening') ids.push('nicAttach');
        if (this.pool === 'probing') ids.push('primaryNic');
        if (this.pool === 'shutdownMarker') ids.push('shutdownMarker');
        break;
      case 'report':
        if (this.report!.attempt === 'requesting') ids.push(this.report!.kind === 'ready' ? 'readyReport' : 'failureReport');
        break;
      case 'end':
        break;
    }
    return ids.sort();
  }

  /** The config leaves some OS steps out. */
  get skipsSteps(): boolean {
    return this.config.steps.skip.length > 0;
  }

  get done(): boolean {
    return this.phase === 'end';
  }

  /** The host keys head sshd's lane: where a path lets them leave a type for the background. */
  get hostKeysInOs(): boolean {
    return this.phase === 'work' && this.stage === 'os';
  }

  /** The plan validation was given, so a path can answer with the validated one. */
  get planToValidate(): SeenPlan | null {
    return this.phase === 'work' && this.stage === 'validating' ? expectedPlan(this.metadata, this.claim ?? this.media) : null;
  }

  /** The work waits for the IMDS request to be written: where a path may say it was. */
  get awaitingImdsWrite(): boolean {
    return this.phase === 'work' && this.headStart === 'waiting';
  }

  /**
   * While a Savable VM tries an attached NIC, a second before the attach deadline: the walk moves the clock there so
   * that a NIC found not to be the primary that late shows the deadline counted from the detach, not restarted.
   */
  get lateInAttach(): number | null {
    const late = this.attachDeadline - 1000;
    return this.phase === 'pool' && this.pool === 'probing' && this.now < late ? late : null;
  }

  /** When the next deadline or retry falls due, if any. */
  get nextDue(): number | null {
    return this.nextTimer()?.at ?? null;
  }

  /** Which actors a model path may finish now: bounds the interleavings of the parallel parts (see oracle-paths.ts). */
  movable(): string[] {
    const live = this.live();
    if (this.phase !== 'work') return live;
    // Before the head start is over only it moves (the request is written, or its bound passes): the IMDS actor
    // says its request was written before its attempt can end.
    if (this.headStart === 'waiting') return [];
    const atStart = this.stage === 'gathering' && this.imds === 'requesting' && this.mediaReading && this.lastImdsError === undefined;
    if (this.inProgress === 'backoff') return [];
    return live.filter((id) => {
      if (id === 'inProgressReport') return atStart;
      if (id === 'host-keys' && this.stage !== 'os') return atStart;
      // The background host keys end once the OS is configured (their other orders change nothing anyone sees).
      if (id === 'laterHostKeys') return this.stage === 'configured';
      // IMDS may answer before the media only on its first attempt: both orders of arrival on every path's first
      // answers, without multiplying the retries' interleavings (arrival-order.test.ts plays every pair both ways).
      if (id === 'imds') return !this.mediaReading || this.lastImdsError === undefined;
      if (this.stage === 'os') {
        const lane = this.lanes.findIndex((l) => l[0] === id);
        return this.lanes.slice(0, lane).every((l) => l.length === 0);
      }
      return true;
    });
  }

  /** A copy to explore from. */
  clone(): ProvisioningOracle {
    return Object.assign(Object.create(ProvisioningOracle.prototype), structuredClone({ ...this })) as ProvisioningOracle;
  }

  /**
   * What decides the answers to the next events, apart from history and clock readings: two oracles with the same
   * key answer alike up to the exact times, failure details and the KVP writer (paths that explore from one stand
   * for the other). The coarse key says only how far the work got: SIGTERM is explored once per such point.
   */
  key(coarse = false): string {
    const report = this.report && { kind: this.report.kind, attempt: this.report.attempt, lastError: !!this.report.lastError };
    const common = {
      phase: this.phase,
      failure: this.failure?.code ?? null,
      terminating: this.terminating,
      configLoaded: this.config !== DEFAULT_CONFIG,
      skip: this.config.steps.skip.join(),
      // Warnings show only in the output at the end: runs whose OS steps warned are followed there.
      osWarnings: this.warningsBeforeOs === null ? [] : this.warnings.slice(this.warningsBeforeOs),
      pps: this.ppsType,
      // The platform check's warning shows only in the output at the end: such runs are followed there.
      platformUnknown: this.warnings.some((w) => w.startsWith('platform check failed')),
      // Until validation, whether the placeholder's media was unusable: nothing of it may reach the customer's run.
      claimed: this.claim && (this.phase !== 'work' || this.stage === 'gathering') ? `placeholder media failed: ${this.placeholderMediaFailure}` : this.claim !== null,
      // Until the decision, whether an earlier boot waited for the host's shutdown.
      shutdownAwaited: this.found === 'waiting-for-shutdown' && this.phase === 'work' && this.stage === 'gathering' && !this.claim,
    };
    // Once reporting, the failure's code is fixed and already checked where the report started.
    if (this.phase === 'report') return JSON.stringify({ ...common, failure: this.failure !== null, report });
    // What the pool VM had is kept apart, so paths show that the claim replaces it.
    if (this.phase === 'pool') {
      return JSON.stringify({
        ...common,
        pool: this.pool,
        polled: this.pollError !== null,
        triedNics: this.nicsTried.length > 0,
        lateInAttach: (this.pool === 'listening' || this.pool === 'probing') && this.now >= this.attachDeadline - 1000,
        lease: this.lease,
        nicWatch: this.nicWatch,
        had: [this.mediaFailure?.code, this.media?.username, this.imdsFailure?.code],
      });
    }
    if (this.phase !== 'work') return JSON.stringify({ ...common, output: this.output });
    if (coarse) return JSON.stringify({ ...common, stage: this.stage, hostKeys: this.hostKeys, headStart: this.headStart, reportPending: this.reportPending });
    return JSON.stringify({
      ...common,
      // Whether InProgress was accepted or abandoned changes nothing later; only its retry timer does.
      inProgress: this.inProgress === 'backoff',
      imds: this.imds,
      headStart: this.headStart,
      hostKeys: this.hostKeys,
      retried: this.lastImdsError !== undefined,
      imdsFailure: this.imdsFailure?.code ?? null,
      metadata: this.metadata && { password: !this.metadata.disablePasswordAuthentication, pps: this.metadata.ppsType },
      media: this.mediaReading ? 'reading' : this.media === null ? 'none' : `${this.media.username ? 'user' : 'nouser'} ${this.media.ppsType}`,
      mediaFailure: this.mediaFailure?.code ?? null,
      stage: this.stage,
      reportPending: this.reportPending,
      lanes: this.lanes.map((l) => l[0] ?? 'done'),
      // Until the certificates are settled, what they are wanted for: plans that differ only there explore apart.
      certificates: this.certificatesPending() && {
        state: this.certificates,
        retried: this.certificatesLastError !== undefined,
        fingerprints: this.fingerprints.length,
        pairs: this.keyPairs.length,
        onlyWayIn: this.plan!.sshKeys === 0 && !this.plan!.passwordAuthentication,
      },
    });
  }

  // ---- what happened ----

  finished(id: string, output: unknown): void {
    this.expectLive(id);
    switch (id) {
      case 'inProgressReport':
        this.inProgress = 'over';
        return;
      case 'imds':
        this.metadata = output as InstanceMetadata;
        this.imdsFailure = null;
        this.imds = 'over';
        return this.gathered();
      case 'media':
        this.media = output as MediaMetadata | null;
        this.mediaReading = false;
        return this.gathered();
      case 'proxyAgent':
        this.proxyChecked = true;
        this.stage = 'gathering';
        return this.decide();
      case 'validate': {
        const { source, username, hostname, passwordAuthentication, passwordProvided } = output as SeenPlan & { sshKeys: string[] };
        const sshKeys = (output as { sshKeys: string[] }).sshKeys.length;
        this.plan = { source, username, hostname, sshKeys, passwordAuthentication, passwordProvided };
        const certificates = output as { keyFingerprints?: string[]; keyPairs?: Array<{ fingerprint: string }> };
        this.fingerprints = certificates.keyFingerprints ?? [];
        this.keyPairs = (certificates.keyPairs ?? []).map((p) => p.fingerprint);
        this.certificates = 'over';
        this.certificatesLastError = undefined;
        this.certificatesSettled = false;
        this.stage = 'os';
        this.osDeadline = this.now + this.config.os.timeout_secs * 1000;
        this.warningsBeforeOs = this.warnings.length;
        this.lanes = OS_LANES.map((lane) => lane.filter((id) => !this.skipped(id)));
        // The host keys, still being made, head sshd's lane: sshd starts once they are done.
        if (this.hostKeys === 'running') this.lanes[SSHD_LANE]!.unshift('host-keys');
        for (const lane of this.lanes) if (lane.length && lane[0] !== 'host-keys') this.start(lane[0]!);
        if (this.skipped('user')) this.addKeysLane(2);
        return this.osDone();
      }
      case 'poolReadyReport':
        if (this.ppsType === 'PreprovisionedOSDisk') {
          this.pool = 'shutdownMarker';
          return this.start('shutdownMarker');
        }
        this.pool = 'marker';
        return this.start('waitingMarker');
      case 'waitingMarker':
        this.marker = this.ppsType === 'Savable' ? 'waiting-for-reuse-savable' : 'waiting-for-reuse';
        if (this.terminating) return this.end({ state: 'waitingInterrupted', result: 'waiting-for-reuse', exitCode: 0, reported: true });
        if (this.ppsType !== 'Savable') return this.poll();
        this.pool = 'detaching';
        this.detachDeadline = this.now + this.config.preprovisioning.nic_detach_timeout_secs * 1000;
        return this.start('nicDetach');
      case 'nicDetach':
        this.attachDeadline = this.now + this.config.preprovisioning.nic_attach_timeout_secs * 1000;
        return this.listenForNic();
      case 'nicAttach':
        this.pool = 'probing';
        this.nic = (output as { name: string }).name;
        return this.start('primaryNic', `nic=${this.nic}`);
      case 'primaryNic':
        return this.poll();
      case 'carrier':
        this.lease = 'renewing';
        return this.start('lease', `nic=${output as string}`);
      case 'lease':
        return this.watchCarrier();
      case 'nicGone':
        // The NIC polled through went away: the wait for an attached one starts afresh, its deadline too.
        this.nicWatch = 'off';
        this.lease = 'off';
        this.nicsTried = [];
        this.attachDeadline = this.now + this.config.preprovisioning.nic_attach_timeout_secs * 1000;
        return this.listenForNic();
      case 'shutdownMarker':
        this.marker = 'waiting-for-shutdown';
        if (this.terminating) return this.end({ state: 'shutDownInPool', result: 'pool-shutdown', exitCode: 0, reported: true });
        this.pool = 'awaitingShutdown';
        return;
      case 'reprovision':
        // The customer's document replaces everything the pool VM had; IMDS is asked afresh.
        this.claim = output as MediaMetadata;
        this.placeholderMediaFailure = this.mediaFailure !== null;
        this.metadata = null;
        this.media = null;
        this.mediaFailure = null;
        this.imdsFailure = null;
        this.lastImdsError = undefined;
        return this.provision();
      case 'host-keys': {
        this.hostKeysLater = (output as string[] | undefined) ?? [];
        this.hostKeys = this.hostKeysLater.length ? 'waiting' : 'over';
        return this.stage === 'os' ? this.laneStepDone(id) : undefined;
      }
      case 'laterHostKeys':
        return this.laterHostKeysOver();
      case 'certificates':
        this.certificates = 'over';
        this.certificatesSettled = true;
        this.plan = { ...this.plan!, sshKeys: this.plan!.sshKeys + (output as string[]).length };
        return this.laneStepDone(id);
      case 'pendingMarker':
        this.reportPending = 'down';
        this.marker = 'report-pending';
        // A stop while it was written waited for it: Ready is left for the next boot.
        if (this.terminating) return this.end(this.failedOutput('readyNotAccepted', null, false, { code: 'TERMINATED' }));
        return this.hostKeys === 'adding' || this.publishing === 'running' ? undefined : this.reportReady();
      case 'hostnamePublish':
        return this.publishOver();
      case 'missingHostKeys':
        return this.reportReady();
      case 'readyReport':
        return this.enter('provisionedMarker');
      case 'failureReport':
        return this.end(this.failedOutput('failed', this.failure, true));
      case 'provisionedMarker':
        this.marker = 'provisioned';
        return this.end({ state: 'provisioned', result: 'provisioned', exitCode: 0, reported: true });
      default:
        return this.laneStepDone(id);
    }
  }

  failed(id: string, error: unknown): void {
    if (id === 'kvp') {
      // The KVP writer stopped: reports still go over HTTP, only the records are lost.
      this.kvpAlive = false;
      this.warnings.push(`kvp writer stopped: ${reasonOf(error)}`);
      return;
    }
    this.expectLive(id);
    const retryable = toFailure(error).retryable;
    switch (id) {
      case 'inProgressReport':
        if (retryable) {
          this.inProgress = 'backoff';
          this.inProgressRetryAt = this.now + this.config.wireserver.retry_interval_secs * 1000;
        } else this.inProgress = 'over';
        return;
      case 'imds':
        if (retryable) {
          this.lastImdsError = reasonOf(error);
          this.imds = 'backoff';
          this.imdsRetryAt = this.now + this.config.imds.retry_interval_secs * 1000;
        } else {
          this.imdsFailure = seen(error);
          this.imds = 'over';
          this.gathered();
        }
        return;
      case 'media': {
        this.warnings.push(`provisioning media: ${reasonOf(error)}`);
        this.mediaReading = false;
        // Validation is told why the media failed; only media that is there but unusable fails a run that needed it.
        this.mediaFailure = seen(error);
        return this.gathered();
      }
      case 'readyReport':
      case 'failureReport': {
        const report = this.report!;
        report.lastError = reasonOf(error);
        if (retryable) {
          report.attempt = 'backoff';
          const interval = this.config.wireserver.retry_interval_secs * 1000;
          report.retryAt = this.now + (report.kind === 'failure' && this.terminating ? Math.min(200, interval) : interval);
          return;
        }
        return report.kind === 'ready'
          ? this.end(this.failedOutput('readyNotAccepted', null, false, seen(error)))
          : this.end(this.failedOutput('failedUnreported', this.failure, false));
      }
      case 'provisionedMarker':
        return this.end(this.failedOutput('markerNotWritten', seen(error), true));
      case 'hostnamePublish':
        this.warnings.push(`hostname not published: ${reasonOf(error)}`);
        return this.publishOver();
      case 'laterHostKeys':
        this.warnings.push(`ssh host keys ${this.hostKeysLater.join(', ')} not made: ${reasonOf(error)}`);
        return this.laterHostKeysOver();
      case 'missingHostKeys':
        this.warnings.push(`missing ssh host keys not made: ${reasonOf(error)}`);
        return this.reportReady();
      case 'certificates':
        if (retryable) {
          this.certificatesLastError = reasonOf(error);
          this.certificates = 'backoff';
          this.certificatesRetryAt = this.now + this.config.wireserver.retry_interval_secs * 1000;
          return;
        }
        return this.certificatesOver(toFailure(error));
      case 'poolReadyReport':
        if (retryable) {
          this.pool = 'readyBackoff';
          this.poolRetryAt = this.now + this.config.wireserver.retry_interval_secs * 1000;
          return;
        }
        this.failure = seen(error);
        return this.reportFailure();
      case 'carrier':
        // The watch is an aid: polling goes on without it.
        this.warnings.push(`network watch stopped: ${reasonOf(error)}`);
        this.lease = 'off';
        return;
      case 'nicGone':
        this.warnings.push(`NIC watch stopped: ${reasonOf(error)}`);
        this.nicWatch = 'off';
        return;
      case 'lease':
        this.warnings.push(`lease not renewed: ${reasonOf(error)}`);
        return this.watchCarrier();
      case 'primaryNic':
        // Not the primary NIC: the wait goes on for another one.
        if (retryable) {
          this.nicsTried.push(this.nic!);
          return this.listenForNic();
        }
        this.failure = seen(error);
        return this.reportFailure();
      case 'reprovision':
        if (retryable) {
          this.polls++;
          this.pollError = pollKind(error);
          this.pool = 'pausing';
          this.poolRetryAt = this.now + this.config.preprovisioning.poll_interval_secs * 1000;
          return;
        }
        this.failure = seen(error);
        return this.reportFailure();
      case 'pendingMarker':
        // Ready would promise a VM that stays provisioned after a reboot: without the marker it cannot.
        this.reportPending = 'none';
        this.failure = seen(error);
        return this.reportFailure();
      default:
        // validate, every OS step, the waiting marker
        this.failure = seen(error);
        return this.reportFailure();
    }
  }

  /** The IMDS actor's request has been written to its socket, or its attempt ended without that. */
  imdsSent(): void {
    if (this.awaitingImdsWrite) this.headStartOver();
  }

  /** SIGTERM. */
  terminate(): void {
    if (this.phase === 'end' || this.phase === 'provisionedMarker') return;
    // Once the OS is configured a stop is never a failure: the marker is made durable first, then Ready is left.
    if (this.phase === 'work' && this.reportPending === 'writing') {
      this.terminating = true;
      return;
    }
    if ((this.phase === 'work' && this.reportPending === 'down') || this.phase === 'completingKeys') {
      return this.end(this.failedOutput('readyNotAccepted', null, false, { code: 'TERMINATED' }));
    }
    // Ready reached the pool and its marker is being written: the stop waits for it.
    if (this.phase === 'pool' && (this.pool === 'marker' || this.pool === 'shutdownMarker')) {
      this.terminating = true;
      return;
    }
    // Ready reached the pool and the marker is down: the next boot waits again.
    if (this.phase === 'pool' && ['polling', 'pausing', 'detaching', 'listening', 'probing'].includes(this.pool)) {
      return this.end({ state: 'waitingInterrupted', result: 'waiting-for-reuse', exitCode: 0, reported: true });
    }
    // An OS-disk pool VM waited for exactly this: the host shuts it down.
    if (this.phase === 'pool' && this.pool === 'awaitingShutdown') {
      return this.end({ state: 'shutDownInPool', result: 'pool-shutdown', exitCode: 0, reported: true });
    }
    if (this.phase === 'report' && this.report!.kind === 'ready') {
      return this.end(this.failedOutput('readyNotAccepted', null, false, { code: 'TERMINATED' }));
    }
    if (this.phase === 'report' && this.terminating) return;
    this.terminating = true;
    this.failure ??= { code: 'TERMINATED' };
    this.reportFailure();
  }

  /** The clock moved to `to`: every deadline and retry due by then happens, earliest first. */
  advanceTo(to: number): void {
    for (;;) {
      const next = this.nextTimer();
      if (!next || next.at > to) break;
      this.now = next.at;
      next.fire();
    }
    this.now = to;
  }

  // ---- the rules ----

  private nextTimer(): { at: number; fire: () => void } | null {
    const timers: Array<{ at: number; fire: () => void }> = [];
    if (this.phase === 'work') {
      if (this.headStart === 'waiting') timers.push({ at: this.headStartEnds, fire: () => this.headStartOver() });
      if (this.inProgress === 'backoff') timers.push({ at: this.inProgressRetryAt, fire: () => this.sendInProgress() });
      if (this.stage === 'gathering' && this.imds !== 'over') {
        // The deadline first: a retry due at the same instant is not taken.
        timers.push({
          at: this.imdsDeadline,
          fire: () => {
            this.imdsFailure = { code: 'TIMEOUT', ...(this.lastImdsError ? { lastError: this.lastImdsError } : {}) };
            this.imds = 'over';
            this.gathered();
          },
        });
        if (this.imds === 'backoff') timers.push({ at: this.imdsRetryAt, fire: () => ((this.imds = 'requesting'), this.start('imds')) });
      }
      if (this.stage === 'gathering' && this.mediaReading) {
        timers.push({
          at: this.mediaDeadline,
          fire: () => {
            this.warnings.push(`provisioning media: not read within ${this.config.provisioning_media.timeout_secs} s; provisioning goes on without it`);
            this.mediaReading = false;
            this.gathered();
          },
        });
      }
      if (this.stage === 'configured' && this.publishing === 'running') {
        timers.push({
          at: this.publishDeadline,
          fire: () => {
            this.warnings.push(`hostname not published: no answer within ${this.config.hostname_publishing.timeout_secs} s`);
            this.publishOver();
          },
        });
      }
      if (this.stage === 'proxyAgent') {
        timers.push({ at: this.proxyDeadline, fire: () => ((this.failure = { code: 'PROXY_AGENT_STATUS_FAILURE' }), this.reportFailure()) });
      }
      if (this.stage === 'configured' && this.hostKeys === 'adding') {
        timers.push({
          at: this.osDeadline,
          fire: () => {
            this.warnings.push(`ssh host keys ${this.hostKeysLater.join(', ')} not made within ${this.config.os.timeout_secs} s; sshd offers the others`);
            this.laterHostKeysOver();
          },
        });
      }
      if (this.stage === 'os' && this.certificates !== 'over') {
        timers.push({ at: this.certificatesDeadline, fire: () => this.certificatesOver(this.certificatesTimeout(), true) });
        if (this.certificates === 'backoff') timers.push({ at: this.certificatesRetryAt, fire: () => this.startCertificates() });
      }
      if (this.stage === 'validating' || this.stage === 'os') {
        const phase = this.stage === 'validating' ? 'validation' : 'OS configuration';
        timers.push({ at: this.osDeadline, fire: () => ((this.failure = { code: 'TIMEOUT', phase }), this.reportFailure()) });
      }
    }
    if (this.phase === 'pool') {
      if (this.pool === 'ready' || this.pool === 'readyBackoff') {
        timers.push({ at: this.poolDeadline, fire: () => ((this.failure = { code: 'TIMEOUT' }), this.reportFailure()) });
      }
      if (this.pool === 'readyBackoff') timers.push({ at: this.poolRetryAt, fire: () => this.sendPoolReady() });
      if (this.pool === 'pausing') timers.push({ at: this.poolRetryAt, fire: () => this.startPoll() });
      const nicTimeout = () => ((this.failure = { code: 'TIMEOUT', phase: 'preprovisioning' }), this.reportFailure());
      if (this.pool === 'detaching') timers.push({ at: this.detachDeadline, fire: nicTimeout });
      if (this.pool === 'listening' || this.pool === 'probing') timers.push({ at: this.attachDeadline, fire: nicTimeout });
    }
    if (this.phase === 'report') {
      const report = this.report!;
      timers.push({
        at: report.deadline,
        fire: () => {
          const timeout: SeenFailure = { code: 'TIMEOUT', ...(report.lastError ? { lastError: report.lastError } : {}) };
          this.end(report.kind === 'ready' ? this.failedOutput('readyNotAccepted', null, false, timeout) : this.failedOutput('failedUnreported', this.failure, false));
        },
      });
      if (report.attempt === 'backoff') timers.push({ at: report.retryAt, fire: () => ((report.attempt = 'requesting'), this.startReport()) });
    }
    return timers.reduce<{ at: number; fire: () => void } | null>((a, b) => (a && a.at <= b.at ? a : b), null);
  }

  private provision() {
    this.phase = 'work';
    this.sendInProgress();
    this.imds = 'requesting';
    this.imdsDeadline = this.now + this.config.imds.total_retry_timeout_secs * 1000;
    this.start('imds');
    this.proxyChecked = false;
    this.headStart = 'waiting';
    this.headStartEnds = this.now + IMDS_HEAD_START_MS;
    this.hostKeys = this.skipped('host-keys') ? 'over' : 'pending';
  }

  /** The IMDS request has left, or had its head start: the media read and the host keys begin. */
  private headStartOver() {
    this.headStart = 'over';
    this.mediaReading = true;
    this.mediaDeadline = this.now + this.config.provisioning_media.timeout_secs * 1000;
    this.start('media', this.claim ? 'claimed' : '');
    if (this.hostKeys !== 'pending') return;
    this.hostKeys = 'running';
    this.start('host-keys');
  }

  private skipped(id: string): boolean {
    return (this.config.steps.skip as string[]).includes(STEP_OF[id]!);
  }

  /** The keys start once the user exists, or at once when its step is left out; the certificates first when wanted. */
  private addKeysLane(at: number) {
    if (this.skipped('ssh-keys')) return;
    const wanted = this.fingerprints.length > 0 || this.keyPairs.length > 0 || this.config.certificates.place === true;
    this.lanes.splice(at, 0, wanted ? ['certificates', ...KEYS_LANE] : [...KEYS_LANE]);
    if (!wanted) return this.start(KEYS_LANE[0]!);
    this.certificatesDeadline = this.now + this.config.certificates.total_retry_timeout_secs * 1000;
    this.startCertificates();
  }

  /** The validated plan wants certificates whose step has not ended yet. */
  private certificatesPending(): boolean {
    return this.stage === 'os' && !this.certificatesSettled && (this.fingerprints.length > 0 || this.keyPairs.length > 0);
  }

  private startCertificates() {
    this.certificates = 'requesting';
    this.start('certificates');
  }

  /** No certificates came: the run fails when their keys were the only way in, else a warning and the keys go on. */
  private certificatesOver(failure: Failure, timedOut = false) {
    this.certificates = 'over';
    this.certificatesSettled = true;
    const plan = this.plan!;
    if (plan.sshKeys === 0 && this.fingerprints.length > 0 && !plan.passwordAuthentication) {
      this.failure = timedOut ? { code: 'TIMEOUT', ...(this.certificatesLastError ? { lastError: this.certificatesLastError } : {}) } : seen(failure);
      return this.reportFailure();
    }
    const missing = [
      ...(this.fingerprints.length > 0 ? [`ssh keys ${this.fingerprints.join(', ')}`] : []),
      ...(this.keyPairs.length > 0 ? [`key pairs ${this.keyPairs.join(', ')}`] : []),
    ];
    this.warnings.push(`certificates: ${describeReported(failure)}; ${missing.length ? `${missing.join(' and ')} not installed` : 'no certificates placed'}`);
    return this.laneStepDone('certificates');
  }

  private certificatesTimeout(): Failure {
    const error = `the wireserver did not give the goal state's certificates within ${this.config.certificates.total_retry_timeout_secs} s`;
    return failureOf('TIMEOUT', [['error', error], ...(this.certificatesLastError ? ([['last_error', this.certificatesLastError]] as Array<[string, string]>) : [])]);
  }

  /** An OS step finished: the next of its lane starts; when every lane is through, the report-pending marker. */
  private laneStepDone(id: string) {
    const at = this.lanes.findIndex((l) => l[0] === id);
    const lane = this.lanes[at]!;
    lane.shift();
    if (lane.length) this.start(lane[0]!);
    if (id === 'user') this.addKeysLane(at + 1);
    return this.osDone();
  }

  /**
   * Every OS lane is through: logins may start (READY), the report-pending marker goes down beside the background
   * host keys and the hostname's publication; the Ready report waits for all three.
   */
  private osDone() {
    if (!this.lanes.every((l) => l.length === 0)) return;
    this.stage = 'configured';
    this.tellReady();
    this.osDeadline = this.now + this.config.os.timeout_secs * 1000;
    this.reportPending = 'writing';
    this.start('pendingMarker');
    this.publishing = this.skipped('hostname') ? 'over' : 'running';
    if (this.publishing === 'running') this.start('hostnamePublish');
    if (this.hostKeys !== 'waiting') return;
    this.hostKeys = 'adding';
    this.start('laterHostKeys', this.hostKeysLater.join(','));
  }

  private laterHostKeysOver() {
    this.hostKeys = 'over';
    if (this.stage === 'configured' && this.reportPending === 'down' && this.publishing !== 'running') this.reportReady();
  }

  /** The hostname's publication is over (published, failed or past its deadline: a warning): Ready may follow. */
  private publishOver() {
    this.publishing = 'over';
    if (this.stage === 'configured' && this.reportPending === 'down' && this.hostKeys !== 'adding') this.reportReady();
  }

  /** A boot that finds the report-pending marker makes the host keys a stopped earlier boot left missing, then Ready. */
  private completeHostKeys() {
    if (this.skipped('host-keys')) return this.reportReady();
    this.phase = 'completingKeys';
    this.start('missingHostKeys');
  }

  private reportPoolReady() {
    this.phase = 'pool';
    this.hostKeys = 'over';
    this.poolDeadline = this.now + this.config.wireserver.total_retry_timeout_secs * 1000;
    this.writeKvp('Ready');
    this.sendPoolReady();
  }

  private sendPoolReady() {
    this.pool = 'ready';
    this.start('poolReadyReport', `Ready vm=${this.vmId} pps=${this.ppsType}${this.ppsType === 'Savable' ? ' answer-may-be-lost' : ''}`);
  }

  /** A Savable VM waits for a NIC it has not tried yet. */
  private listenForNic() {
    this.pool = 'listening';
    this.nic = null;
    this.start('nicAttach', `tried=${this.nicsTried.join(',')}`);
  }

  private poll() {
    // Polls are counted over the whole wait: a Savable VM back from its NIC wait goes on counting.
    this.phase = 'pool';
    this.startPoll();
    if (this.ppsType === 'Savable') {
      this.nicWatch = 'watching';
      this.start('nicGone');
    }
    this.watchCarrier();
  }

  /** The claim moves the NIC to the customer's network: its carrier is watched, and its lease renewed. */
  private watchCarrier() {
    this.lease = 'watching';
    this.start('carrier');
  }

  private startPoll() {
    this.pool = 'polling';
    this.start('reprovision', `attempt=${this.polls + 1} previous=${this.pollError}`);
  }

  private sendInProgress() {
    this.inProgress = 'sending';
    this.start('inProgressReport', `NotReady/Provisioning vm=${this.vmId} pps=${this.ppsType}`);
  }

  private gathered() {
    if (this.imds !== 'over' || this.mediaReading || this.headStart === 'waiting') return;
    const proxy = this.config.azure_proxy_agent;
    if (!this.proxyChecked && (proxy.require || (proxy.enable && (this.claim ?? this.media)?.provisionGuestProxyAgent === true))) {
      this.stage = 'proxyAgent';
      this.proxyDeadline = this.now + (proxy.wait_secs + 10) * 1000;
      return this.start('proxyAgent');
    }
    this.decide();
  }

  /** Everything that can change the plan has arrived (and the Guest Proxy Agent is ready when wanted). */
  private decide() {
    if (!this.claim) {
      const pool = poolOf(this.metadata?.ppsType, this.media?.ppsType);
      if (pool.type !== 'None') this.ppsType = pool.type;
      if (pool.type === 'PreprovisionedOSDisk' && this.found === 'waiting-for-shutdown') {
        this.failure = { code: 'PPS_NOT_SHUT_DOWN', ppsType: pool.raw };
        return this.reportFailure();
      }
      if (['Running', 'Savable', 'PreprovisionedOSDisk'].includes(pool.type)) return this.reportPoolReady();
      if (pool.type !== 'None') {
        this.failure = { code: 'PPS_UNSUPPORTED', ppsType: pool.raw };
        return this.reportFailure();
      }
    } else if (canonicalPpsType(this.metadata?.ppsType) !== 'None') {
      this.failure = { code: 'IMDS_INVALID', key: 'extended.compute.ppsType' };
      return this.reportFailure();
    }
    const plan = expectedPlan(this.metadata, this.claim ?? this.media);
    if (!plan) {
      const imds = this.imdsFailure ?? { code: 'IMDS_FAILED' as const };
      // The chart appends the IMDS failure's data to the media's, so its phase and last error carry over.
      const unusable = this.mediaFailure?.code === 'OVF_INVALID' || this.mediaFailure?.code === 'PASSWORD_TOO_LONG';
      // Media that is there but unusable is the reason of a run that needed it (IMDS gave nothing).
      if (unusable) this.failure = { ...imds, code: this.mediaFailure!.code };
      else this.failure = this.media && !this.media.username ? { ...imds, code: 'USERNAME_UNKNOWN' } : imds;
      return this.reportFailure();
    }
    this.stage = 'validating';
    this.osDeadline = this.now + this.config.os.timeout_secs * 1000;
    // Validation is told why the media was unusable: it decides whether that fails the run.
    const customData = `custom-data=${this.metadata?.hasCustomData ?? false}/${(this.claim ?? this.media)?.customDataPresent ?? false}`;
    this.start('validate', `${describePlan(plan)} media-failure=${describeFailure(this.mediaFailure)} ${customData}`);
  }

  private reportReady() {
    this.tellReady();
    this.phase = 'report';
    this.report = { kind: 'ready', attempt: 'requesting', retryAt: 0, deadline: this.now + this.config.wireserver.total_retry_timeout_secs * 1000 };
    this.writeKvp('Ready');
    this.startReport();
  }

  private reportFailure() {
    this.tellReady();
    this.hostKeys = 'over';
    this.phase = 'report';
    const budget = this.terminating ? 1500 : this.config.wireserver.total_retry_timeout_secs * 1000;
    this.report = { kind: 'failure', attempt: 'requesting', retryAt: 0, deadline: this.now + budget };
    this.writeKvp(`NotReady/ProvisioningFailed ${describeFailure(this.failure)}`);
    this.startReport();
  }

  private startReport() {
    const report = this.report!;
    const id = report.kind === 'ready' ? 'readyReport' : 'failureReport';
    this.start(id, report.kind === 'ready' ? `Ready vm=${this.vmId} pps=${this.ppsType}` : `NotReady/ProvisioningFailed vm=${this.vmId} pps=${this.ppsType} ${describeFailure(this.failure)}`);
  }

  private tellReady() {
    if (!this.systemd.includes('READY')) this.systemd.push('READY');
  }

  private writeKvp(what: string) {
    if (this.kvpAlive) this.kvp.push(`${what} vm=${this.vmId} pps=${this.ppsType}`);
  }

  private enter(phase: 'provisionedMarker') {
    this.phase = phase;
    this.start(phase);
  }

  private start(id: string, detail?: string) {
    if (id === 'hostnamePublish') this.publishDeadline = this.now + this.config.hostname_publishing.timeout_secs * 1000;
    const describedDetail =
      detail ??
      (['validate', 'hostname', 'user', 'password', 'certificates', 'ssh-keys', 'sshd'].includes(id)
        ? describePlan(this.plan)
        : ['pendingMarker', 'provisionedMarker', 'waitingMarker', 'shutdownMarker'].includes(id)
          ? `vm=${this.vmId}`
          : '');
    this.starts.push(`${id}${describedDetail ? ` ${describedDetail}` : ''}`);
  }

  private failedOutput(state: SeenOutput['state'], failure: SeenFailure | null, reported: boolean, reportFailure?: SeenFailure): Omit<SeenOutput, 'warnings'> {
    const cause = failure ?? reportFailure!;
    return {
      state,
      result: 'failed',
      exitCode: KINDS[cause.code].exitCode,
      code: cause.code,
      reported,
      ...(cause.lastError ? { lastError: cause.lastError } : {}),
    };
  }

  private end(output: Omit<SeenOutput, 'warnings'>) {
    this.phase = 'end';
    this.output = { ...output, warnings: this.warnings };
  }

  private expectLive(id: string) {
    if (!this.live().includes(id)) throw new Error(`oracle: '${id}' finished, but by the protocol it is not running (${this.live().join(', ') || 'nothing'} is)`);
  }
}
