import { describe, expect, it } from 'vitest';
import { HEALTH_READY } from '../../machines/provisioning.js';
import { BootstateError } from '../../src/core/errors.js';
import { startRun, startup, type Run } from './harness.js';
import { METADATA, TEST_CONFIG } from './support.js';

const PUBLISH_TIMEOUT_MS = TEST_CONFIG.hostname_publishing.timeout_secs * 1000;

async function toValidated(config = TEST_CONFIG): Promise<Run> {
  const run = startRun(startup({ config: config }));
  await run.resolve('media', null);
  await run.resolve('imds', METADATA);
  await run.resolve('validate', { ...run.pending('validate').input.plan, hostname: 'vm-validated' });
  return run;
}

async function finishAccountAndRest(run: Run) {
  for (const id of ['user', 'password', 'sshKeys', 'hostKeys', 'sshd', 'customData']) await run.resolve(id);
}

describe('publishing the hostname to Azure DNS', () => {
  it('starts once the hostname is set, with the validated name, beside the account steps', async () => {
    const run = await toValidated();
    expect(run.gates.some((g) => g.id === 'hostnamePublish')).toBe(false);
    await run.resolve('hostname');
    expect(run.pending('hostnamePublish').input.plan.hostname).toBe('vm-validated');
    expect(run.pending('user').settled).toBe(false);
  });

  it('holds Ready back until it has finished', async () => {
    const run = await toValidated();
    await run.resolve('hostname');
    await finishAccountAndRest(run);
    expect(run.gates.some((g) => g.id === 'pendingMarker')).toBe(false);
    await run.resolve('hostnamePublish');
    await run.resolve('pendingMarker');
    expect(run.pending('readyReport').input.health).toBe(HEALTH_READY);
  });

  it('failing is a warning: provisioning still reports Ready and ends provisioned', async () => {
    const run = await toValidated();
    await run.resolve('hostname');
    await run.reject('hostnamePublish', new BootstateError('SUBPROCESS_FAILED', 'systemctl: exited with 1'));
    await finishAccountAndRest(run);
    await run.resolve('pendingMarker');
    await run.resolve('readyReport');
    await run.resolve('provisionedMarker');
    expect(run.actor.getSnapshot().output).toEqual({ result: 'provisioned', exitCode: 0, reported: true });
    expect(run.actor.getSnapshot().context.warnings).toEqual(['hostname not published: subprocess failed']);
    expect(run.gates.some((g) => g.id === 'failureReport')).toBe(false);
  });

  it('has a deadline of its own: past it the client is abandoned (signal aborted) and the run goes on with a warning', async () => {
    const run = await toValidated();
    await run.resolve('hostname');
    const publish = run.pending('hostnamePublish');
    await finishAccountAndRest(run);
    await run.advance(PUBLISH_TIMEOUT_MS - 1);
    expect(publish.signal.aborted).toBe(false);
    await run.advance(1);
    expect(publish.signal.aborted).toBe(true);
    expect(run.actor.getSnapshot().context.warnings).toEqual([`hostname not published: no answer within ${TEST_CONFIG.hostname_publishing.timeout_secs} s`]);
    await run.resolve('pendingMarker');
    expect(run.pending('readyReport').input.health).toBe(HEALTH_READY);
  });

  it('belongs to the hostname step: --skip hostname starts neither', async () => {
    const run = await toValidated({ ...TEST_CONFIG, steps: { skip: ['hostname'] } });
    await finishAccountAndRest(run);
    expect(run.gates.filter((g) => g.id === 'hostname' || g.id === 'hostnamePublish')).toEqual([]);
    expect(run.pending('pendingMarker')).toBeDefined();
  });

  it('runs under --only hostname, when every other step is left out', async () => {
    const run = await toValidated({ ...TEST_CONFIG, steps: { skip: ['user', 'password', 'ssh-keys', 'sshd', 'host-keys', 'custom-data'] } });
    await run.resolve('hostname');
    await run.resolve('hostnamePublish');
    expect(run.pending('pendingMarker')).toBeDefined();
  });
});
