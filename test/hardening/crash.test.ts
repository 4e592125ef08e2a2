/**
 * Crash at every state: for each state of the provisioning chart the built agent is SIGKILLed while in that state
 * (held there by a gated fake fabric, a retry backoff, a FIFO standing in for a slow file, or caught by a
 * journal poller that freezes the agent with SIGSTOP before deciding), then booted again on the same root
 * against a healthy fabric. The second boot must converge to what an uninterrupted run into a fresh root leaves.
 * A summary per state goes to test-output/crash.json.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StateValue } from 'xstate';
import { startFakeFabric, type Behaviour, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { readJournal } from '../../src/inspect/journal.js';
import { validateSshKey } from '../../src/os/validate.js';
import { markers, reportKinds, runAgent, type AgentOptions } from '../integration/agent.js';
import { ACCOUNT, CONFIGURING_OS, CREDENTIALS, CUSTOM_DATA, FIRST_BOOT, GATHERING, HOST_KEYS, HOSTNAME, IMDS, IN_PROGRESS, MEDIA, SSHD, STATE, WORK } from '../support/chart.js';
import {
  DATA_DIR,
  chartStates,
  checkPool,
  hasTempFile,
  isActive,
  osTree,
  runAndKill,
  tempFiles,
  type KillPlan,
  type PoolCheck,
  type TreeEntry,
} from './crash-harness.js';

const DOC = exampleImdsDocument();
const USER: string = DOC.compute.osProfile.adminUsername;
const KEYS: string[] = (DOC.compute.publicKeys as Array<{ keyData: string }>).map((k) => validateSshKey(k.keyData).line);
const ZERO_VM = '00000000-0000-0000-0000-000000000000';
const ATTEMPTS = 6;
const PARALLEL = 2;

/**
 * The scratch backend writes the user's passwd line with the test runner's uid (0 as root), which the real
 * username validation then refuses as a system account on any later boot (see the known-bug test below). The
 * image's login.defs admits that uid so the matrix tests crash recovery rather than that defect.
 */
const LOGIN_DEFS = 'UID_MIN 0\nUID_MAX 4294967294\n';

type Kind = 'inProgress' | 'ready' | 'failed';
const kindOf = (body: string): Kind =>
  body.includes('ProvisioningFailed') ? 'failed' : body.includes('"state":"Ready"') ? 'ready' : 'inProgress';

interface Ctx {
  fabric: FakeFabric;
  root: string;
  /** Never resolves until the kill is over: holds a request for as long as the test wants. */
  gate: Promise<void>;
}

interface Hold {
  how: string;
  options?: AgentOptions;
  setup?(ctx: Ctx): void;
  ready?(ctx: Ctx): boolean;
  /** Removes an obstacle the hold planted (the host is healthy again for the second boot). */
  afterKill?(ctx: Ctx): void;
  /** Boot once uninterrupted before the run that is killed. */
  preProvision?: boolean;
  /** Kill as soon as the agent runs, before the chart journals anything (configuration loading). */
  atStart?: boolean;
}

interface Transient {
  transient: string;
}

/**
 * A state this matrix cannot judge: its second boot runs against an ordinary healthy fabric and must converge to the
 * ordinary reference. Says where the state's interruption is tested instead.
 */
interface Elsewhere {
  elsewhere: string;
}

const POOL_VM: Elsewhere = {
  elsewhere:
    "pool VM (PPS) state: a boot after a kill here resumes the pool's wait, which an ordinary fabric never ends, and a claim provisions the customer, not the reference user. Covered by test/e2e/preprovisioned.test.ts (reboot while waiting, resumed without a second pool Ready) and test/model/preprovisioning.test.ts (Ready before the marker, no OS step before the claim)",
};

const wire = (ctx: Ctx, per: Partial<Record<Kind, Behaviour>>) =>
  ctx.fabric.setWireserver((request) => per[kindOf(request.body)] ?? 'ok');
const arrived = (ctx: Ctx, kind: Kind | 'imds') =>
  kind === 'imds' ? ctx.fabric.requestsTo('imds').length > 0 : ctx.fabric.requestsTo('health').some((r) => kindOf(r.body) === kind);

