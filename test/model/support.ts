/**
 * Pure helpers for the model-based tests of `machines/provisioning.ts`: naming transitions, enumerating them from
 * the real machine, the events offered at each snapshot (with payloads), and the vertex key of the traversal.
 */
import { createEmptyActor, type AnyActorScope, type AnyMachineSnapshot, type AnyStateMachine, type AnyStateNode, type AnyTransitionDefinition, type EventObject, type InspectionEvent } from 'xstate';
import type { InstanceMetadata, MediaMetadata } from '../../src/core/metadata.js';
import { CONFIGURING_OS, CREDENTIALS, GATHERING, HOST_KEYS, IN_PROGRESS, nodeId, STATE, stateValue, WORK } from '../support/chart.js';
import { DEFAULT_CONFIG, type Config } from '../../src/config/defaults.js';
import { BootstateError, toFailure, type ErrorCode, type Failure } from '../../src/core/errors.js';
import {
  HEALTH_FAILED,
  HEALTH_IN_PROGRESS,
  HEALTH_READY,
  type Health,
  type ProvisioningContext,
  type ProvisioningInput,
  type ProvisioningOutput,
  type StartupFacts,
} from '../../machines/provisioning.js';

/** Any event the traversal offers: a done/error/after event of the machine, or TERMINATE. */
export type ModelEvent = EventObject & { output?: unknown; error?: unknown; to?: number; late?: boolean };

/**
 * A config whose delays are all distinct (imds retry 2 s, imds total 30 s, media 25.5 s, wireserver retry 1 s,
 * wireserver total 60 s, certificates total 17.5 s, failure report on SIGTERM 1.5 s, a Savable VM's NIC detach 45 s and attach 120 s), so no two timers of one path are ever due at the same instant.
 */
export const TEST_CONFIG: Config = {
  ...DEFAULT_CONFIG,
  provisioning_media: { ...DEFAULT_CONFIG.provisioning_media, timeout_secs: 25.5 },
  imds: { ...DEFAULT_CONFIG.imds, retry_interval_secs: 2, total_retry_timeout_secs: 30 },
  wireserver: { ...DEFAULT_CONFIG.wireserver, retry_interval_secs: 1, total_retry_timeout_secs: 60 },
  certificates: { ...DEFAULT_CONFIG.certificates, total_retry_timeout_secs: 17.5 },
  preprovisioning: { ...DEFAULT_CONFIG.preprovisioning, nic_detach_timeout_secs: 45, nic_attach_timeout_secs: 120 },
};

/** The same config with every OS step left out (`--only` with nothing, or `--skip` of them all). */
export const TEST_CONFIG_SKIP_ALL: Config = {
  ...TEST_CONFIG,
  steps: { skip: ['hostname', 'user', 'password', 'ssh-keys', 'sshd', 'host-keys', 'custom-data'] },
};

/** Steps left out on either side of each dependency: the hostname and password run without a user, … */
export const TEST_CONFIG_SKIP_ACCOUNT: Config = { ...TEST_CONFIG, steps: { skip: ['user', 'ssh-keys', 'sshd'] } };
/** … and the user with its keys and the sshd drop-in, without the hostname, the password, host keys or custom data. */
export const TEST_CONFIG_SKIP_SOME: Config = { ...TEST_CONFIG, steps: { skip: ['hostname', 'password', 'host-keys', 'custom-data'] } };

export const VM_ID = '6f0c2a5e-0000-4000-8000-00000000c0de';

/** What the platform check finds: an Azure VM, or a machine without Azure's asset tag or provisioning media. */
export const ON_AZURE = { onAzure: true, why: "the DMI chassis asset tag is Azure's" };
export const NOT_ON_AZURE = { onAzure: false, why: 'no DMI chassis asset tag' };

