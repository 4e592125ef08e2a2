/**
 * The provisioning chart's names as tests spell them, written once: the states tests point at (as paths below the
 * machine, the way the run journal and `snapshot.matches` spell them) and the invoked actors tests open and fail (by
 * what the step is, mapped to its invoke id). test/support/chart.test.ts checks every entry against the real chart,
 * so a state or invoke the chart renames fails there, by name, before it fails a test that uses it.
 */
import type { StateValue } from 'xstate';

/** The machine's id: a state node's id is this, a dot, and its path (`provisioning.provisioning.work`). */
export const MACHINE = 'provisioning';

/** The first boot's parallel state, its three regions, and the regions inside them. */
export const FIRST_BOOT = 'provisioning';
export const WORK = `${FIRST_BOOT}.work`;
export const HOST_KEYS = `${FIRST_BOOT}.hostKeys`;
export const IN_PROGRESS = `${FIRST_BOOT}.inProgress`;
export const GATHERING = `${WORK}.gathering`;
export const IMDS = `${GATHERING}.imds`;
export const MEDIA = `${GATHERING}.media`;
export const CONFIGURING_OS = `${WORK}.configuringOs`;
export const HOSTNAME = `${CONFIGURING_OS}.hostname`;
export const ACCOUNT = `${CONFIGURING_OS}.account`;
export const CREDENTIALS = `${ACCOUNT}.credentials`;
export const SSHD = `${CONFIGURING_OS}.sshd`;
export const CUSTOM_DATA = `${CONFIGURING_OS}.customData`;

/** The prefixes above, by name: each is a state of the chart too. */
export const PREFIX = {
  FIRST_BOOT,
  WORK,
  HOST_KEYS,
  IN_PROGRESS,
  GATHERING,
  IMDS,
  MEDIA,
  CONFIGURING_OS,
  HOSTNAME,
  ACCOUNT,
  CREDENTIALS,
  SSHD,
  CUSTOM_DATA,
} as const;

/** The states tests name, each a path below the machine. */
export const STATE = {
  starting: 'starting',
  reportingReady: 'reportingReady',
  reportingReadyRequesting: 'reportingReady.requesting',
  reportingReadyBackoff: 'reportingReady.backoff',
  reportingFailure: 'reportingFailure',
  alreadyProvisioned: 'alreadyProvisioned',
  alreadyRunning: 'alreadyRunning',
  notOnAzure: 'notOnAzure',
  inProgressBackoff: `${IN_PROGRESS}.sending.backoff`,
  inProgressDone: `${IN_PROGRESS}.done`,
  hostKeysAdding: `${HOST_KEYS}.adding`,
  imdsFetching: `${IMDS}.fetching`,
  imdsRequesting: `${IMDS}.fetching.requesting`,
  imdsBackoff: `${IMDS}.fetching.backoff`,
  imdsDone: `${IMDS}.done`,
  mediaWaiting: `${MEDIA}.waitingForImds`,
  mediaReading: `${MEDIA}.reading`,
  checkingProxyAgent: `${WORK}.checkingProxyAgent`,
  validating: `${WORK}.validating`,
  configured: `${WORK}.configured`,
  accountDone: `${ACCOUNT}.done`,
  creatingUser: `${ACCOUNT}.creatingUser`,
  passwordSetting: `${CREDENTIALS}.password.setting`,
  certificatesRequesting: `${CREDENTIALS}.sshKeys.fetchingCertificates.requesting`,
  certificatesBackoff: `${CREDENTIALS}.sshKeys.fetchingCertificates.backoff`,
  sshKeysWriting: `${CREDENTIALS}.sshKeys.writing`,
  sshKeysDone: `${CREDENTIALS}.sshKeys.done`,
  sshdAwaitingHostKeys: `${SSHD}.awaitingHostKeys`,
  sshdConfiguring: `${SSHD}.configuring`,
  sshdDone: `${SSHD}.done`,
  hostnameSetting: `${HOSTNAME}.setting`,
  hostnameDone: `${HOSTNAME}.done`,
} as const;

/** The node id of the state at `path` (what the overview, `getStateNodeById` and the journal's targets use). */
export const nodeId = (path: string) => `${MACHINE}.${path}`;

/** The state value that is exactly the dotted `path`: `a.b.c` is `{ a: { b: 'c' } }`, for `snapshot.matches`. */
export function stateValue(path: string): StateValue {
  const keys = path.split('.');
  return keys.slice(0, -1).reduceRight<StateValue>((inner, key) => ({ [key]: inner }), keys.at(-1)!);
}

/** Whether every state of `paths` is active in `snapshot`. */
export const inState = (snapshot: { matches(value: never): boolean }, ...paths: string[]) =>
  paths.every((path) => snapshot.matches(stateValue(path) as never));

/**
 * Each step a test opens or fails, by what it does, and the id the chart invokes its actor under. A step renamed in
 * the chart is one edit here.
 */
export const STEP = {
  media: 'media',
  imds: 'imds',
  hostKeys: 'host-keys',
  laterHostKeys: 'laterHostKeys',
  missingHostKeys: 'missingHostKeys',
  proxyAgent: 'proxyAgent',
  validate: 'validate',
  hostname: 'hostname',
  hostnamePublish: 'hostnamePublish',
  user: 'user',
  password: 'password',
  sshKeys: 'ssh-keys',
  certificates: 'certificates',
  sshd: 'sshd',
  customData: 'custom-data',
  inProgressReport: 'inProgressReport',
  pendingMarker: 'pendingMarker',
  readyReport: 'readyReport',
  provisionedMarker: 'provisionedMarker',
  failureReport: 'failureReport',
  poolReadyReport: 'poolReadyReport',
  waitingMarker: 'waitingMarker',
  reprovision: 'reprovision',
  shutdownMarker: 'shutdownMarker',
  nicDetach: 'nicDetach',
  nicAttach: 'nicAttach',
  primaryNic: 'primaryNic',
  carrier: 'carrier',
  lease: 'lease',
  nicGone: 'nicGone',
} as const;

export type Step = keyof typeof STEP;
