/**
 * When systemd hears READY=1, path by path, written from the readiness rule
 * (docs/cli.md#readiness-logins-never-wait-for-a-report) rather than from the chart: logins wait for everything they
 * need (user, keys, password, sshd drop-in, host keys, hostname) and for nothing else — not for a report, however long
 * the wireserver refuses it. The host keys are made beside IMDS, and sshd's drop-in waits for them.
 */
import { describe, expect, it } from 'vitest';
import { HEALTH_FAILED, HEALTH_READY } from '../../machines/provisioning.js';
import { BootstateError } from '../../src/core/errors.js';
import { startRun, startup, type Run } from './harness.js';
import { METADATA, METADATA_POOL_RUNNING, NOT_ON_AZURE, TEST_CONFIG } from './support.js';

const RETRY_MS = TEST_CONFIG.wireserver.retry_interval_secs * 1000;
const unavailable = () => new BootstateError('HTTP_STATUS', 'wireserver answered 503', { data: [['status', '503']], retryable: true });
const imdsDown = () => new BootstateError('HTTP_STATUS', 'IMDS answered 503', { data: [['status', '503']], retryable: true });

async function throughGathering(run: Run) {
  await run.resolve('media', null);
  await run.resolve('imds', METADATA);
}

describe('READY=1', () => {
  it('comes once the OS is configured, before the report-pending marker, and stays while Ready is refused', async () => {
    const run = startRun(startup());
    await throughGathering(run);
    await run.resolve('validate', run.pending('validate').input.plan);
    for (const id of ['hostname', 'hostnamePublish', 'user', 'password', 'sshKeys', 'hostKeys']) await run.resolve(id);
    // Everything but the drop-in is in place: not yet.
    expect(run.systemd).toEqual([]);
    await run.resolve('sshd');
    expect(run.systemd).toEqual([]);
    await run.resolve('customData');
    expect(run.systemd).toEqual(['READY']);
    expect(run.actor.getSnapshot().matches({ provisioning: { work: 'configured' } })).toBe(false);
    await run.resolve('pendingMarker');
    expect(run.pending('readyReport').input.health).toBe(HEALTH_READY);
    // The wireserver refuses for a while: still one READY, and the report goes on being retried.
    for (let attempt = 1; attempt <= 3; attempt++) {
      await run.reject('readyReport', unavailable());
      await run.advance(RETRY_MS);
    }
    expect(run.gates.filter((g) => g.id === 'readyReport')).toHaveLength(4);
    await run.resolve('readyReport');
    await run.resolve('provisionedMarker');
    expect(run.systemd).toEqual(['READY']);
    expect(run.actor.getSnapshot().output).toMatchObject({ result: 'provisioned' });
  });

  it('does not wait for host keys made in the background; the report-pending marker and Ready do', async () => {
    const run = startRun(startup());
    await throughGathering(run);
    // The fast keys are in; rsa is left for the background, made only once READY=1 was sent.
    await run.resolve('hostKeys', ['rsa']);
    await run.resolve('validate', run.pending('validate').input.plan);
    for (const id of ['hostname', 'hostnamePublish', 'user', 'password', 'sshKeys', 'sshd']) await run.resolve(id);
    expect(run.latest('laterHostKeys')).toBeUndefined();
    await run.resolve('customData');
    expect(run.systemd).toEqual(['READY']);
    expect(run.pending('laterHostKeys').input.types).toEqual(['rsa']);
    expect(run.actor.getSnapshot().matches({ provisioning: { work: 'configured' } })).toBe(true);
    expect(run.gates.some((g) => g.id === 'pendingMarker')).toBe(false);
    await run.resolve('laterHostKeys');
    await run.resolve('pendingMarker');
    await run.resolve('readyReport');
    await run.resolve('provisionedMarker');
    expect(run.actor.getSnapshot().output).toMatchObject({ result: 'provisioned' });
  });

  it('goes on to Ready with a warning when the background host keys fail or outlast the OS timeout', async () => {
    for (const end of ['fail', 'timeout'] as const) {
      const run = startRun(startup());
      await throughGathering(run);
      await run.resolve('hostKeys', ['rsa']);
      await run.resolve('validate', run.pending('validate').input.plan);
      for (const id of ['hostname', 'hostnamePublish', 'user', 'password', 'sshKeys', 'sshd', 'customData']) await run.resolve(id);
      if (end === 'fail') await run.reject('laterHostKeys', new BootstateError('SUBPROCESS_FAILED', 'ssh-keygen was killed'));
      else await run.advance(TEST_CONFIG.os.timeout_secs * 1000);
      expect(run.latest('laterHostKeys')!.signal.aborted).toBe(end === 'timeout');
      await run.resolve('pendingMarker');
      await run.resolve('readyReport');
      await run.resolve('provisionedMarker');
      const snapshot = run.actor.getSnapshot();
      expect(snapshot.output).toMatchObject({ result: 'provisioned' });
      expect(snapshot.context.warnings.at(-1)).toMatch(end === 'fail' ? /^ssh host keys rsa not made: / : /^ssh host keys rsa not made within \d+ s; sshd offers the others$/);
    }
  });

  it('comes when provisioning is given up (the IMDS budget), before the failure report is accepted', async () => {
    const run = startRun(startup());
    await run.resolve('media', null);
    await run.resolve('hostKeys');
    const budget = TEST_CONFIG.imds.total_retry_timeout_secs * 1000;
    const interval = TEST_CONFIG.imds.retry_interval_secs * 1000;
    while (run.clock.now() + interval < budget) {
      await run.reject('imds', imdsDown());
      expect(run.systemd).toEqual([]);
      await run.advance(interval);
    }
    await run.advance(budget - run.clock.now());
    expect(run.systemd).toEqual(['READY']);
    expect(run.pending('failureReport').input).toMatchObject({ health: HEALTH_FAILED, failure: { code: 'TIMEOUT' } });
    await run.reject('failureReport', unavailable());
    expect(run.systemd).toEqual(['READY']);
  });

  it('comes at once when the VM was provisioned in an earlier boot, or is not an Azure VM', async () => {
    const provisioned = startRun(startup({ marker: 'provisioned' }));
    expect(provisioned.systemd).toEqual(['READY']);

    const elsewhere = startRun(startup({ platform: NOT_ON_AZURE }));
    expect(elsewhere.systemd).toEqual(['READY']);
    expect(elsewhere.actor.getSnapshot().value).toBe('notOnAzure');
  });

  it('comes for a report-pending VM with its Ready report: the OS was configured in the earlier boot', async () => {
    const run = startRun(startup({ marker: 'report-pending' }));
    expect(run.systemd).toEqual(['READY']);
    expect(run.pending('readyReport').input.health).toBe(HEALTH_READY);
  });

  it('does not come while a pool VM waits to be claimed, nor when it is stopped while waiting', async () => {
    const run = startRun(startup());
    await run.resolve('media', null);
    await run.resolve('imds', METADATA_POOL_RUNNING);
    await run.resolve('poolReadyReport');
    await run.resolve('waitingMarker');
    expect(run.pending('reprovision')).toBeDefined();
    expect(run.systemd).toEqual([]);
    await run.send({ type: 'TERMINATE' });
    expect(run.actor.getSnapshot().output).toMatchObject({ result: 'waiting-for-reuse' });
    expect(run.systemd).toEqual([]);
  });

  it('comes with the failure report when a step fails, and SIGTERM does not send it twice', async () => {
    const run = startRun(startup());
    await throughGathering(run);
    await run.reject('validate', new BootstateError('INVALID_USERNAME', 'username is not valid'));
    expect(run.systemd).toEqual(['READY']);
    await run.send({ type: 'TERMINATE' });
    expect(run.systemd).toEqual(['READY']);
  });
});