/** What a read before the chart failed with. */
const failedWith = (code: ErrorCode, message: string): Failure => toFailure(new BootstateError(code, message));
export const CONFIG_FAILURE = failedWith('CONFIG_INVALID', 'bad toml at line 3');
export const PLATFORM_FAILURE = { failure: failedWith('IO', 'cannot read sysfs') };
export const LOCK_REFUSED = failedWith('ALREADY_RUNNING', 'another bootstate is already provisioning this machine');
export const VM_ID_FAILURE = failedWith('VM_ID_UNREADABLE', 'product_uuid failed');
export const MARKER_FAILURE = failedWith('IO', 'the marker could not be read');

/** What the reads before the chart found, and the config the run goes on with (the test config unless said). */
export type StartupRead = StartupFacts & { config?: Config };

/**
 * The chart's input for a run whose reads before the chart found `read`: unless it says otherwise an Azure VM with
 * the VM id VM_ID and no marker, the lock held, the test config loaded.
 */
export function startup(read: StartupRead = {}): ProvisioningInput {
  const { config = TEST_CONFIG, ...facts } = read;
  return { config, startup: { platform: ON_AZURE, vmId: facts.vmIdFailure ? null : VM_ID, marker: 'none', ...facts } };
}

/** A run's start for the model paths: its name and its input. */
export interface Start {
  name: string;
  input: ProvisioningInput;
}

const start = (name: string, read: StartupRead = {}): Start => ({ name, input: startup(read) });

/**
 * The starts the chart's own model paths explore, one TestModel each: every way out of `starting`, and the runs
 * past it (the test config, and one that leaves every step out).
 */
export const MODEL_STARTS: Start[] = [
  start('lock refused', { lockRefused: LOCK_REFUSED }),
  start('off Azure', { platform: NOT_ON_AZURE }),
  start('VM id unreadable', { vmIdFailure: VM_ID_FAILURE }),
  start('config failed', { configFailure: CONFIG_FAILURE }),
  start('config failed, provisioned', { configFailure: CONFIG_FAILURE, marker: 'provisioned' }),
  start('config failed, report pending', { configFailure: CONFIG_FAILURE, marker: 'report-pending' }),
  start('marker unreadable', { markerFailure: MARKER_FAILURE }),
  start('provisioned', { marker: 'provisioned' }),
  start('platform unknown, report pending', { platform: PLATFORM_FAILURE, marker: 'report-pending' }),
  start('report pending', { marker: 'report-pending' }),
  start('report pending, every step left out', { config: TEST_CONFIG_SKIP_ALL, marker: 'report-pending' }),
  start('waiting for reuse', { marker: 'waiting-for-reuse' }),
  start('waiting for reuse, Savable', { marker: 'waiting-for-reuse-savable' }),
  start('waiting for shutdown', { marker: 'waiting-for-shutdown' }),
  start('first boot'),
  start('first boot, every step left out', { config: TEST_CONFIG_SKIP_ALL }),
];

/**
 * The starts the oracle's own paths explore: a covering set of the cross product of config, platform, lock, VM id
 * and marker (which read wins over which), and every config past the marker.
 */
export const ORACLE_STARTS: Start[] = [
  start('lock refused', { lockRefused: LOCK_REFUSED }),
  start('lock refused off Azure', { lockRefused: LOCK_REFUSED, platform: NOT_ON_AZURE }),
  start('lock refused, config failed', { lockRefused: LOCK_REFUSED, configFailure: CONFIG_FAILURE }),
  start('off Azure', { platform: NOT_ON_AZURE }),
  start('off Azure, config failed', { platform: NOT_ON_AZURE, configFailure: CONFIG_FAILURE }),
  start('off Azure, VM id unreadable', { platform: NOT_ON_AZURE, vmIdFailure: VM_ID_FAILURE }),
  ...(['none', 'provisioned', 'report-pending', 'waiting-for-reuse'] as const).map((marker) => start(`config failed, marker ${marker}`, { configFailure: CONFIG_FAILURE, marker })),
  start('config failed, marker unreadable', { configFailure: CONFIG_FAILURE, markerFailure: MARKER_FAILURE }),
  start('config failed, platform unknown', { configFailure: CONFIG_FAILURE, platform: PLATFORM_FAILURE }),
  start('config failed, platform unknown, report pending', { configFailure: CONFIG_FAILURE, platform: PLATFORM_FAILURE, marker: 'report-pending' }),
  start('VM id unreadable', { vmIdFailure: VM_ID_FAILURE }),
  start('VM id unreadable, config failed', { vmIdFailure: VM_ID_FAILURE, configFailure: CONFIG_FAILURE }),
  start('marker unreadable', { markerFailure: MARKER_FAILURE }),
  start('platform unknown', { platform: PLATFORM_FAILURE }),
  start('platform unknown, report pending', { platform: PLATFORM_FAILURE, marker: 'report-pending' }),
  ...[TEST_CONFIG, TEST_CONFIG_SKIP_ALL, TEST_CONFIG_SKIP_SOME, TEST_CONFIG_SKIP_ACCOUNT].flatMap((config, i) =>
    (['none', 'provisioned', 'report-pending', 'waiting-for-reuse'] as const).map((marker) => start(`config ${i}, marker ${marker}`, { config, marker })),
  ),
  // An OS-disk pool VM's marker changes only the decision once gathered: one config, walked after the others so the
  // states it shares with a first boot are explored from there.
  start('config 0, marker waiting-for-shutdown', { marker: 'waiting-for-shutdown' }),
  start('config 0, marker waiting-for-reuse-savable', { marker: 'waiting-for-reuse-savable' }),
];

