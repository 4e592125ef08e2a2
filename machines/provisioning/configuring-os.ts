/**
 * The plan is validated, then applied: hostname ‖ user → (password ‖ the goal state's certificates when needed → SSH
 * keys) ‖ sshd (once this VM's host keys are in) ‖ custom data, the whole phase bounded by the OS timeout.
 * `configured` is where systemd hears READY=1 and logins start; the hostname is published to DHCP from there, beside
 * the report-pending marker and the background host keys, and the Ready report waits for all three.
 */
import { assign } from 'xstate';
import type { StepName } from '../../src/config/defaults.js';
import { failure, toFailure } from '../../src/core/errors.js';
import type { PhaseMeta } from '../retry.js';
import { sshKeysRegion } from './certificates.js';
import { FAIL, failRun, READY_LEFT } from './targets.js';
import { chart } from './setup.js';
import type { ProvisioningContext } from './types.js';

type OsActor = 'setHostname' | 'createUser' | 'setPassword' | 'configureSshd' | 'saveCustomData';

/**
 * One OS step: invoke the named actor with the plan; any error fails the run. A step left out by `--only`/`--skip`
 * (config `[steps] skip`) goes on to `skipTo` (default `next`) without starting its actor.
 */
function osStep(src: OsActor, next: string, step: StepName, skipTo = next) {
  return chart.createStateConfig({
    always: { guard: { type: 'stepSkipped', params: { step } }, target: skipTo },
    invoke: {
      // The step's one name: the config's `[steps] skip`, the invoke id, the logs' `step`, KVP and the docs.
      id: step as string,
      src,
      input: ({ context }) => ({ config: context.config, plan: context.plan! }),
      onDone: next,
      onError: failRun,
    },
  });
}

/** A step with one state and `done`, as a region of its own. */
const region = (src: OsActor, step: StepName, doing: string) =>
  chart.createStateConfig({ initial: doing, states: { [doing]: osStep(src, 'done', step), done: { type: 'final' } } });

const osTimeout = (phase: string) =>
  ({ osTimeout: { target: FAIL, actions: { type: 'recordFailure', params: ({ context }: { context: ProvisioningContext }) => ({ error: phaseTimedOut(phase, context.config.os.timeout_secs) }) } } }) as const;

const phaseTimedOut = (phase: string, secs: number) =>
  failure('TIMEOUT', [['error', `${phase} did not finish within ${secs} s`], ['phase', phase]]);

export const validating = chart.createStateConfig({
  meta: { budget: 'osTimeout' } satisfies PhaseMeta,
  after: osTimeout('validation'),
  invoke: {
    id: 'validate',
    src: 'validatePlan',
    input: ({ context }) => ({ config: context.config, plan: context.plan!, mediaFailure: context.mediaFailure }),
    onDone: { target: 'configuringOs', actions: assign({ plan: ({ event }) => event.output }) },
    onError: failRun,
  },
});

export const configuringOs = chart.createStateConfig({
  type: 'parallel',
  meta: { budget: 'osTimeout' } satisfies PhaseMeta,
  onDone: 'configured',
  after: osTimeout('OS configuration'),
  states: {
    hostname: region('setHostname', 'hostname', 'setting'),
    account: {
      initial: 'creatingUser',
      states: {
        creatingUser: osStep('createUser', 'credentials', 'user'),
        // The password lives in /etc/shadow, the keys in the home: once the user exists, neither waits.
        credentials: {
          type: 'parallel',
          onDone: 'done',
          states: { password: region('setPassword', 'password', 'setting'), sshKeys: sshKeysRegion },
        },
        done: { type: 'final' },
      },
    },
    // The drop-in's `sshd -T` proof must not run while the image's host keys are gone and this VM's not yet in.
    sshd: {
      initial: 'awaitingHostKeys',
      states: {
        awaitingHostKeys: { always: { guard: 'hostKeysReplaced', target: 'configuring' } },
        configuring: osStep('configureSshd', 'done', 'sshd'),
        done: { type: 'final' },
      },
    },
    customData: region('saveCustomData', 'custom-data', 'saving'),
  },
});

// Azure DNS learns the name from the next DHCP request: make the client send one. Best effort, and nothing a login
// needs: it runs once READY=1 is sent, and the Ready report waits for it, so Ready still follows the publication (or
// its warning) as it did when it came before READY=1. A skipped hostname step is not published either.
const publishingHostname = chart.createStateConfig({
  initial: 'publishing',
  states: {
    publishing: {
      always: { guard: { type: 'stepSkipped', params: { step: 'hostname' } }, target: 'done' },
      after: {
        hostnamePublishTimeout: {
          target: 'done',
          actions: {
            type: 'warn',
            params: ({ context }) => ({ text: `hostname not published: no answer within ${context.config.hostname_publishing.timeout_secs} s` }),
          },
        },
      },
      invoke: {
        id: 'hostnamePublish',
        src: 'publishHostname',
        input: ({ context }) => ({ config: context.config, plan: context.plan! }),
        onDone: 'done',
        onError: { target: 'done', actions: { type: 'warn', params: ({ event }) => ({ text: `hostname not published: ${toFailure(event.error).reason}` }) } },
      },
    },
    done: { type: 'final' },
  },
});

// Everything a login needs is in place: systemd hears READY=1 and starts sshd. The report-pending marker goes down
// at once, beside the host keys left for the background (sshd reads them per connection) and the hostname's
// publication: from the moment the marker is durable a stop leaves Ready for the next boot, which makes whatever host
// key is still missing (and publishes nothing: the name is set, and the DHCP client sends it at its next request).
// The Ready report waits for the marker, the keys and the publication; logins wait for none of them.
export const configured = chart.createStateConfig({
  // What is left is the last host keys, bounded by the OS timeout (hostKeys.adding), and the publication's own.
  meta: { budget: 'osTimeout' } satisfies PhaseMeta,
  entry: 'tellSystemdReady',
  type: 'parallel',
  onDone: '#provisioning.reportingReady',
  states: {
    reportPending: {
      initial: 'markingReportPending',
      states: {
        markingReportPending: {
          invoke: {
            id: 'pendingMarker',
            src: 'markReportPending',
            input: ({ context }) => ({ config: context.config, vmId: context.vmId }),
            // A stop while it was written waited for it: Ready is left for the next boot.
            onDone: [{ guard: 'terminating', target: READY_LEFT }, { target: 'awaitingHostKeys' }],
            // Ready promises a VM that stays provisioned after a reboot: without the marker that promise cannot be kept.
            onError: failRun,
          },
        },
        awaitingHostKeys: { always: { guard: 'hostKeysComplete', target: 'done' } },
        done: { type: 'final' },
      },
    },
    hostname: publishingHostname,
  },
});
