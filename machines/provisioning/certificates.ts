/**
 * The goal state's certificates, fetched before the SSH keys are written when something needs them: keys the media
 * names by fingerprint, key pairs, or certificates the configuration places. A retry loop with its own deadline
 * (`[certificates] total_retry_timeout_secs`), inside the OS phase's. Whatever goes wrong is a warning, unless the
 * keys named by fingerprint were the only way in (no other key, password logins off): then the run fails, saying why.
 */
import { toFailure, describeFailure } from '../../src/core/errors.js';
import { timedOut } from '../retry.js';
import { FAIL, failRun, retried, withError } from './targets.js';
import { chart } from './setup.js';
import type { ProvisioningContext } from './types.js';

const SSH_KEYS = '#provisioning.provisioning.work.configuringOs.account.credentials.sshKeys';
const WRITING = `${SSH_KEYS}.writing`;

/** The keys that will be missing, for a warning. */
const named = (context: ProvisioningContext) => {
  const fingerprints = context.plan?.keyFingerprints ?? [];
  const pairs = (context.plan?.keyPairs ?? []).map((p) => p.fingerprint);
  const parts = [
    ...(fingerprints.length > 0 ? [`ssh keys ${fingerprints.join(', ')}`] : []),
    ...(pairs.length > 0 ? [`key pairs ${pairs.join(', ')}`] : []),
  ];
  return parts.length > 0 ? `${parts.join(' and ')} not installed` : 'no certificates placed';
};

const certificatesTimedOut = (context: ProvisioningContext) =>
  timedOut(`the wireserver did not give the goal state's certificates within ${context.config.certificates.total_retry_timeout_secs} s`, context.certificatesFailure);

// Entered when the user exists; `deciding` starts no request when nothing needs one.
export const sshKeysRegion = chart.createStateConfig({
  initial: 'deciding',
  states: {
    deciding: { always: [{ guard: 'certificatesWanted', target: 'fetchingCertificates' }, { target: 'writing' }] },
    fetchingCertificates: retried({
      invoke: {
        id: 'certificates',
        src: 'fetchCertificates',
        input: ({ context }) => ({ config: context.config, plan: context.plan! }),
        onDone: { target: WRITING, actions: { type: 'recordCertificateKeys', params: ({ event }) => ({ keys: event.output }) } },
      },
      every: 'wireserverRetryInterval',
      deadline: {
        after: 'certificatesTotalTimeout',
        then: [
          { guard: 'certificatesEssential', target: FAIL, actions: { type: 'recordFailure', params: ({ context }) => ({ error: certificatesTimedOut(context) }) } },
          { target: WRITING, actions: { type: 'warn', params: ({ context }) => ({ text: `certificates: ${describeFailure(certificatesTimedOut(context))}; ${named(context)}` }) } },
        ],
      },
      onRetry: { type: 'recordCertificatesRetry', params: withError },
      onFatal: [
        { guard: 'certificatesEssential', ...failRun },
        { target: WRITING, actions: { type: 'warn', params: ({ context, event }) => ({ text: `certificates: ${describeFailure(toFailure(event.error))}; ${named(context)}` }) } },
      ],
    }),
    writing: {
      always: { guard: { type: 'stepSkipped', params: { step: 'ssh-keys' } }, target: 'done' },
      invoke: {
        id: 'ssh-keys',
        src: 'writeSshKeys',
        input: ({ context }) => ({ config: context.config, plan: context.plan! }),
        onDone: 'done',
        onError: failRun,
      },
    },
    done: { type: 'final' },
  },
});