describe('the host keys', () => {
  it('are made from the start of the work, beside IMDS and the media, and sshd waits for them', async () => {
    const run = startRun(startup());
    expect(run.pending('hostKeys').input).toEqual({ config: TEST_CONFIG });
    expect(run.pending('imds')).toBeDefined();
    await run.resolve('media', null);
    await run.resolve('imds', METADATA);
    await run.resolve('validate', run.pending('validate').input.plan);
    for (const id of ['hostname', 'hostnamePublish', 'user', 'password', 'sshKeys']) await run.resolve(id);
    expect(run.gates.some((g) => g.id === 'sshd')).toBe(false);
    await run.resolve('hostKeys');
    expect(run.pending('sshd').input.plan.username).toBe(METADATA.adminUsername);
  });

  it('made before the plan is ready let sshd start with the other OS steps', async () => {
    const run = startRun(startup());
    await run.resolve('hostKeys');
    await run.resolve('media', null);
    await run.resolve('imds', METADATA);
    await run.resolve('validate', run.pending('validate').input.plan);
    expect(run.pending('sshd')).toBeDefined();
    for (const id of ['hostname', 'hostnamePublish', 'user', 'password', 'sshKeys', 'sshd', 'customData']) await run.resolve(id);
    await run.resolve('pendingMarker');
    expect(run.systemd).toEqual(['READY']);
  });

  it('that cannot be made fail the run at once, naming the step, with IMDS abandoned', async () => {
    const run = startRun(startup());
    const imds = run.pending('imds');
    await run.reject('hostKeys', new BootstateError('HOST_KEYS_FAILED', 'no host key could be made'));
    expect(imds.signal.aborted).toBe(true);
    expect(run.pending('failureReport').input.failure).toMatchObject({ code: 'HOST_KEYS_FAILED' });
    expect(run.systemd).toEqual(['READY']);
  });
});