const imdsGate: Hold = {
  how: 'IMDS request gated',
  setup: (ctx) => ctx.fabric.setImds({ gate: ctx.gate }),
  ready: (ctx) => arrived(ctx, 'imds'),
};
const poller: Hold = { how: 'journal poller (SIGSTOP on the line, then SIGKILL)' };
/** The goal state is fetched for the certificates alone (the crash runs have no media naming keys by fingerprint). */
const PLACE_CERTIFICATES = '[certificates]\nplace = true\n';
const goalStateGate: Hold = {
  how: 'certificates placed (`[certificates] place = true`), the goal state GET gated',
  options: { extraToml: PLACE_CERTIFICATES },
  setup: (ctx) => ctx.fabric.setBehaviour('goalState', { gate: ctx.gate }),
  ready: (ctx) => ctx.fabric.requestsTo('goalState').length > 0,
};
/** The poller, waiting until the step's atomic write is between creating its temp file and renaming it. */
const midWrite = (dir: string): Hold => ({
  how: `journal poller, killed while the atomic writer's temp file exists in ${dir} (between open and rename)`,
  ready: (ctx) => hasTempFile(join(ctx.root, dir)),
});
const slowWire = { retry_interval_secs: 30, total_retry_timeout_secs: 60 };
const failingImds = (ctx: Ctx) => ctx.fabric.setImds({ status: 403, body: { error: 'Forbidden' } });
const obstacle = (root: string) => join(root, DATA_DIR, `${ZERO_VM}.provisioned`);

/** Holds the sshd step on a FIFO (etc/ssh/sshd_config, removed before the second boot) while `region` finishes. */
const sshdBlocked = (region: string): Hold => ({
  how: `etc/ssh/sshd_config is a FIFO: the sshd step blocks reading it while the ${region} region finishes (FIFO removed before the second boot)`,
  setup: (ctx) => {
    mkdirSync(join(ctx.root, 'etc/ssh'), { recursive: true });
    execFileSync('mkfifo', [join(ctx.root, 'etc/ssh/sshd_config')]);
  },
  afterKill: (ctx) => rmSync(join(ctx.root, 'etc/ssh/sshd_config'), { force: true }),
});