export const METADATA: InstanceMetadata = {
  vmId: VM_ID,
  adminUsername: 'azureuser',
  computerName: 'vm-imds',
  disablePasswordAuthentication: true,
  publicKeys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIImds imds'],
  hasCustomData: false,
  ppsType: 'None',
};

/** IMDS allowing password logins: the chart waits for the media, which may carry the password. */
export const METADATA_PASSWORD_LOGINS: InstanceMetadata = { ...METADATA, disablePasswordAuthentication: false };

export const MEDIA_WITH_USERNAME: MediaMetadata = {
  username: 'mediauser',
  hostname: 'vm-media',
  disablePasswordAuthentication: false,
  publicKeys: [],
  passwordProvided: true,
  customDataPresent: false,
  ppsType: 'None',
  device: '/dev/sr0',
};

export const MEDIA_WITHOUT_USERNAME: MediaMetadata = { ...MEDIA_WITH_USERNAME, username: null, hostname: null };

/** IMDS with password logins off that says custom data was given: only the media carries it. */
export const METADATA_CUSTOM_DATA: InstanceMetadata = { ...METADATA, hasCustomData: true };

/** A pool type this agent has never heard of: refused like Savable, the report naming it as given. */
export const METADATA_POOL_UNKNOWN: InstanceMetadata = { ...METADATA, ppsType: 'Hibernated' };

/** IMDS of a pool VM of the type this agent serves, and of one it cannot serve. */
export const METADATA_POOL_RUNNING: InstanceMetadata = { ...METADATA, adminUsername: 'placeholder', computerName: 'pool-vm', ppsType: 'Running' };
export const METADATA_POOL_SAVABLE: InstanceMetadata = { ...METADATA_POOL_RUNNING, ppsType: 'Savable' };
export const METADATA_POOL_OS_DISK: InstanceMetadata = { ...METADATA_POOL_RUNNING, ppsType: 'PreprovisionedOSDisk' };

/** Media naming a pool type: Running (as `PreprovisionedVm=true` does), and one this agent cannot serve. */
export const MEDIA_POOL_RUNNING: MediaMetadata = { ...MEDIA_WITHOUT_USERNAME, ppsType: 'Running' };
export const MEDIA_POOL_OS_DISK: MediaMetadata = { ...MEDIA_WITH_USERNAME, ppsType: 'PreprovisionedOSDisk' };
export const MEDIA_POOL_SAVABLE: MediaMetadata = { ...MEDIA_WITHOUT_USERNAME, ppsType: 'Savable' };

/** The NIC the host hot-attaches to a Savable pool VM restored for a customer. */
export const ATTACHED_NIC = { name: 'eth1', mac: '00:0d:3a:00:00:02' };

