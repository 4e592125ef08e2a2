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
  it('starts once READY=1 is sent (logins do not wait for it), with the validated name, beside the report-pending marker', async () => {
    const run = await toValidated();
    await complete(run, 'hostname');
    expect(hasStarted(run, 'hostnamePublish')).toBe(false);
    await completeEach(run, ['user', 'password', 'sshKeys', 'hostKeys', 'sshd']);
    expect(run.systemd).toEqual([]);
    expect(hasStarted(run, 'hostnamePublish')).toBe(false);
    await complete(run, 'customData');
    expect(run.systemd).toEqual(['READY']);
    expect(running(run, 'hostnamePublish').input.plan.hostname).toBe('vm-validated');
    expect(running(run, 'pendingMarker').settled).toBe(false);
  });

  it('holds the Ready report back until it has finished', async () => {
    const run = await toValidated();
    await complete(run, 'hostname');
    await finishAccountAndRest(run);
    await complete(run, 'pendingMarker');
    expect(hasStarted(run, 'readyReport')).toBe(false);
    await complete(run, 'hostnamePublish');
    expect(running(run, 'readyReport').input.health).toBe(HEALTH_READY);
  });

  it('failing after READY=1 is a warning: provisioning still reports Ready and ends provisioned', async () => {
    const run = await toValidated();
    await complete(run, 'hostname');
    await finishAccountAndRest(run);
    expect(run.systemd).toEqual(['READY']);
    await fail(run, 'hostnamePublish', new BootstateError('SUBPROCESS_FAILED', 'systemctl: exited with 1'));
    await reportReady(run);
    expect(run.actor.getSnapshot().output).toEqual({ result: 'provisioned', exitCode: 0, reported: true });
    expect(run.actor.getSnapshot().context.warnings).toEqual(['hostname not published: subprocess failed']);
    expect(hasStarted(run, 'failureReport')).toBe(false);
    expect(run.systemd).toEqual(['READY']);
  });

  it('has a deadline of its own: past it the client is abandoned (signal aborted) and the run goes on with a warning', async () => {
    const run = await toValidated();
    await complete(run, 'hostname');
    await finishAccountAndRest(run);
    const publish = running(run, 'hostnamePublish');
    await complete(run, 'pendingMarker');
    await run.advance(PUBLISH_TIMEOUT_MS - 1);
    expect(publish.signal.aborted).toBe(false);
    expect(hasStarted(run, 'readyReport')).toBe(false);
    await run.advance(1);
    expect(publish.signal.aborted).toBe(true);
    expect(run.actor.getSnapshot().context.warnings).toEqual([`hostname not published: no answer within ${TEST_CONFIG.hostname_publishing.timeout_secs} s`]);
    expect(running(run, 'readyReport').input.health).toBe(HEALTH_READY);
  });

  it('is abandoned by a stop once the report-pending marker is down: Ready is left for the next boot, as without it', async () => {
    const run = await toValidated();
    await complete(run, 'hostname');
    await finishAccountAndRest(run);
    const publish = running(run, 'hostnamePublish');
    await complete(run, 'pendingMarker');
    await run.send({ type: 'TERMINATE' });
    expect(publish.signal.aborted).toBe(true);
    expect(run.actor.getSnapshot().output).toMatchObject({ result: 'failed', reason: 'terminated', code: 'TERMINATED', exitCode: 1, reported: false });
    expect(hasStarted(run, 'readyReport')).toBe(false);
  });

  it('belongs to the hostname step: --skip hostname starts neither', async () => {
    const run = await toValidated({ ...TEST_CONFIG, steps: { skip: ['hostname'] } });
    await finishAccountAndRest(run);
    expect(startsOf(run, 'hostname', 'hostnamePublish')).toEqual([]);
    await complete(run, 'pendingMarker');
    expect(running(run, 'readyReport')).toBeDefined();
  });

  it('runs under --only hostname, when every other step is left out', async () => {
    const run = await toValidated({ ...TEST_CONFIG, steps: { skip: ['user', 'password', 'ssh-keys', 'sshd', 'host-keys', 'custom-data'] } });
    await complete(run, 'hostname');
    expect(run.systemd).toEqual(['READY']);
    await complete(run, 'hostnamePublish');
    await complete(run, 'pendingMarker');
    expect(running(run, 'readyReport')).toBeDefined();
  });
});
