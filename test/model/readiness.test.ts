/**
 * When systemd hears READY=1, path by path, written from the readiness rule
 * (docs/cli.md#readiness-logins-never-wait-for-a-report) rather than from the chart: logins wait for everything they
 * need (user, keys, password, sshd drop-in, host keys, hostname) and for nothing else — not for a report, however long
 * the wireserver refuses it. The host keys are made beside IMDS, and sshd's drop-in waits for them.
 */
import { describe, expect, it } from 'vitest';
import { HEALTH_FAILED, HEALTH_READY } from '../../machines/provisioning.js';
import { BootstateError } from '../../src/core/errors.js';
import { inState, STATE } from '../support/chart.js';
import { acceptPlan, complete, completeEach, fail, failImds, gather, hasStarted, lastStart, readMedia, reportReady, running, startsOf } from './gates.js';
import { startRun, startup } from './harness.js';
import { METADATA, METADATA_POOL_RUNNING, NOT_ON_AZURE, TEST_CONFIG } from './support.js';

const RETRY_MS = TEST_CONFIG.wireserver.retry_interval_secs * 1000;
const unavailable = () => new BootstateError('HTTP_STATUS', 'wireserver answered 503', { data: [['status', '503']], retryable: true });
const imdsDown = () => new BootstateError('HTTP_STATUS', 'IMDS answered 503', { data: [['status', '503']], retryable: true });

describe('READY=1', () => {
  it('comes once the OS is configured, as the report-pending marker is written, and stays while Ready is refused', async () => {
    const run = startRun(startup());
    await gather(run);
    await acceptPlan(run);
    await completeEach(run, ['hostname', 'user', 'password', 'sshKeys', 'hostKeys']);
    // Everything but the drop-in is in place: not yet.
    expect(run.systemd).toEqual([]);
    await complete(run, 'sshd');
    expect(run.systemd).toEqual([]);
    await complete(run, 'customData');
    expect(run.systemd).toEqual(['READY']);
    expect(inState(run.actor.getSnapshot(), STATE.configured)).toBe(true);
    expect(hasStarted(run, 'readyReport')).toBe(false);
    await complete(run, 'pendingMarker');
    await complete(run, 'hostnamePublish');
    expect(running(run, 'readyReport').input.health).toBe(HEALTH_READY);
    // The wireserver refuses for a while: still one READY, and the report goes on being retried.
    for (let attempt = 1; attempt <= 3; attempt++) {
      await fail(run, 'readyReport', unavailable());
      await run.advance(RETRY_MS);
    }
    expect(startsOf(run, 'readyReport')).toHaveLength(4);
    await complete(run, 'readyReport');
    await complete(run, 'provisionedMarker');
    expect(run.systemd).toEqual(['READY']);
    expect(run.actor.getSnapshot().output).toMatchObject({ result: 'provisioned' });
  });

  it('does not wait for host keys made in the background, nor does the report-pending marker; Ready does', async () => {
    const run = startRun(startup());
    await gather(run);
    // The fast keys are in; rsa is left for the background, made only once READY=1 was sent.
    await complete(run, 'hostKeys', ['rsa']);
    await acceptPlan(run);
    await completeEach(run, ['hostname', 'user', 'password', 'sshKeys', 'sshd']);
    expect(lastStart(run, 'laterHostKeys')).toBeUndefined();
    await complete(run, 'customData');
    expect(run.systemd).toEqual(['READY']);
    expect(running(run, 'laterHostKeys').input.types).toEqual(['rsa']);
    expect(inState(run.actor.getSnapshot(), STATE.configured)).toBe(true);
    expect(running(run, 'pendingMarker')).toBeDefined();
    await completeEach(run, ['pendingMarker', 'hostnamePublish']);
    expect(hasStarted(run, 'readyReport')).toBe(false);
    await complete(run, 'laterHostKeys');
    await completeEach(run, ['readyReport', 'provisionedMarker']);
    expect(run.actor.getSnapshot().output).toMatchObject({ result: 'provisioned' });
  });

  it('goes on to Ready with a warning when the background host keys fail or outlast the OS timeout', async () => {
    for (const end of ['fail', 'timeout'] as const) {
      const run = startRun(startup());
      await gather(run);
      await complete(run, 'hostKeys', ['rsa']);
      await acceptPlan(run);
      await completeEach(run, ['hostname', 'user', 'password', 'sshKeys', 'sshd', 'customData', 'hostnamePublish']);
      if (end === 'fail') await fail(run, 'laterHostKeys', new BootstateError('SUBPROCESS_FAILED', 'ssh-keygen was killed'));
      else await run.advance(TEST_CONFIG.os.timeout_secs * 1000);
      expect(lastStart(run, 'laterHostKeys')!.signal.aborted).toBe(end === 'timeout');
      await reportReady(run);
      const snapshot = run.actor.getSnapshot();
      expect(snapshot.output).toMatchObject({ result: 'provisioned' });
      expect(snapshot.context.warnings.at(-1)).toMatch(end === 'fail' ? /^ssh host keys rsa not made: / : /^ssh host keys rsa not made within \d+ s; sshd offers the others$/);
    }
  });

  it('comes when provisioning is given up (the IMDS budget), before the failure report is accepted', async () => {
    const run = startRun(startup());
    await readMedia(run);
    await complete(run, 'hostKeys');
    const budget = TEST_CONFIG.imds.total_retry_timeout_secs * 1000;
    const interval = TEST_CONFIG.imds.retry_interval_secs * 1000;
    while (run.clock.now() + interval < budget) {
      await failImds(run, imdsDown());
      expect(run.systemd).toEqual([]);
      await run.advance(interval);
    }
    await run.advance(budget - run.clock.now());
    expect(run.systemd).toEqual(['READY']);
    expect(running(run, 'failureReport').input).toMatchObject({ health: HEALTH_FAILED, failure: { code: 'TIMEOUT' } });
    await fail(run, 'failureReport', unavailable());
    expect(run.systemd).toEqual(['READY']);
  });

  it('comes at once when the VM was provisioned in an earlier boot, or is not an Azure VM', async () => {
    const provisioned = startRun(startup({ marker: 'provisioned' }));
    expect(provisioned.systemd).toEqual(['READY']);

    const elsewhere = startRun(startup({ platform: NOT_ON_AZURE }));
    expect(elsewhere.systemd).toEqual(['READY']);
    expect(elsewhere.actor.getSnapshot().value).toBe('notOnAzure');
  });

  it('comes for a report-pending VM with its Ready report, once the host keys an earlier stop left missing are made', async () => {
    const run = startRun(startup({ marker: 'report-pending' }));
    // sshd starts after READY=1 (and from OpenSSH 9.8 reads its keys only then).
    expect(run.systemd).toEqual([]);
    await complete(run, 'missingHostKeys');
    expect(run.systemd).toEqual(['READY']);
    expect(running(run, 'readyReport').input.health).toBe(HEALTH_READY);
  });

  it('does not come while a pool VM waits to be claimed, nor when it is stopped while waiting', async () => {
    const run = startRun(startup());
    await gather(run, { imds: METADATA_POOL_RUNNING });
    await complete(run, 'poolReadyReport');
    await complete(run, 'waitingMarker');
    expect(running(run, 'reprovision')).toBeDefined();
    expect(run.systemd).toEqual([]);
    await run.send({ type: 'TERMINATE' });
    expect(run.actor.getSnapshot().output).toMatchObject({ result: 'waiting-for-reuse' });
    expect(run.systemd).toEqual([]);
  });

  it('comes with the failure report when a step fails, and SIGTERM does not send it twice', async () => {
    const run = startRun(startup());
    await gather(run);
    await fail(run, 'validate', new BootstateError('INVALID_USERNAME', 'username is not valid'));
    expect(run.systemd).toEqual(['READY']);
    await run.send({ type: 'TERMINATE' });
    expect(run.systemd).toEqual(['READY']);
  });
});