/** Media whose ProvisionGuestProxyAgent asks for Azure's Guest Proxy Agent before provisioning goes on. */
export const MEDIA_PROXY_AGENT: MediaMetadata = { ...MEDIA_WITHOUT_USERNAME, passwordProvided: false, provisionGuestProxyAgent: true };

/** Media carrying CustomData (IMDS need not say `hasCustomData`) but no identity: IMDS's plan, the media's user data. */
export const MEDIA_CUSTOM_DATA: MediaMetadata = { ...MEDIA_WITHOUT_USERNAME, passwordProvided: false, customDataPresent: true };

/** The customer's ovf-env.xml, as `reprovisiondata` delivers it once the pool VM is claimed. */
export const MEDIA_CUSTOMER: MediaMetadata = {
  ...MEDIA_WITH_USERNAME,
  username: 'customer',
  hostname: 'vm-customer',
  customDataPresent: true,
  device: 'reprovisiondata',
};

/** A key the media names by its certificate's thumbprint, and the OpenSSH line the goal state's certificate gives. */
export const KEY_FINGERPRINT = 'EB0C0AB4B2D5FC35F2F0658D19F44C8283E2DD62';
export const CERTIFICATE_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICertificate certificate';

/** Done payloads per invoke id; `validate` returns the plan it was given with the hostname changed. */
export function donePayloads(invokeId: string, context: ProvisioningContext): unknown[] {
  switch (invokeId) {
    case 'imds':
      return [METADATA, METADATA_PASSWORD_LOGINS, METADATA_POOL_RUNNING, METADATA_POOL_SAVABLE, METADATA_POOL_OS_DISK, METADATA_POOL_UNKNOWN];
    case 'nicDetach':
    case 'nicGone':
    case 'carrier':
      return ['eth0'];
    case 'nicAttach':
      return [ATTACHED_NIC];
    case 'reprovision':
      return [MEDIA_CUSTOMER, { ...MEDIA_CUSTOMER, provisionGuestProxyAgent: true }];
    case 'host-keys':
      // Nothing left for the background, or rsa (sshd reads keys per connection).
      return [[], ['rsa']];
    case 'media':
      return [null, MEDIA_WITH_USERNAME, MEDIA_WITHOUT_USERNAME, MEDIA_PROXY_AGENT];
    case 'validate': {
      // Validation may normalise the plan; the OS steps must get what it returned, not what it was given. Besides
      // the plan as it came, one whose media also named a key by fingerprint, and one where that key is the only way in.
      if (!context.plan) return [null];
      const validated = { ...context.plan, hostname: `${context.plan.hostname}-validated` };
      return [
        validated,
        { ...validated, keyFingerprints: [KEY_FINGERPRINT] },
        { ...validated, sshKeys: [], passwordAuthentication: false, keyFingerprints: [KEY_FINGERPRINT], keyPairs: [{ fingerprint: KEY_FINGERPRINT, path: '' }] },
      ];
    }
    case 'certificates':
      return [[CERTIFICATE_KEY]];
    case 'inProgressReport':
    case 'readyReport':
    case 'failureReport':
    case 'hostname':
    case 'hostnamePublish':
    case 'user':
    case 'password':
    case 'ssh-keys':
    case 'sshd':
    case 'pendingMarker':
    case 'provisionedMarker':
    case 'laterHostKeys':
    case 'missingHostKeys':
    case 'proxyAgent':
    case 'custom-data':
    case 'poolReadyReport':
    case 'waitingMarker':
    case 'shutdownMarker':
    case 'primaryNic':
    case 'lease':
      return [undefined];
    default:
      throw new Error(`no done payload for invoke '${invokeId}': add one to test/model/support.ts`);
  }
}