/** How each state is held; a state the chart gains without an entry here fails the first test. */
const HOLDS: Record<string, Hold | Transient | Elsewhere> = {
  starting: {
    how: 'killed as soon as it runs, before the chart journals its first state: nothing is written yet (starting itself is eventless, left in the macrostep that enters it)',
    atStart: true,
  },
  alreadyRunning: {
    elsewhere:
      'entered only when another agent holds the instance lock, which this matrix never starts; nothing is written in it (no journal, no marker, no report). test/integration/cli.test.ts runs a second agent beside a first, and test/model/startup.test.ts covers the state',
  },
  [FIRST_BOOT]: imdsGate,
  [IN_PROGRESS]: {
    how: 'InProgress POST and IMDS gated',
    setup: (ctx) => {
      ctx.fabric.setImds({ gate: ctx.gate });
      wire(ctx, { inProgress: { gate: ctx.gate } });
    },
    ready: (ctx) => arrived(ctx, 'imds') && arrived(ctx, 'inProgress'),
  },
  [`${IN_PROGRESS}.sending`]: {
    how: 'InProgress POST and IMDS gated',
    setup: (ctx) => {
      ctx.fabric.setImds({ gate: ctx.gate });
      wire(ctx, { inProgress: { gate: ctx.gate } });
    },
    ready: (ctx) => arrived(ctx, 'imds') && arrived(ctx, 'inProgress'),
  },
  [`${IN_PROGRESS}.sending.requesting`]: {
    how: 'InProgress POST and IMDS gated',
    setup: (ctx) => {
      ctx.fabric.setImds({ gate: ctx.gate });
      wire(ctx, { inProgress: { gate: ctx.gate } });
    },
    ready: (ctx) => arrived(ctx, 'imds') && arrived(ctx, 'inProgress'),
  },
  [`${IN_PROGRESS}.sending.backoff`]: {
    how: 'InProgress answered 503 with retry_interval_secs = 30; IMDS gated',
    options: { wireserver: slowWire },
    setup: (ctx) => {
      ctx.fabric.setImds({ gate: ctx.gate });
      wire(ctx, { inProgress: { status: 503 } });
    },
  },
  // Accepted or given up, the same final state: held with IMDS gated after the report was accepted.
  [`${IN_PROGRESS}.done`]: imdsGate,
  [WORK]: imdsGate,
  // The host keys are made once the IMDS request has left: done while IMDS is gated.
  [HOST_KEYS]: imdsGate,
  [`${HOST_KEYS}.waitingForImds`]: {
    elsewhere:
      "left in the macrostep in which the media region leaves its own waitingForImds (the IMDS request written, or the head start over), so it lasts exactly as long as that state: a turn of the event loop, in which a journal line or a poller lands only by chance. Nothing is written in it; a kill there is a kill in gathering, held here with IMDS gated, and test/model covers its transitions",
  },
  [`${HOST_KEYS}.replacing`]: poller,
  [`${HOST_KEYS}.waiting`]: {
    transient:
      'entered only when the host key step leaves a type for the background (an sshd that loads its keys per connection); the scratch backend has no sshd and leaves none (test/model covers the background keys)',
  },
  [`${HOST_KEYS}.adding`]: {
    transient:
      'entered only when the host key step leaves a type for the background (an sshd that loads its keys per connection); the scratch backend has no sshd and leaves none (test/model covers the background keys)',
  },
  [`${HOST_KEYS}.done`]: imdsGate,
  [GATHERING]: imdsGate,
  [IMDS]: imdsGate,
  [`${IMDS}.fetching`]: imdsGate,
  [`${IMDS}.fetching.requesting`]: imdsGate,
  [`${IMDS}.fetching.backoff`]: {
    how: 'IMDS answered 503 with retry_interval_secs = 30',
    options: { imds: { retry_interval_secs: 30, total_retry_timeout_secs: 60 } },
    setup: (ctx) => ctx.fabric.setImds({ status: 503 }),
  },
  [`${IMDS}.done`]: {
    transient: 'final region state: the media region is already final, so IMDS\'s answer, its non-retryable error or its deadline leaves gathering in the same macrostep',
  },
  [MEDIA]: imdsGate,
  [`${MEDIA}.waitingForImds`]: {
    elsewhere:
      "lasts until the IMDS actor says its request was written: the first request was written before the chart started (src/provision/provision.ts), so that takes a turn of the event loop and a poller lands in it only by chance. Nothing is written in it; a kill there is a kill in gathering, held here with IMDS gated, and test/model and test/provision/imds-head-start.test.ts cover its transitions",
  },
  [`${MEDIA}.reading`]: {
    elsewhere:
      'with the media disabled (these runs have no media), the read has nothing to do and is over within a turn or two of the event loop, so a poller lands in it by chance (it took four attempts on a quiet machine). Nothing is written in it; a kill there is a kill in gathering, held here with IMDS gated, and test/model covers its transitions with a media read the test controls',
  },
  // Read (here: disabled, so nothing), unusable or abandoned, the same final state, held with IMDS gated.
  [`${MEDIA}.done`]: imdsGate,
  [`${WORK}.checkingProxyAgent`]: {
    transient: 'entered only when the media or the configuration asks for the Guest Proxy Agent; the crash runs ask for none',
  },
  [`${WORK}.validating`]: poller,
  [CONFIGURING_OS]: poller,
  [HOSTNAME]: poller,
  [`${HOSTNAME}.setting`]: poller,
  [`${HOSTNAME}.done`]: sshdBlocked('hostname'),
  [ACCOUNT]: poller,
  [`${ACCOUNT}.creatingUser`]: poller,
  [CREDENTIALS]: poller,
  [`${CREDENTIALS}.password`]: poller,
  [`${CREDENTIALS}.password.setting`]: {
    elsewhere:
      'in the scratch backend the step reads etc/passwd once (the user lookup) and only records `passwd -l`, so it is over within one file read and a poller lands in it by chance (first attempt on one machine, six misses in six on the CI machine, each frozen with the password done and the keys still writing). Nothing is written in it; a kill there is a kill in credentials while the keys step writes, which the sshKeys.writing and password.done holds cover, and test/model covers its transitions',
  },
  // The keys step is still writing when the password step is done: killed while its temp file exists.
  [`${CREDENTIALS}.password.done`]: midWrite(`home/${USER}/.ssh`),
  [`${CREDENTIALS}.sshKeys`]: midWrite(`home/${USER}/.ssh`),
  [`${CREDENTIALS}.sshKeys.writing`]: midWrite(`home/${USER}/.ssh`),
  [`${CREDENTIALS}.sshKeys.deciding`]: {
    transient: 'eventless: decides at once whether the goal state\'s certificates are fetched, in the macrostep that enters it',
  },
  [`${CREDENTIALS}.sshKeys.fetchingCertificates`]: goalStateGate,
  [`${CREDENTIALS}.sshKeys.fetchingCertificates.requesting`]: goalStateGate,
  [`${CREDENTIALS}.sshKeys.fetchingCertificates.backoff`]: {
    how: 'certificates placed (`[certificates] place = true`), the goal state answered 503 with retry_interval_secs = 30',
    options: { wireserver: slowWire, extraToml: PLACE_CERTIFICATES },
    setup: (ctx) => ctx.fabric.setBehaviour('goalState', { status: 503 }),
  },
  [`${CREDENTIALS}.sshKeys.done`]: {
    transient:
      'final region state: the scratch backend only records `passwd -l`, so the password step always finishes before the keys step\'s file writes, and the keys finishing completes credentials in the same macrostep',
  },
  [`${ACCOUNT}.done`]: sshdBlocked('account'),
  [SSHD]: poller,
  [`${SSHD}.awaitingHostKeys`]: {
    transient:
      'eventless: the scratch backend makes the host keys while IMDS is gated, long before the OS stage, so its always transition leaves the state in the macrostep that enters it',
  },
  [`${SSHD}.configuring`]: midWrite('etc/ssh/sshd_config.d'),
  [`${SSHD}.done`]: poller,
  [CUSTOM_DATA]: poller,
  [`${CUSTOM_DATA}.saving`]: {
    elsewhere:
      "the reference metadata carries no custom data, so the step only finds nothing to save and is over within the turn of the event loop that enters it; since the host keys are made beside IMDS, nothing else in the OS stage is slow enough for the poller to freeze the agent there (six misses in six under load). Saving custom data with a kill mid-write is not in this matrix; the atomic writer it uses is (the keys' and the sshd drop-in's midWrite holds)",
  },
  [`${CUSTOM_DATA}.done`]: poller,
  // The report-pending marker is written on entering configured: an empty marker created in place
  // (docs/durability.md), no temp file to catch, so the poller kills it mid-step.
  [`${WORK}.configured`]: poller,
  [`${WORK}.configured.reportPending`]: poller,
  [`${WORK}.configured.reportPending.markingReportPending`]: poller,
  [`${WORK}.configured.reportPending.awaitingHostKeys`]: {
    transient:
      'eventless once every host key is in: the scratch backend makes all of them while IMDS is gated, so the state is left in the macrostep that enters it (test/model covers a wait for background keys, and a stop in it)',
  },
  [`${WORK}.configured.reportPending.done`]: {
    elsewhere:
      'the marker is down and the hostname\'s publication still runs: publishing probes the system\'s DHCP clients, so a poller lands here only when that outlasts the marker\'s write. Nothing is written in it that the marker\'s hold does not cover (a kill there leaves the report-pending marker, and the next boot reports Ready), and test/model covers a stop in it',
  },
  // Publishing the hostname starts with READY=1, beside the report-pending marker; the Ready report waits for it.
  [`${WORK}.configured.hostname`]: poller,
  [`${WORK}.configured.hostname.publishing`]: poller,
  [`${WORK}.configured.hostname.done`]: poller,
  preprovisioned: POOL_VM,
  'preprovisioned.reportingPoolReady': POOL_VM,
  'preprovisioned.reportingPoolReady.requesting': POOL_VM,
  'preprovisioned.reportingPoolReady.backoff': POOL_VM,
  'preprovisioned.markingWaiting': POOL_VM,
  'preprovisioned.waiting': POOL_VM,
  'preprovisioned.waiting.requesting': POOL_VM,
  'preprovisioned.waiting.backoff': POOL_VM,
  waitingInterrupted: POOL_VM,
  completingHostKeys: {
    elsewhere:
      'entered only by a boot that finds the report-pending marker, and there the scratch backend has no host keys to complete: the state is over within the turn that enters it. A kill there is a kill before Ready with the marker down, which the reportingReady holds cover; a stop in it is in test/model/termination.test.ts, and making the keys a halted boot left missing in test/boot/stop-after-ready.test.ts',
  },
  reportingReady: {
    how: 'Ready POST gated',
    setup: (ctx) => wire(ctx, { ready: { gate: ctx.gate } }),
    ready: (ctx) => arrived(ctx, 'ready'),
  },
  'reportingReady.requesting': {
    how: 'Ready POST gated',
    setup: (ctx) => wire(ctx, { ready: { gate: ctx.gate } }),
    ready: (ctx) => arrived(ctx, 'ready'),
  },
  'reportingReady.backoff': {
    how: 'Ready answered 503 with retry_interval_secs = 30',
    options: { wireserver: slowWire },
    setup: (ctx) => wire(ctx, { ready: { status: 503 } }),
  },
  markingProvisioned: poller,
  reportingFailure: {
    how: 'IMDS 403, failure POST gated',
    setup: (ctx) => {
      failingImds(ctx);
      wire(ctx, { failed: { gate: ctx.gate } });
    },
    ready: (ctx) => arrived(ctx, 'failed'),
  },
  'reportingFailure.requesting': {
    how: 'IMDS 403, failure POST gated',
    setup: (ctx) => {
      failingImds(ctx);
      wire(ctx, { failed: { gate: ctx.gate } });
    },
    ready: (ctx) => arrived(ctx, 'failed'),
  },
  'reportingFailure.backoff': {
    how: 'IMDS 403, failure POST answered 503 with retry_interval_secs = 30',
    options: { wireserver: slowWire },
    setup: (ctx) => {
      failingImds(ctx);
      wire(ctx, { failed: { status: 503 } });
    },
  },
  provisioned: { how: 'journal poller on the final state (before the agent exits)' },
  notOnAzure: { transient: 'entered only off Azure; the crash runs name their endpoints, which counts as on Azure' },
  alreadyProvisioned: { how: 'an uninterrupted boot first, then the journal poller on the second boot\'s final state', preProvision: true },
  readyNotAccepted: {
    how: 'Ready answered 403, journal poller on the final state',
    setup: (ctx) => wire(ctx, { ready: { status: 403 } }),
  },
  markerNotWritten: {
    how: 'a directory occupies <vm_id>.provisioned from the moment Ready arrives (removed before the second boot); journal poller on the final state',
    setup: (ctx) =>
      ctx.fabric.setWireserver((request) => {
        if (kindOf(request.body) === 'ready') mkdirSync(obstacle(ctx.root), { recursive: true });
        return 'ok';
      }),
    afterKill: (ctx) => rmSync(obstacle(ctx.root), { recursive: true, force: true }),
  },
  failed: { how: 'IMDS 403, journal poller on the final state', setup: failingImds },
  failedUnreported: {
    how: 'IMDS 403, failure POST answered 403, journal poller on the final state',
    setup: (ctx) => {
      failingImds(ctx);
      wire(ctx, { failed: { status: 403 } });
    },
  },
};

