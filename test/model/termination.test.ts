import { describe, expect, it } from 'vitest';
import { HEALTH_FAILED } from '../../machines/provisioning.js';
import { BootstateError } from '../../src/core/errors.js';
import { acceptPlan, complete, completeEach, fail, gather, hasStarted, lastStart, running } from './gates.js';
import { startRun, startup, type Run } from './harness.js';

/** What a stop once the OS is configured leaves: no failure report, Ready for the next boot, exit 1 `terminated`. */
const READY_LEFT = { result: 'failed', reason: 'terminated', code: 'TERMINATED', exitCode: 1, reported: false };

/** A first boot whose OS is configured, with rsa left for the background and still being made. */
async function configuredWithRsaOnItsWay(): Promise<Run> {
  const run = startRun(startup());
  await gather(run);
  await complete(run, 'hostKeys', ['rsa']);
  await acceptPlan(run);
  await completeEach(run, ['hostname', 'user', 'password', 'sshKeys', 'sshd', 'customData']);
  expect(run.systemd).toEqual(['READY']);
  return run;
}

const failureReported = (run: Run) => hasStarted(run, 'failureReport') || run.kvp.some((r) => r.event.health === HEALTH_FAILED);

describe('TERMINATE', () => {
  it('during the OS steps reports "terminated" and gives the failure report 1.5 s', async () => {
    const run = startRun(startup());
    await gather(run);
    await acceptPlan(run);
    await complete(run, 'hostname');
    const user = running(run, 'user');

    await run.send({ type: 'TERMINATE' });
    expect(user.signal.aborted).toBe(true);
    expect(run.actor.getSnapshot().value).toEqual({ reportingFailure: 'requesting' });
    expect(running(run, 'failureReport').input).toMatchObject({ health: HEALTH_FAILED, failure: { code: 'TERMINATED', reason: 'terminated' } });

    await run.advance(1499);
    expect(run.actor.getSnapshot().value).toEqual({ reportingFailure: 'requesting' });
    await run.advance(1);
    expect(run.actor.getSnapshot().output).toEqual({ result: 'failed', reason: 'terminated', code: 'TERMINATED', exitCode: 1, reported: false });
  });

  it('during reportingFailure keeps the original reason', async () => {
    const run = startRun(startup());
    await gather(run);
    await fail(run, 'validate', new BootstateError('INVALID_USERNAME', 'root is reserved'));
    const first = running(run, 'failureReport');

    await run.send({ type: 'TERMINATE' });
    expect(first.signal.aborted).toBe(true);
    const second = running(run, 'failureReport');
    expect(second).not.toBe(first);
    expect(second.input.failure).toMatchObject({ code: 'INVALID_USERNAME', reason: 'invalid username' });
    expect(run.kvp.map((r) => r.event.failure?.reason)).toEqual(['invalid username', 'invalid username']);

    await run.advance(1500);
    expect(run.actor.getSnapshot().output).toEqual({
      result: 'failed',
      reason: 'invalid username',
      code: 'INVALID_USERNAME',
      exitCode: 78,
      reported: false,
    });
  });
});

describe('TERMINATE once the OS is configured', () => {
  it('while the report-pending marker is written waits for it, then leaves Ready for the next boot', async () => {
    const run = await configuredWithRsaOnItsWay();
    const marker = running(run, 'pendingMarker');
    const rsa = running(run, 'laterHostKeys');

    await run.send({ type: 'TERMINATE' });
    await run.send({ type: 'TERMINATE' });
    expect(marker.signal.aborted).toBe(false);
    expect(run.actor.getSnapshot().status).toBe('active');
    await complete(run, 'pendingMarker');

    expect(rsa.signal.aborted).toBe(true);
    expect(run.actor.getSnapshot().value).toBe('readyNotAccepted');
    expect(run.actor.getSnapshot().output).toEqual(READY_LEFT);
    expect(failureReported(run)).toBe(false);
    expect(hasStarted(run, 'readyReport')).toBe(false);
  });

  it('with the marker down and the rsa key still being made ends at once, reporting nothing', async () => {
    const run = await configuredWithRsaOnItsWay();
    await complete(run, 'pendingMarker');
    const rsa = running(run, 'laterHostKeys');

    await run.send({ type: 'TERMINATE' });
    expect(rsa.signal.aborted).toBe(true);
    expect(run.actor.getSnapshot().output).toEqual(READY_LEFT);
    expect(failureReported(run)).toBe(false);
    expect(lastStart(run, 'pendingMarker')!.outcome).toBe('done');
  });

  it('while the marker is written, and the marker fails: the marker decides, reported with the short budget', async () => {
    const run = await configuredWithRsaOnItsWay();
    await run.send({ type: 'TERMINATE' });
    await fail(run, 'pendingMarker', new BootstateError('MARKER_FAILED', 'read-only file system'));

    expect(running(run, 'failureReport').input.failure).toMatchObject({ code: 'MARKER_FAILED' });
    await run.advance(1500);
    expect(run.actor.getSnapshot().output).toMatchObject({ result: 'failed', code: 'MARKER_FAILED', reported: false });
  });

  it('on a boot that only reports Ready, while missing host keys are made, leaves Ready for the next boot', async () => {
    const run = startRun(startup({ marker: 'report-pending' }));
    const keys = running(run, 'missingHostKeys');
    expect(run.systemd).toEqual([]);

    await run.send({ type: 'TERMINATE' });
    expect(keys.signal.aborted).toBe(true);
    expect(run.actor.getSnapshot().output).toEqual(READY_LEFT);
    expect(failureReported(run)).toBe(false);
  });
});

describe('a boot that finds the report-pending marker', () => {
  it('makes the host keys an earlier, stopped boot left missing before READY=1 and Ready', async () => {
    const run = startRun(startup({ marker: 'report-pending' }));
    expect(running(run, 'missingHostKeys').input.config).toBeDefined();
    expect(hasStarted(run, 'readyReport')).toBe(false);
    await complete(run, 'missingHostKeys');
    expect(run.systemd).toEqual(['READY']);
    await completeEach(run, ['readyReport', 'provisionedMarker']);
    expect(run.actor.getSnapshot().output).toMatchObject({ result: 'provisioned', exitCode: 0 });
  });

  it('reports Ready with a warning when a missing host key cannot be made', async () => {
    const run = startRun(startup({ marker: 'report-pending' }));
    await fail(run, 'missingHostKeys', new BootstateError('SUBPROCESS_FAILED', 'ssh-keygen was killed'));
    expect(running(run, 'readyReport')).toBeDefined();
    expect(run.actor.getSnapshot().context.warnings.at(-1)).toMatch(/^missing ssh host keys not made: /);
  });
});