/** The error each actor fails with when its failure is not a retry question. */
const FATAL_CODE: Record<string, ErrorCode> = {
  inProgressReport: 'HTTP_STATUS',
  imds: 'IMDS_INVALID',
  media: 'OVF_INVALID',
  validate: 'INVALID_USERNAME',
  hostname: 'HOSTNAME_FAILED',
  hostnamePublish: 'SUBPROCESS_FAILED',
  user: 'USER_FAILED',
  password: 'PASSWORD_FAILED',
  'ssh-keys': 'SSH_KEYS_FAILED',
  certificates: 'CERTIFICATES_FAILED',
  sshd: 'SSHD_CONFIG_FAILED',
  pendingMarker: 'MARKER_FAILED',
  readyReport: 'HTTP_STATUS',
  provisionedMarker: 'MARKER_FAILED',
  failureReport: 'HTTP_STATUS',
  kvp: 'KVP_FAILED',
  'host-keys': 'HOST_KEYS_FAILED',
  laterHostKeys: 'HOST_KEYS_FAILED',
  missingHostKeys: 'HOST_KEYS_FAILED',
  proxyAgent: 'PROXY_AGENT_STATUS_FAILURE',
  'custom-data': 'CUSTOM_DATA_FAILED',
  poolReadyReport: 'HTTP_STATUS',
  waitingMarker: 'MARKER_FAILED',
  reprovision: 'OVF_INVALID',
  shutdownMarker: 'MARKER_FAILED',
  nicDetach: 'PPS_NIC_FAILED',
  nicGone: 'PPS_NIC_FAILED',
  nicAttach: 'PPS_NIC_FAILED',
  primaryNic: 'PPS_NIC_FAILED',
  carrier: 'PPS_NIC_FAILED',
  lease: 'SUBPROCESS_FAILED',
};

const errorCache = new Map<string, BootstateError>();

/** One shared instance per (invoke, retryable), so serialised events stay identical across the traversal. */
export function errorFor(invokeId: string, retryable: boolean): BootstateError {
  const key = `${invokeId}:${retryable}`;
  let error = errorCache.get(key);
  if (!error) {
    const code: ErrorCode = retryable ? 'HTTP_STATUS' : FATAL_CODE[invokeId] ?? failUnknown(invokeId);
    error = new BootstateError(code, `${invokeId} ${retryable ? 'answered 503' : 'failed'}`, { retryable });
    errorCache.set(key, error);
  }
  return error;
}

function failUnknown(invokeId: string): never {
  throw new Error(`no error payload for invoke '${invokeId}': add one to test/model/support.ts`);
}

/** `source eventType[index] → targets`: the name of one transition definition, stable across runs. */
export function edgeKey(t: AnyTransitionDefinition): string {
  const siblings = t.eventType === '' ? (t.source.always ?? []) : (t.source.transitions.get(t.eventType) ?? []);
  const index = siblings.indexOf(t);
  if (index < 0) throw new Error(`transition ${t.source.id} ${t.eventType} is not one of its source's transitions`);
  const targets = t.target?.length ? t.target.map((n) => n.id).join(',') : '(none)';
  return `${t.source.id} ${t.eventType || '(always)'}[${index}] → ${targets}`;
}

export function allStateNodes(node: AnyStateNode): AnyStateNode[] {
  return [node, ...Object.values(node.states).flatMap((child) => allStateNodes(child as AnyStateNode))];
}

/** Every transition of every state node: `on`, invoke onDone/onError, `after`, state onDone, `always`. */
export function allTransitions(machine: AnyStateMachine): AnyTransitionDefinition[] {
  return allStateNodes(machine.root).flatMap((node) => [...[...node.transitions.values()].flat(), ...(node.always ?? [])]);
}

function inertScope(onMicrostep?: (transitions: AnyTransitionDefinition[]) => void): { scope: AnyActorScope; stop(): void } {
  const self = createEmptyActor();
  const subscription = self.system.inspect((e: InspectionEvent) => {
    if (e.type === '@xstate.microstep') onMicrostep?.(e._transitions);
  });
  const scope = {
    self,
    id: '',
    sessionId: '',
    logger: () => {},
    defer: () => {},
    stopChild: () => {},
    emit: () => {},
    actionExecutor: () => {},
    system: self.system,
  } as unknown as AnyActorScope;
  return { scope, stop: () => subscription.unsubscribe() };
}

/**
 * One macrostep computed purely (no actor runs, no action executes): the next snapshot and the transitions of
 * each microstep. `getTransitionData` only answers for the external event; raised `xstate.done.state.*` events
 * and eventless transitions are taken in later microsteps of the same macrostep, which only it reports.
 */