const isTransient = (h: Hold | Transient | Elsewhere): h is Transient => 'transient' in h;
const isHeld = (h: Hold | Transient | Elsewhere | undefined): h is Hold => h !== undefined && !('transient' in h) && !('elsewhere' in h);

interface FileProblem {
  file: string;
  problem: string;
}

/** Every file the agent writes must parse as its format (no half-written file). */
function unparsable(root: string): FileProblem[] {
  const out: FileProblem[] = [];
  const check = (file: string, ok: (text: string) => boolean) => {
    const path = join(root, file);
    if (existsSync(path) && !ok(readFileSync(path, 'utf8'))) out.push({ file, problem: 'does not parse' });
  };
  check('etc/hostname', (t) => /^[a-z0-9]([a-z0-9-]*[a-z0-9])?\n$/i.test(t));
  check('etc/passwd', (t) => t.endsWith('\n') && t.trimEnd().split('\n').every((l) => l.split(':').length === 7));
  check(`home/${USER}/.ssh/authorized_keys`, (t) =>
    t.endsWith('\n') &&
    t.trimEnd().split('\n').every((l) => {
      try {
        validateSshKey(l);
        return true;
      } catch {
        return false;
      }
    }),
  );
  check('etc/ssh/sshd_config.d/00-bootstate.conf', (t) =>
    t.endsWith('\n') && t.trimEnd().split('\n').every((l) => l.startsWith('#') || /^PasswordAuthentication (yes|no)$/.test(l)),
  );
  const runs = join(root, DATA_DIR, 'runs');
  for (const name of existsSync(runs) ? readdirSync(runs) : []) {
    const lines = readFileSync(join(runs, name), 'utf8').split('\n').filter((l) => l !== '');
    for (const [i, line] of lines.entries()) {
      try {
        JSON.parse(line);
      } catch {
        out.push({ file: `${DATA_DIR}/runs/${name}`, problem: `line ${i + 1} is torn` });
      }
    }
  }
  for (const name of readdirSync(join(root, DATA_DIR)).filter((n) => /\.(provisioned|report-pending)$/.test(n))) {
    if (readFileSync(join(root, DATA_DIR, name)).length !== 0) out.push({ file: name, problem: 'marker is not empty' });
  }
  return out;
}

