import { describe, expect, it } from 'vitest';
import { HEALTH_READY } from '../../machines/provisioning.js';
import { BootstateError } from '../../src/core/errors.js';
import { complete, completeEach, fail, gather, hasStarted, reportReady, running, startsOf } from './gates.js';
import { startRun, startup, type Run } from './harness.js';
import { TEST_CONFIG } from './support.js';

const PUBLISH_TIMEOUT_MS = TEST_CONFIG.hostname_publishing.timeout_secs * 1000;

async function toValidated(config = TEST_CONFIG): Promise<Run> {
  const run = startRun(startup({ config: config }));
  await gather(run);
  await complete(run, 'validate', { ...running(run, 'validate').input.plan, hostname: 'vm-validated' });
  return run;
}

async function finishAccountAndRest(run: Run) {
  await completeEach(run, ['user', 'password', 'sshKeys', 'hostKeys', 'sshd', 'customData']);
}

describe('publishing the hostname to Azure DNS', () => {
  it('starts once the hostname is set, with the validated name, beside the account steps', async () => {
    const run = await toValidated();
    expect(hasStarted(run, 'hostnamePublish')).toBe(false);
    await complete(run, 'hostname');
    expect(running(run, 'hostnamePublish').input.plan.hostname).toBe('vm-validated');
    expect(running(run, 'user').settled).toBe(false);
  });

  it('holds Ready back until it has finished', async () => {
    const run = await toValidated();
    await complete(run, 'hostname');
    await finishAccountAndRest(run);
    expect(hasStarted(run, 'pendingMarker')).toBe(false);
    await complete(run, 'hostnamePublish');
    await complete(run, 'pendingMarker');
    expect(running(run, 'readyReport').input.health).toBe(HEALTH_READY);
  });

  it('failing is a warning: provisioning still reports Ready and ends provisioned', async () => {
    const run = await toValidated();
    await complete(run, 'hostname');
    await fail(run, 'hostnamePublish', new BootstateError('SUBPROCESS_FAILED', 'systemctl: exited with 1'));
    await finishAccountAndRest(run);
    await reportReady(run);
    expect(run.actor.getSnapshot().output).toEqual({ result: 'provisioned', exitCode: 0, reported: true });
    expect(run.actor.getSnapshot().context.warnings).toEqual(['hostname not published: subprocess failed']);
    expect(hasStarted(run, 'failureReport')).toBe(false);
  });

  it('has a deadline of its own: past it the client is abandoned (signal aborted) and the run goes on with a warning', async () => {
    const run = await toValidated();
    await complete(run, 'hostname');
    const publish = running(run, 'hostnamePublish');
    await finishAccountAndRest(run);
    await run.advance(PUBLISH_TIMEOUT_MS - 1);
    expect(publish.signal.aborted).toBe(false);
    await run.advance(1);
    expect(publish.signal.aborted).toBe(true);
    expect(run.actor.getSnapshot().context.warnings).toEqual([`hostname not published: no answer within ${TEST_CONFIG.hostname_publishing.timeout_secs} s`]);
    await complete(run, 'pendingMarker');
    expect(running(run, 'readyReport').input.health).toBe(HEALTH_READY);
  });

  it('belongs to the hostname step: --skip hostname starts neither', async () => {
    const run = await toValidated({ ...TEST_CONFIG, steps: { skip: ['hostname'] } });
    await finishAccountAndRest(run);
    expect(startsOf(run, 'hostname', 'hostnamePublish')).toEqual([]);
    expect(running(run, 'pendingMarker')).toBeDefined();
  });

  it('runs under --only hostname, when every other step is left out', async () => {
    const run = await toValidated({ ...TEST_CONFIG, steps: { skip: ['user', 'password', 'ssh-keys', 'sshd', 'host-keys', 'custom-data'] } });
    await complete(run, 'hostname');
    await complete(run, 'hostnamePublish');
    expect(running(run, 'pendingMarker')).toBeDefined();
  });
});