describe('the host keys', () => {
  it('are made from the start of the work, beside IMDS and the media, and sshd waits for them', async () => {
    const run = startRun(startup());
    expect(running(run, 'hostKeys').input).toEqual({ config: TEST_CONFIG });
    expect(running(run, 'imds')).toBeDefined();
    await gather(run);
    await acceptPlan(run);
    await completeEach(run, ['hostname', 'user', 'password', 'sshKeys']);
    expect(hasStarted(run, 'sshd')).toBe(false);
    await complete(run, 'hostKeys');
    expect(running(run, 'sshd').input.plan.username).toBe(METADATA.adminUsername);
  });

  it('made before the plan is ready let sshd start with the other OS steps', async () => {
    const run = startRun(startup());
    await complete(run, 'hostKeys');
    await gather(run);
    await acceptPlan(run);
    expect(running(run, 'sshd')).toBeDefined();
    await completeEach(run, ['hostname', 'user', 'password', 'sshKeys', 'sshd', 'customData']);
    await complete(run, 'pendingMarker');
    expect(run.systemd).toEqual(['READY']);
  });

  it('that cannot be made fail the run at once, naming the step, with IMDS abandoned', async () => {
    const run = startRun(startup());
    const imds = running(run, 'imds');
    await fail(run, 'hostKeys', new BootstateError('HOST_KEYS_FAILED', 'no host key could be made'));
    expect(imds.signal.aborted).toBe(true);
    expect(running(run, 'failureReport').input.failure).toMatchObject({ code: 'HOST_KEYS_FAILED' });
    expect(run.systemd).toEqual(['READY']);
  });
});