export function macrostep(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, event: EventObject) {
  const microsteps: AnyTransitionDefinition[][] = [];
  const { scope, stop } = inertScope((transitions) => microsteps.push(transitions));
  try {
    return { snapshot: machine.transition(snapshot, event, scope) as AnyMachineSnapshot, microsteps };
  } finally {
    stop();
  }
}

/**
 * Replays a path's events purely from the initial snapshot. Paths from `getShortestPaths` carry one
 * representative snapshot per vertex key, which may come from another path; the replay is this path's own.
 */
export function replay(machine: AnyStateMachine, events: EventObject[], input: unknown = {}) {
  // The first step's microsteps: the first state routes on the input at once.
  const initial: AnyTransitionDefinition[][] = [];
  const { scope, stop } = inertScope((transitions) => initial.push(transitions));
  let snapshot = machine.getInitialSnapshot(scope, input) as AnyMachineSnapshot;
  stop();
  const steps = [{ snapshot, microsteps: initial }];
  for (const event of events) {
    const next = macrostep(machine, snapshot, event);
    steps.push(next);
    snapshot = next.snapshot;
  }
  return steps;
}

/** A delay reference resolved to milliseconds with the machine's own delay implementations. */
export function delayMs(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, delay: string | number): number {
  if (typeof delay === 'number') return delay;
  const impl = (machine.implementations.delays as Record<string, unknown>)[delay];
  if (typeof impl === 'number') return impl;
  if (typeof impl !== 'function') throw new Error(`unknown delay '${delay}'`);
  return (impl as (args: { context: unknown; event: unknown }, params: unknown) => number)({ context: snapshot.context, event: { type: '' } }, undefined);
}

const isFinalChildActive = (snapshot: AnyMachineSnapshot, region: AnyStateNode) =>
  snapshot._nodes.some((n) => n.parent === region && n.type === 'final');

const under = (node: AnyStateNode, path: string) => node.path.join('.') === path || node.path.join('.').startsWith(`${path}.`);

/** Regions of a parallel state that move one after the other: each waits for the previous ones to be final. */
const SEQUENTIAL_REGIONS: Record<string, string[]> = {
  // The media before IMDS on the chart's own paths; the oracle's paths and arrival-order.test.ts take both orders.
  [GATHERING]: ['media', 'imds'],
  [CONFIGURING_OS]: ['hostname', 'account', 'sshd', 'customData'],
  [CREDENTIALS]: ['password', 'sshKeys'],
};

/** The state values `mayMove` asks about, built once: it runs for every node at every state of the traversal. */
const WORK_AT_START = [stateValue(STATE.imdsRequesting), stateValue(STATE.mediaReading)];
const CONFIGURED = stateValue(STATE.configured);
const IN_CONFIGURING_OS = stateValue(CONFIGURING_OS);
const IN_PROGRESS_BACKOFF = stateValue(STATE.inProgressBackoff);
const MEDIA_WAITING = stateValue(STATE.mediaWaiting);
const KEYS_WRITTEN = [stateValue(STATE.sshKeysWriting), stateValue(STATE.sshKeysDone)];

/**
 * Whether events of `node` are offered at `snapshot`. This is the bound on the parallel regions (see the
 * comment in provisioning.test.ts): every transition stays reachable, the interleavings do not multiply.
 */