function journalValues(root: string): StateValue[] {
  const runs = join(root, DATA_DIR, 'runs');
  if (!existsSync(runs)) return [];
  return readdirSync(runs).flatMap((name) => readJournal(join(runs, name)).map((l) => l.value));
}

interface EndState {
  code: number | null;
  reports: string[];
  markers: string[];
  tree: Record<string, TreeEntry>;
  temps: string[];
  unparsable: FileProblem[];
  pool: PoolCheck;
  userLines: number;
  keyCounts: number[];
  ms: number;
}

function endState(root: string, code: number | null, reports: string[], ms: number): EndState {
  const passwd = join(root, 'etc/passwd');
  const keys = join(root, `home/${USER}/.ssh/authorized_keys`);
  const keyText = existsSync(keys) ? readFileSync(keys, 'utf8').split('\n') : [];
  return {
    code,
    reports,
    markers: markers(root).sort(),
    tree: osTree(root),
    temps: tempFiles(root),
    unparsable: unparsable(root),
    pool: checkPool(root),
    userLines: existsSync(passwd) ? readFileSync(passwd, 'utf8').split('\n').filter((l) => l.startsWith(`${USER}:`)).length : 0,
    keyCounts: KEYS.map((k) => keyText.filter((l) => l === k).length),
    ms: Math.round(ms),
  };
}

