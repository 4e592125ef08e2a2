/**
 * Paths chosen by the oracle, not by the chart: a breadth-first walk over the oracle's own states (oracle.ts), from
 * each of a covering set of starts (what the run read before the chart, ORACLE_STARTS), that reaches every (state,
 * event) pair once by its shortest event sequence. Played against a chart, these paths catch a wrong transition
 * whose own chart-generated paths would never take the event that exposes it.
 *
 * The parallel parts are bounded as in the chart's model (`mayMove` in support.ts): the InProgress report moves
 * only at the start of the work, media before IMDS (except IMDS's first answer, which may come first, so both
 * orders of arrival are walked), the OS lanes one after the other, nothing while InProgress backs
 * off, nothing but the head start's end (the IMDS request written, or its bound) while the media read and the
 * host keys wait for it; of the clock, only the next deadline or retry is offered (and, while a Savable VM probes an
 * attached NIC, a second before the attach deadline); SIGTERM once per phase of the work. A config that
 * leaves steps out is played straight (first payloads, no failures): it changes only which OS steps start. Pool
 * VMs' paths come from IMDS or media naming a pool type and from the waiting-for-reuse marker.
 */
import type { ModelEvent, Start } from './support.js';
import {
  ATTACHED_NIC,
  CERTIFICATE_KEY,
  errorFor,
  KEY_FINGERPRINT,
  MEDIA_CUSTOM_DATA,
  MEDIA_CUSTOMER,
  MEDIA_POOL_OS_DISK,
  MEDIA_POOL_RUNNING,
  MEDIA_POOL_SAVABLE,
  MEDIA_PROXY_AGENT,
  MEDIA_WITH_USERNAME,
  MEDIA_WITHOUT_USERNAME,
  METADATA,
  METADATA_CUSTOM_DATA,
  METADATA_PASSWORD_LOGINS,
  METADATA_POOL_OS_DISK,
  METADATA_POOL_RUNNING,
  METADATA_POOL_SAVABLE,
  METADATA_POOL_UNKNOWN,
  ORACLE_STARTS,
} from './support.js';
import { ProvisioningOracle } from './oracle.js';

/** Actors whose failures the protocol retries: each fails both ways on the paths. */
const RETRIED = new Set(['inProgressReport', 'imds', 'readyReport', 'failureReport', 'poolReadyReport', 'reprovision', 'certificates', 'primaryNic']);

function payloads(id: string, oracle: ProvisioningOracle): unknown[] {
  switch (id) {
    case 'imds':
      return [METADATA, METADATA_PASSWORD_LOGINS, METADATA_CUSTOM_DATA, METADATA_POOL_RUNNING, METADATA_POOL_SAVABLE, METADATA_POOL_OS_DISK, METADATA_POOL_UNKNOWN];
    case 'media':
      return [null, MEDIA_WITH_USERNAME, MEDIA_WITHOUT_USERNAME, MEDIA_CUSTOM_DATA, MEDIA_PROXY_AGENT, MEDIA_POOL_RUNNING, MEDIA_POOL_SAVABLE, MEDIA_POOL_OS_DISK];
    case 'nicDetach':
    case 'nicGone':
    case 'carrier':
      return ['eth0'];
    case 'nicAttach':
      return [ATTACHED_NIC];
    case 'reprovision':
      return [MEDIA_CUSTOMER];
    case 'validate': {
      // What validation returns: the plan it was given, its hostname normalised.
      const plan = oracle.planToValidate!;
      const validated = { ...plan, sshKeys: Array.from({ length: plan.sshKeys }, (_, i) => `ssh-ed25519 key${i}`), hostname: `${plan.hostname}-validated` };
      // Also as if the media had named the only key by fingerprint (the model's own paths take one beside others too).
      // Offered for one kind of plan only: every plan doubles the OS stage's states that follow.
      if (plan.source !== 'imds' || plan.passwordAuthentication || plan.passwordProvided) return [validated];
      return [validated, { ...validated, sshKeys: [], keyFingerprints: [KEY_FINGERPRINT], keyPairs: [{ fingerprint: KEY_FINGERPRINT, path: '' }] }];
    }
    case 'certificates':
      return [[CERTIFICATE_KEY]];
    case 'host-keys':
      // What the step leaves for the background: nothing, or rsa (only where it heads sshd's lane, to keep the walk small).
      return oracle.hostKeysInOs ? [[], ['rsa']] : [[]];
    default:
      return [undefined];
  }
}