export function mayMove(snapshot: AnyMachineSnapshot, node: AnyStateNode): boolean {
  const context = snapshot.context as ProvisioningContext;
  const workAtStart = () =>
    WORK_AT_START.every((value) => snapshot.matches(value as never)) &&
    context.imdsFailure === null;
  if (under(node, IN_PROGRESS) && !workAtStart()) return false;
  // The host keys finish at the start of the work, or in the OS stage as the head of sshd's lane.
  // The background host keys end once the OS is configured.
  if (under(node, STATE.hostKeysAdding)) return snapshot.matches(CONFIGURED as never);
  if (under(node, HOST_KEYS) && !workAtStart()) {
    const configuring = snapshot.machine.getStateNodeById(nodeId(CONFIGURING_OS)) as AnyStateNode;
    const before = ['hostname', 'account'].map((key) => configuring.states[key] as AnyStateNode);
    if (!snapshot.matches(IN_CONFIGURING_OS as never) || !before.every((region) => isFinalChildActive(snapshot, region))) return false;
  }
  if (under(node, WORK) && snapshot.matches(IN_PROGRESS_BACKOFF as never)) return false;
  for (const [parallelPath, order] of Object.entries(SEQUENTIAL_REGIONS)) {
    const index = order.findIndex((key) => under(node, `${parallelPath}.${key}`));
    if (index <= 0) continue;
    const parallel = snapshot.machine.getStateNodeById(nodeId(parallelPath)) as AnyStateNode;
    const earlier = order.slice(0, index).map((key) => parallel.states[key] as AnyStateNode);
    if (!earlier.every((region) => isFinalChildActive(snapshot, region))) return false;
  }
  return true;
}

/**
 * Every event that can move `snapshot` under the region policy: done events with each payload, error events
 * (retryable and fatal where a `retryable` guard tells them apart), TERMINATE, and of the active delayed
 * transitions the one due first (timers of one state chain start together, so the shortest delay fires
 * first; the runner checks this against the real scheduler on every path).
 */
export function modelEvents(snapshot: AnyMachineSnapshot): ModelEvent[] {
  if (snapshot.status !== 'active') return [];
  const context = snapshot.context as ProvisioningContext;
  // A config that skips steps only changes the OS steps: one straight path through the rest reaches its transitions.
  const straight = context.config.steps.skip.length > 0;
  const events: ModelEvent[] = [];
  const delayed: Array<{ type: string; ms: number }> = [];
  for (const node of snapshot._nodes) {
    if (!mayMove(snapshot, node)) continue;
    for (const [type, transitions] of node.transitions) {
      if (type.startsWith('xstate.done.actor.')) {
        const id = type.slice('xstate.done.actor.'.length);
        for (const output of donePayloads(id, context).slice(0, straight ? 1 : undefined)) events.push({ type, output });
      } else if (straight && type !== 'imds.sent') {
        continue;
      } else if (type.startsWith('xstate.error.actor.')) {
        const id = type.slice('xstate.error.actor.'.length);
        // The root KVP writer can fail anywhere; failing it once, as the first pass of the work starts, covers its edge.
        if (id === 'kvp' && !(snapshot.matches(MEDIA_WAITING as never) && context.reprovision === null)) continue;
        const guarded = transitions.some((t) => (t.guard as { type?: string } | undefined)?.type === 'retryable');
        if (guarded) events.push({ type, error: errorFor(id, true) });
        events.push({ type, error: errorFor(id, false) });
      } else if (type.startsWith('xstate.after.')) {
        const delay = (transitions[0] as AnyTransitionDefinition & { delay: string | number }).delay;
        delayed.push({ type, ms: delayMs(snapshot.machine, snapshot, delay) });
      } else if (type.startsWith('xstate.done.state.')) {
        // raised by the machine itself when its regions are final; never sent from outside
      } else if (!events.some((e) => e.type === type)) {
        events.push({ type });
      }
    }
  }
  if (straight) return events;
  const first = Math.min(...delayed.map((d) => d.ms));
  for (const d of delayed) if (d.ms === first) events.push({ type: d.type });
  return events;
}

const mediaKey = (media: ProvisioningContext['media']) =>
  media === null ? 'none' : `${media.username ? 'user' : 'nouser'}${media.provisionGuestProxyAgent ? ' proxy-agent' : ''}`;

/**
 * Vertex key: state value + the transitions that led here + the context fields guards and failure reasons read.
 * Keying on the incoming transitions (not just the event type) makes every transition definition a distinct
 * vertex, so shortest paths reach every edge; root TERMINATE and reportingFailure's TERMINATE stay apart.
 */