/**
 * Where the roots go: a disk, not tmpfs. Some holds catch the agent in a state that lasts only as long as the fsync
 * after it (a region's final state while its sibling syncs, a quick media read): on tmpfs fsync returns at once and
 * the agent is past the state before SIGSTOP lands (every attempt failed where /tmp is tmpfs, as on Debian 13 and
 * in scripts/ci-in-fresh-root.sh). /var/tmp is kept across reboots, so it is on a disk wherever /tmp is not.
 */
const ROOTS = existsSync('/var/tmp') ? '/var/tmp' : tmpdir();

const seeded: string[] = [];

function seedRoot(prefix: string, loginDefs = true): string {
  const root = mkdtempSync(join(ROOTS, prefix));
  seeded.push(root);
  if (loginDefs) {
    mkdirSync(join(root, 'etc'), { recursive: true });
    writeFileSync(join(root, 'etc/login.defs'), LOGIN_DEFS);
  }
  return root;
}

interface Attempt {
  killedIn: StateValue | null;
  landed: boolean;
}

interface CaseResult {
  state: string;
  how: string;
  attempts: Attempt[];
  landed: boolean;
  killedIn: StateValue | null;
  killRun: { ms: number; signal: string | null; reports: string[] };
  afterKill: { markers: string[]; readyAccepted: boolean; temps: string[] };
  second: EndState | null;
  /** Every journal line's state value in the root at the end (all boots). */
  journal: StateValue[];
  ms: number;
}

/** One state: hold, kill (retrying while the kill lands elsewhere), boot again on a healthy fabric, record. */
async function crashAt(state: string, hold: Hold): Promise<CaseResult> {
  const started = performance.now();
  const attempts: Attempt[] = [];
  for (let i = 0; i < ATTEMPTS; i++) {
    const fabric = await startFakeFabric();
    const root = seedRoot('bootstate-crash-');
    let open: () => void = () => undefined;
    const ctx: Ctx = { fabric, root, gate: new Promise<void>((resolve) => (open = resolve)) };
    try {
      if (hold.preProvision) {
        const first = await runAgent(fabric, { root });
        if (first.code !== 0) throw new Error(`uninterrupted boot before the kill exited ${first.code}: ${first.stderr}`);
        fabric.requests.length = 0;
        fabric.reports.length = 0;
      }
      hold.setup?.(ctx);
      const plan: KillPlan = { target: state, ...(hold.ready ? { ready: () => hold.ready!(ctx) } : {}) };
      const options: AgentOptions = { ...hold.options };
      if (hold.atStart) plan.heldWithoutJournal = () => true;
      const kill = await runAndKill(fabric, root, options, plan);
      open();
      attempts.push({ killedIn: kill.killedAt?.value ?? null, landed: kill.landed });
      if (!kill.landed) continue;
      hold.afterKill?.(ctx);
      // What the killed agent had already sent belongs to its run, not to the next boot's.
      await fabric.idle();
      const killReports = reportKinds(fabric);
      const readyAccepted = journalValues(root).some((v) => isActive(v, 'markingProvisioned'));
      const afterKill = { markers: markers(root).sort(), readyAccepted, temps: tempFiles(root) };
      fabric.setImds();
      fabric.setWireserver();
      fabric.requests.length = 0;
      fabric.reports.length = 0;
      const second = await runAgent(fabric, { root });
      return {
        state,
        how: hold.how,
        attempts,
        landed: true,
        killedIn: kill.killedAt?.value ?? null,
        killRun: { ms: Math.round(kill.run.ms), signal: kill.run.signal, reports: killReports },
        afterKill,
        second: endState(root, second.code, reportKinds(fabric), second.ms),
        journal: journalValues(root),
        ms: Math.round(performance.now() - started),
      };
    } finally {
      open();
      await fabric.close();
    }
  }
  return {
    state,
    how: hold.how,
    attempts,
    landed: false,
    killedIn: attempts.at(-1)?.killedIn ?? null,
    killRun: { ms: 0, signal: null, reports: [] },
    afterKill: { markers: [], readyAccepted: false, temps: [] },
    second: null,
    journal: [],
    ms: Math.round(performance.now() - started),
  };
}

