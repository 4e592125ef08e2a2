import { describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import { inState, STATE } from '../support/chart.js';
import { acceptPlan, answerImds, complete, fail, readMedia, running } from './gates.js';
import { startRun, startup } from './harness.js';

async function toUserCreated() {
  const run = startRun(startup());
  await answerImds(run);
  await readMedia(run);
  await acceptPlan(run);
  await complete(run, 'user');
  return run;
}

describe('the account steps', () => {
  it('start the password and the SSH keys together once the user exists, and go on when both are done', async () => {
    const run = await toUserCreated();
    const password = running(run, 'password');
    const keys = running(run, 'sshKeys');
    expect(password.settled || keys.settled).toBe(false);

    await complete(run, 'sshKeys');
    expect(inState(run.actor.getSnapshot(), STATE.passwordSetting, STATE.sshKeysDone)).toBe(true);
    await complete(run, 'password');
    expect(inState(run.actor.getSnapshot(), STATE.accountDone)).toBe(true);
  });

  it('abort the other one when one fails, and report the failure', async () => {
    const run = await toUserCreated();
    const keys = running(run, 'sshKeys');
    await fail(run, 'password', new BootstateError('PASSWORD_FAILED', 'chpasswd failed'));

    expect(keys.signal.aborted).toBe(true);
    expect(running(run, 'failureReport').input.failure).toMatchObject({ code: 'PASSWORD_FAILED' });
  });
});
