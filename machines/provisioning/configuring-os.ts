/**
 * The plan is validated, then applied: hostname (then published to DHCP) ‖ user → (password ‖ the goal state's
 * certificates when needed → SSH keys) ‖ sshd (once
 * this VM's host keys are in) ‖ custom data, the whole phase bounded by the OS timeout. `configured` is where
 * systemd hears READY=1 and logins start.
 */
import { assign } from 'xstate';
import type { StepName } from '../../src/config/defaults.js';
import { failure, toFailure } from '../../src/core/errors.js';
import { sshKeysRegion } from './certificates.js';
import { failRun } from './retry.js';
import { chart } from './setup.js';
import type { ProvisioningContext } from './types.js';

const FAIL = '#provisioning.reportingFailure';
type OsActor = 'setHostname' | 'createUser' | 'setPassword' | 'configureSshd' | 'saveCustomData';

/**
 * One OS step: invoke the named actor with the plan; any error fails the run. A step left out by `--only`/`--skip`
 * (config `[steps] skip`) goes on to `skipTo` (default `next`) without starting its actor.
 */
function osStep(id: string, src: OsActor, next: string, step: StepName, skipTo = next) {
  return chart.createStateConfig({
    always: { guard: { type: 'stepSkipped', params: { step } }, target: skipTo },
    invoke: {
      id,
      src,
      input: ({ context }) => ({ config: context.config, plan: context.plan! }),
      onDone: next,
      onError: failRun,
    },
  });
}

/** A step with one state and `done`, as a region of its own. */
const region = (id: string, src: OsActor, step: StepName, doing: string) =>
  chart.createStateConfig({ initial: doing, states: { [doing]: osStep(id, src, 'done', step), done: { type: 'final' } } });

const osTimeout = (phase: string) =>
  ({ osTimeout: { target: FAIL, actions: { type: 'recordFailure', params: ({ context }: { context: ProvisioningContext }) => ({ error: phaseTimedOut(phase, context.config.os.timeout_secs) }) } } }) as const;

const phaseTimedOut = (phase: string, secs: number) =>
  failure('TIMEOUT', [['error', `${phase} did not finish within ${secs} s`], ['phase', phase]]);

export const validating = chart.createStateConfig({
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
  onDone: 'configured',
  after: osTimeout('OS configuration'),
  states: {
    hostname: {
      initial: 'setting',
      states: {
        // A skipped hostname step is not published either.
        setting: osStep('hostname', 'setHostname', 'publishing', 'hostname', 'done'),
        // Azure DNS learns the name from the next DHCP request: make the client send one now. Best effort.
        publishing: {
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
    },
    account: {
      initial: 'creatingUser',
      states: {
        creatingUser: osStep('user', 'createUser', 'credentials', 'user'),
        // The password lives in /etc/shadow, the keys in the home: once the user exists, neither waits.
        credentials: {
          type: 'parallel',
          onDone: 'done',
          states: { password: region('password', 'setPassword', 'password', 'setting'), sshKeys: sshKeysRegion },
        },
        done: { type: 'final' },
      },
    },
    // The drop-in's `sshd -T` proof must not run while the image's host keys are gone and this VM's not yet in.
    sshd: {
      initial: 'awaitingHostKeys',
      states: {
        awaitingHostKeys: { always: { guard: 'hostKeysReplaced', target: 'configuring' } },
        configuring: osStep('sshd', 'configureSshd', 'done', 'sshd'),
        done: { type: 'final' },
      },
    },
    customData: region('customData', 'saveCustomData', 'custom-data', 'saving'),
  },
});

// Everything a login needs is in place: systemd hears READY=1 and starts sshd. Host keys left for the background
// (sshd reads them per connection) are made now; the reports wait for them, logins do not.
export const configured = chart.createStateConfig({
  entry: 'tellSystemdReady',
  always: { guard: 'hostKeysComplete', target: '#provisioning.markingReportPending' },
  after: {
    osTimeout: {
      target: '#provisioning.markingReportPending',
      actions: {
        type: 'warn',
        params: ({ context }) => ({
          text: `ssh host keys ${context.hostKeysLater.join(', ')} not made within ${context.config.os.timeout_secs} s; sshd offers the others`,
        }),
      },
    },
  },
});