async function pool<T, R>(items: T[], width: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!);
      }
    }),
  );
  return out;
}

const STATES = chartStates();
const HELD = STATES.filter((s) => isHeld(HOLDS[s]));
const results = new Map<string, CaseResult>();
let reference: EndState;
let referenceJournal: StateValue[] = [];
let totalMs = 0;

beforeAll(async () => {
  const started = performance.now();
  const fabric = await startFakeFabric();
  try {
    const root = seedRoot('bootstate-crash-ref-');
    const run = await runAgent(fabric, { root });
    reference = endState(root, run.code, reportKinds(fabric), run.ms);
    referenceJournal = journalValues(root);
  } finally {
    await fabric.close();
  }
  const done = await pool(HELD, PARALLEL, (state) => crashAt(state, HOLDS[state] as Hold));
  for (const r of done) results.set(r.state, r);
  totalMs = Math.round(performance.now() - started);
}, 360_000);

afterAll(() => {
  for (const root of seeded) rmSync(root, { recursive: true, force: true });
  mkdirSync('test-output', { recursive: true });
  const summary = {
    totalMs,
    reference: reference && { code: reference.code, reports: reference.reports, markers: reference.markers, ms: reference.ms },
    states: STATES.map((state) => {
      const hold = HOLDS[state];
      if (!hold) return { state, held: 'NO HOLD' };
      if (isTransient(hold)) return { state, held: 'not held (transient)', why: hold.transient };
      if (!isHeld(hold)) return { state, held: 'not in this matrix', why: hold.elsewhere };
      const r = results.get(state);
      if (!r) return { state, held: hold.how, result: 'not run' };
      return {
        state,
        held: r.how,
        attempts: r.attempts.length,
        landed: r.landed,
        killedIn: r.killedIn,
        killRun: r.killRun,
        afterKill: r.afterKill,
        second: r.second && {
          code: r.second.code,
          reports: r.second.reports,
          markers: r.second.markers,
          sameTree: JSON.stringify(r.second.tree) === JSON.stringify(reference.tree),
          temps: r.second.temps,
          unparsable: r.second.unparsable,
          pool: r.second.pool,
          ms: r.second.ms,
        },
        ms: r.ms,
      };
    }),
  };
  writeFileSync('test-output/crash.json', `${JSON.stringify(summary, null, 2)}\n`);
});

describe('the chart', () => {
  it('has a hold (or a documented reason it cannot be held) for every state, and no hold for a state it lacks', () => {
    expect(STATES.length).toBeGreaterThan(40);
    expect(STATES.filter((s) => !HOLDS[s])).toEqual([]);
    expect(Object.keys(HOLDS).filter((s) => !STATES.includes(s))).toEqual([]);
  });

  it('never shows a state documented as transient in any journal line', () => {
    const transient = STATES.filter((s) => HOLDS[s] && isTransient(HOLDS[s]!));
    const seen = [...referenceJournal, ...[...results.values()].flatMap((r) => r.journal)];
    expect(seen.length).toBeGreaterThan(STATES.length);
    expect(transient.filter((s) => seen.some((v) => isActive(v, s)))).toEqual([]);
  });
});

