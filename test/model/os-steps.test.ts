import { describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import { startRun, startup } from './harness.js';
import { METADATA } from './support.js';

async function toUserCreated() {
  const run = startRun(startup());
  await run.resolve('imds', METADATA);
  await run.resolve('media', null);
  await run.resolve('validate', run.pending('validate').input.plan);
  await run.resolve('user');
  return run;
}

describe('the account steps', () => {
  it('start the password and the SSH keys together once the user exists, and go on when both are done', async () => {
    const run = await toUserCreated();
    const password = run.pending('password');
    const keys = run.pending('sshKeys');
    expect(password.settled || keys.settled).toBe(false);

    await run.resolve('sshKeys');
    expect(run.actor.getSnapshot().matches({ provisioning: { work: { configuringOs: { account: { credentials: { password: 'setting', sshKeys: 'done' } } } } } })).toBe(true);
    await run.resolve('password');
    expect(run.actor.getSnapshot().matches({ provisioning: { work: { configuringOs: { account: 'done' } } } })).toBe(true);
  });

  it('abort the other one when one fails, and report the failure', async () => {
    const run = await toUserCreated();
    const keys = run.pending('sshKeys');
    await run.reject('password', new BootstateError('PASSWORD_FAILED', 'chpasswd failed'));

    expect(keys.signal.aborted).toBe(true);
    expect(run.pending('failureReport').input.failure).toMatchObject({ code: 'PASSWORD_FAILED' });
  });
});