export function serializeState(snapshot: AnyMachineSnapshot, event: EventObject | undefined, prev?: AnyMachineSnapshot): string {
  const context = snapshot.context as ProvisioningContext;
  const via = event && prev ? snapshot.machine.getTransitionData(prev, event).map(edgeKey) : ['(init)'];
  return JSON.stringify({
    value: snapshot.value,
    status: snapshot.status,
    via,
    failure: context.failure !== null,
    plan: context.plan !== null,
    metadata: context.metadata !== null,
    media: mediaKey(context.media),
    terminating: context.terminating,
    pps: context.metadata?.ppsType ?? null,
    claimed: context.reprovision !== null && mediaKey(context.reprovision),
    skip: context.config.steps.skip.length,
    // Until the SSH keys are written, whether the goal state's certificates are wanted, and whether they are the only way in.
    ...(snapshot.matches(IN_CONFIGURING_OS as never) && !KEYS_WRITTEN.some((v) => snapshot.matches(v as never)) && context.plan?.keyFingerprints
      ? { certificates: context.plan.sshKeys.length === 0 && !context.plan.passwordAuthentication ? 'only way in' : 'wanted' }
      : {}),
  });
}

/** The health tag each top-level state must carry (none for the states before and beside reporting). */
export function expectedHealth(snapshot: AnyMachineSnapshot): Health | null {
  const top = typeof snapshot.value === 'string' ? snapshot.value : Object.keys(snapshot.value)[0]!;
  switch (top) {
    case 'provisioning':
      return HEALTH_IN_PROGRESS;
    case 'reportingReady':
    case 'preprovisioned':
    case 'waitingInterrupted':
    case 'shutDownInPool':
    case 'markingProvisioned':
    case 'provisioned':
    case 'readyNotAccepted':
    case 'markerNotWritten':
      return HEALTH_READY;
    case 'reportingFailure':
    case 'failed':
    case 'failedUnreported':
      return HEALTH_FAILED;
    default:
      return null;
  }
}

/** What each final state must output, apart from the failure reason and its exit code. */
export const FINAL_OUTPUT: Record<string, Pick<ProvisioningOutput, 'result' | 'reported'>> = {
  provisioned: { result: 'provisioned', reported: true },
  alreadyProvisioned: { result: 'already-provisioned', reported: false },
  notOnAzure: { result: 'not-on-azure', reported: false },
  alreadyRunning: { result: 'failed', reported: false },
  waitingInterrupted: { result: 'waiting-for-reuse', reported: true },
  shutDownInPool: { result: 'pool-shutdown', reported: true },
  readyNotAccepted: { result: 'failed', reported: false },
  markerNotWritten: { result: 'failed', reported: true },
  failed: { result: 'failed', reported: true },
  failedUnreported: { result: 'failed', reported: false },
};

/** `xstate.done.actor.imds` → `done imds`, for readable path names. */
export function shortEvent(event: ModelEvent): string {
  const { type } = event;
  if (type === 'xstate.init') return 'start';
  if (type.startsWith('xstate.done.actor.')) {
    const id = type.slice(18);
    const output = event.output;
    if (id === 'validate') return 'done validate';
    if (id === 'imds') {
      const m = output as InstanceMetadata;
      const extra = `${m.ppsType !== 'None' ? `, pps ${m.ppsType}` : ''}${m.hasCustomData ? ', custom data' : ''}`;
      return `done imds (password logins ${m.disablePasswordAuthentication ? 'off' : 'on'}${extra})`;
    }
    const tag =
      output === null ? ' null' : typeof output === 'string' ? ` ${output === VM_ID ? 'vm-id' : output}` : output && typeof output === 'object' && 'username' in output ? ` ${(output as MediaMetadata).username ? 'media+user' : 'media-user'}` : '';
    return `done ${id}${tag}`;
  }
  if (type.startsWith('xstate.error.actor.')) {
    return `error ${type.slice(19)}${(event.error as BootstateError).retryable ? ' (retryable)' : ''}`;
  }
  if (type.startsWith('xstate.after.')) {
    const [delay, ...rest] = type.slice(13).split('.');
    return `after ${delay} in ${rest.slice(1).join('.')}`;
  }
  if (type === 'time') return `clock at ${event.to!} ms`;
  return type;
}
