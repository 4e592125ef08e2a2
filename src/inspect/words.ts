/**
 * Events and states as people say them, shared by the trace and the live view: "IMDS answered" rather than
 * `xstate.done.actor.imds`, and one naming scheme for states — the dotted path below the machine, the same the
 * demo prints and the journal's state values spell (`provisioning.work.gathering.imds.fetching`).
 */
import { formatDelay } from './graph.js';

/** A delay as people say it: `2 s`, `5 min`, `200 ms`. */
export function spokenDelay(ms: number): string {
  return formatDelay(ms).replace(/^([\d.]+)(ms|s|min|h)$/, '$1 $2');
}

/**
 * Conditions said short, for the overview's edge labels, where a long label widens the whole chart: what `starting`
 * found before the chart (the lock, the platform, the marker), what IMDS said. Any other guard reads as its name in words (`configFailed` → `config failed`).
 */
export const GUARD_WORDS: Record<string, string> = {
  lockRefused: 'lock held elsewhere',
  vmIdUnreadable: 'VM id unreadable',
  markerUnreadable: 'marker unreadable',
  imdsHeadStartOver: 'IMDS request left',
  markerProvisioned: 'provisioned',
  markerReportPending: 'report pending',
  markerWaitingForReuse: 'waiting for reuse',
  markerWaitingForSavable: 'Savable, waiting for reuse',
  poolRunning: 'pool VM',
  poolAfterClaim: 'still a pool VM',
  poolUnsupported: 'pool type refused',
  havePlan: 'plan made',
  notOnAzure: 'not on Azure',
  proxyAgentWanted: 'proxy agent',
  hostKeysComplete: 'all host keys in',
  reportPendingInFlight: 'marker being written',
  reportPendingDown: 'marker down',
};

/** A guard's name in words. */
export function guardWords(guard: string): string {
  return GUARD_WORDS[guard] ?? guard.replace(/([a-z\d])([A-Z])/g, '$1 $2').toLowerCase();
}

/** What the completion or failure of each of the agent's invoked actors means, by invoke id. */
export const ACTOR_WORDS: Record<string, { done: string; error: string }> = {
  proxyAgent: { done: 'Guest Proxy Agent ready', error: 'Guest Proxy Agent not ready' },
  imds: { done: 'IMDS answered', error: 'IMDS request failed' },
  media: { done: 'provisioning media read', error: 'provisioning media unreadable' },
  inProgressReport: { done: 'Provisioning report accepted', error: 'Provisioning report failed' },
  validate: { done: 'metadata valid', error: 'metadata invalid' },
  hostname: { done: 'hostname set', error: 'hostname failed' },
  user: { done: 'user created', error: 'user creation failed' },
  password: { done: 'password set', error: 'password failed' },
  sshKeys: { done: 'SSH keys written', error: 'SSH keys failed' },
  sshd: { done: 'sshd configured', error: 'sshd configuration failed' },
  hostKeys: { done: 'SSH host keys replaced', error: 'SSH host keys failed' },
  laterHostKeys: { done: 'background SSH host keys made', error: 'background SSH host keys failed' },
  missingHostKeys: { done: 'missing SSH host keys made', error: 'missing SSH host keys failed' },
  pendingMarker: { done: 'report-pending marker written', error: 'report-pending marker failed' },
  readyReport: { done: 'Ready report accepted', error: 'Ready report failed' },
  provisionedMarker: { done: 'provisioned marker written', error: 'provisioned marker failed' },
  failureReport: { done: 'failure report accepted', error: 'failure report failed' },
  kvp: { done: 'KVP writer stopped', error: 'KVP writer failed' },
};

/** Events sent from outside the chart, in words. */
export const EVENT_WORDS: Record<string, string> = {
  'xstate.init': 'started',
  TERMINATE: 'SIGTERM received',
  'imds.sent': 'IMDS request written',
};

/** A timer's event in words: a retry interval, a deadline, or a plain timer, with the run's value when known. */
function timerWords(delay: string, timers: Record<string, number> | undefined): string {
  const ms = timers?.[delay] ?? (/^\d+$/.test(delay) ? Number(delay) : undefined);
  const value = ms === undefined ? '' : ` (${spokenDelay(ms)})`;
  if (/retry/i.test(delay)) return `retry timer${value} fired`;
  if (/timeout|deadline|total/i.test(delay)) return `deadline${value} reached: ${delay}`;
  return `timer ${delay}${value} fired`;
}

/** An event type in words. */
export function eventWords(type: string, timers?: Record<string, number>): string {
  if (EVENT_WORDS[type]) return EVENT_WORDS[type];
  const actor = /^xstate\.(done|error)\.actor\.(.+)$/.exec(type);
  if (actor) return ACTOR_WORDS[actor[2]!]?.[actor[1] as 'done' | 'error'] ?? `${actor[2]} ${actor[1] === 'done' ? 'finished' : 'failed'}`;
  const after = /^xstate\.after\.([^.]+)\./.exec(type);
  if (after) return timerWords(after[1]!, timers);
  const done = /^xstate\.done\.state\.(.+)$/.exec(type);
  if (done) return `${done[1]!.split('.').pop()} finished`;
  return type;
}

/** A state's name below the machine (`provisioning.work.gathering`); the root is the whole run. */
export function stateName(root: string, id: string): string {
  if (id === root) return '(whole run)';
  return id.startsWith(`${root}.`) ? id.slice(root.length + 1) : id;
}

/** The leaf paths of a state value, in the same scheme: `provisioning.work.gathering.imds.fetching.requesting`. */
export { leafPaths as leafNames } from '../core/state-path.js';