describe('an uninterrupted run', () => {
  it('provisions into a fresh root: exit 0, InProgress then Ready, the marker, one user line, each key once', () => {
    expect(reference.code).toBe(0);
    expect(reference.reports).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(reference.markers).toEqual([`${ZERO_VM}.provisioned`]);
    expect(reference.userLines).toBe(1);
    expect(reference.keyCounts.every((n) => n === 1)).toBe(true);
    expect(Object.keys(reference.tree)).toEqual(
      expect.arrayContaining(['etc/hostname', 'etc/passwd', `home/${USER}/.ssh/authorized_keys`, 'etc/ssh/sshd_config.d/00-bootstate.conf']),
    );
    expect(reference.pool.reportKeys).toBe(1);
  });
});

describe.each(HELD)('a SIGKILL in %s', (state) => {
  const r = () => {
    const result = results.get(state)!;
    if (!result.second) throw new Error(`no kill landed in ${state} in ${ATTEMPTS} attempts: ${JSON.stringify(result.attempts)}`);
    return result;
  };

  it('lands in that state, as the journal shows when the agent is frozen', () => {
    expect(r().attempts.at(-1)).toEqual({ killedIn: r().killedIn, landed: true });
    if (!HOLDS[state] || !(HOLDS[state] as Hold).atStart) expect(isActive(r().killedIn!, state)).toBe(true);
    else expect(r().killedIn).toBeNull();
    expect(r().killRun.signal).toBe('SIGKILL');
  });

  it('leaves a .provisioned marker only if Ready had been accepted', () => {
    const provisioned = r().afterKill.markers.includes(`${ZERO_VM}.provisioned`);
    if (!r().afterKill.readyAccepted) expect(provisioned).toBe(false);
    if (provisioned) expect(r().afterKill.readyAccepted).toBe(true);
  });

  it('is followed by a boot that exits 0 with Ready accepted, the marker and no report-pending marker', () => {
    const second = r().second!;
    const before = r().afterKill.markers;
    expect(second.code).toBe(0);
    expect(second.markers).toEqual([`${ZERO_VM}.provisioned`]);
    if (before.includes(`${ZERO_VM}.provisioned`)) expect(second.reports).toEqual([]);
    else if (before.includes(`${ZERO_VM}.report-pending`)) expect(second.reports).toEqual(['Ready']);
    else expect(second.reports).toEqual(['NotReady/Provisioning', 'Ready']);
  });

  it('is followed by a boot that leaves the same OS files, contents and modes as an uninterrupted run', () => {
    const second = r().second!;
    expect(second.tree).toEqual(reference.tree);
    expect(second.userLines).toBe(1);
    expect(second.keyCounts).toEqual(KEYS.map(() => 1));
  });

  it('leaves no temp file behind once the next boot is done', () => {
    expect(r().second!.temps).toEqual([]);
  });

  it('leaves every file it wrote parseable (no half-written file)', () => {
    expect(r().second!.unparsable).toEqual([]);
  });

  it('leaves a KVP pool of whole, decodable records with exactly one PROVISIONING_REPORT', () => {
    const pool = r().second!.pool;
    expect(pool.error).toBeUndefined();
    expect(pool.bytes % 2560).toBe(0);
    expect(pool.records).toBeGreaterThan(0);
    expect(pool.reportKeys).toBe(1);
  });
});

describe('Ready accepted, marker not yet written', () => {
  it('makes the next boot report Ready a second time (the report-pending marker stands in for the missing one)', () => {
    const cases = ['markerNotWritten', 'markingProvisioned']
      .map((s) => results.get(s)!)
      .filter((c) => c.afterKill.readyAccepted && !c.afterKill.markers.includes(`${ZERO_VM}.provisioned`));
    expect(cases.map((c) => c.state)).toContain('markerNotWritten');
    for (const c of cases) {
      expect(c.killRun.reports.filter((k) => k === 'Ready')).toHaveLength(1);
      expect(c.second!.reports).toEqual(['Ready']);
    }
  });
});

describe('the scratch backend as root', () => {
  // The scratch backend writes the runner's uid (0 as root) into etc/passwd; the next boot must not take the user it
  // created for a system account.
  (process.getuid?.() === 0 ? it : it.skip)('lets a boot after a kill past user creation converge without a login.defs admitting uid 0', async () => {
    const fabric = await startFakeFabric();
    try {
      const root = seedRoot('bootstate-crash-uid0-', false);
      const kill = await runAndKill(fabric, root, {}, { target: STATE.sshKeysWriting });
      expect(kill.landed).toBe(true);
      const second = await runAgent(fabric, { root });
      expect(second.code).toBe(0);
    } finally {
      await fabric.close();
    }
  }, 30_000);
});