function offers(oracle: ProvisioningOracle, first: boolean): ModelEvent[] {
  if (oracle.done) return [];
  const events: ModelEvent[] = [];
  // Steps left out change only which OS steps start: one straight run per such config shows it.
  if (oracle.skipsSteps) {
    for (const id of oracle.movable()) events.push({ type: `xstate.done.actor.${id}`, output: payloads(id, oracle)[0] });
    if (oracle.awaitingImdsWrite) events.push({ type: 'imds.sent' });
    return events;
  }
  for (const id of oracle.movable()) {
    for (const output of payloads(id, oracle)) events.push({ type: `xstate.done.actor.${id}`, output });
    if (RETRIED.has(id)) events.push({ type: `xstate.error.actor.${id}`, error: errorFor(id, true) });
    events.push({ type: `xstate.error.actor.${id}`, error: errorFor(id, false) });
  }
  if (oracle.awaitingImdsWrite) events.push({ type: 'imds.sent' });
  if (first) events.push({ type: 'xstate.error.actor.kvp', error: errorFor('kvp', false) });
  events.push({ type: 'TERMINATE' });
  const due = oracle.nextDue;
  if (due !== null) events.push({ type: 'time', to: due });
  const late = oracle.lateInAttach;
  if (late !== null) events.push({ type: 'time', to: late, late: true });
  return events;
}

export function apply(oracle: ProvisioningOracle, event: ModelEvent): void {
  const { type } = event;
  if (type.startsWith('xstate.done.actor.')) oracle.finished(type.slice(18), event.output);
  else if (type.startsWith('xstate.error.actor.')) oracle.failed(type.slice(19), event.error);
  else if (type === 'time') oracle.advanceTo(event.to!);
  else if (type === 'TERMINATE') oracle.terminate();
  else if (type === 'imds.sent') oracle.imdsSent();
  else throw new Error(`the oracle does not know ${type}`);
}

// A clock move is one edge, the next deadline; the late one in a NIC's probe (lateInAttach) is an edge of its own.
const label = (e: ModelEvent) =>
  `${e.type}${e.late ? ':late' : ''}${e.error ? `:${(e.error as { retryable?: boolean }).retryable}` : ''}${e.output !== undefined ? `:${JSON.stringify(e.output)}` : ''}`;

/** Shortest event sequences from each start reaching every (oracle state, event) pair; none is a prefix of another. */
export function oraclePaths(limit = 60000): Array<{ start: Start; events: ModelEvent[] }> {
  type Path = { start: Start; events: ModelEvent[]; extended: boolean; oracle: ProvisioningOracle };
  // Each start is a path of no events: one that ends at once (a refused lock) is played as it is.
  const paths: Path[] = ORACLE_STARTS.map((start) => ({ start, events: [], extended: false, oracle: new ProvisioningOracle(start.input) }));
  const seen = new Set<string>();
  let frontier: Array<{ oracle: ProvisioningOracle; path: Path }> = paths.map((path) => ({ oracle: path.oracle, path }));
  while (frontier.length) {
    const next: typeof frontier = [];
    for (const { oracle, path } of frontier) {
      for (const event of offers(oracle, path.events.length === 0)) {
        const edge = `${oracle.key(event.type === 'TERMINATE')} ${label(event)}`;
        if (seen.has(edge)) continue;
        seen.add(edge);
        const after = oracle.clone();
        apply(after, event);
        path.extended = true;
        const child = { start: path.start, events: [...path.events, event], extended: false, oracle: after };
        paths.push(child);
        if (paths.length > limit) throw new Error(`the oracle's state space exceeds ${limit} steps`);
        next.push({ oracle: after, path: child });
      }
    }
    frontier = next;
  }
  // A path that ends where another one went on still lets the clock run once more: a wrong transition whose
  // target merges with a visited state (a refused InProgress retried anyway) shows itself only when time moves.
  return paths
    .filter((p) => !p.extended)
    .map(({ start, events, oracle }) => ({ start, events: oracle.done || oracle.nextDue === null ? events : [...events, { type: 'time', to: oracle.nextDue }] }));
}
