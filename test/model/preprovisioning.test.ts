/**
 * Pre-provisioned VMs, path by path with their effects: what the fabric is asked (which report, with which
 * pps_type), which markers are written, which OS steps start and with whose data. Written from the protocol
 * (docs/protocol.md#pre-provisioned-vms and cloud-init's Running PPS flow), not from the chart.
 */
import { describe, expect, it } from 'vitest';
import { HEALTH_FAILED, HEALTH_IN_PROGRESS, HEALTH_READY } from '../../machines/provisioning.js';
import { BootstateError } from '../../src/core/errors.js';
import { STEP, type Step } from '../support/chart.js';
import { acceptPlan, answerImds, complete, fail, failImds, failMedia, gather, hasStarted, readMedia, running, startsOf, throughOs } from './gates.js';
import { startRun, startup, type Run } from './harness.js';
import { MEDIA_CUSTOMER, MEDIA_WITH_USERNAME, METADATA, METADATA_POOL_RUNNING, METADATA_POOL_SAVABLE, TEST_CONFIG, VM_ID } from './support.js';

/** The steps that apply a plan; the host keys, which need none, are made from the start of each pass. */
const OS_STEPS: Step[] = ['validate', 'hostname', 'user', 'password', 'sshKeys', 'sshd', 'customData'];
const POLL_MS = TEST_CONFIG.preprovisioning.poll_interval_secs * 1000;
const notYet = () => new BootstateError('HTTP_STATUS', 'reprovisiondata answered HTTP 404', { data: [['status', '404']], retryable: true });

/** Boots a pool VM of type Running up to its first poll of reprovisiondata. */
async function toWaiting(run: Run) {
  await gather(run, { imds: METADATA_POOL_RUNNING });
  await complete(run, 'poolReadyReport');
  await complete(run, 'waitingMarker');
}

describe('a pre-provisioned VM of type Running', () => {
  it('reports Ready to the pool with pps_type=Running, then writes the waiting marker, then polls; no OS step starts', async () => {
    const run = startRun(startup());
    await gather(run, { imds: METADATA_POOL_RUNNING });

    const ready = running(run, 'poolReadyReport');
    expect(ready.input).toMatchObject({ health: HEALTH_READY, vmId: VM_ID, failure: null, ppsType: 'Running' });
    expect(run.kvp.map((r) => r.event)).toEqual([{ type: 'kvp.report', health: HEALTH_READY, vmId: VM_ID, failure: null, ppsType: 'Running' }]);
    expect(hasStarted(run, 'waitingMarker')).toBe(false);

    await complete(run, 'poolReadyReport');
    const marker = running(run, 'waitingMarker');
    expect(marker.input).toMatchObject({ vmId: VM_ID });
    expect(marker.seq).toBeGreaterThan(ready.seq);
    await complete(run, 'waitingMarker');

    expect(running(run, 'reprovision').input).toMatchObject({ attempt: 1, previousError: null });
    expect(startsOf(run, ...OS_STEPS)).toEqual([]);
    // The host keys begun beside IMDS were given up when the placeholder's pass ended: the customer's pass makes its own.
    expect(startsOf(run, 'hostKeys').map((g) => g.signal.aborted)).toEqual([true]);
    expect(hasStarted(run, 'pendingMarker', 'readyReport')).toBe(false);
  });

  it('polls again after the interval while IMDS answers "not yet", counting attempts and remembering the error kind', async () => {
    const run = startRun(startup());
    await toWaiting(run);
    for (let attempt = 1; attempt <= 5; attempt++) {
      expect(running(run, 'reprovision').input).toMatchObject({ attempt, previousError: attempt === 1 ? null : 'HTTP_STATUS:404' });
      await fail(run, 'reprovision', notYet());
      await run.advance(POLL_MS - 1);
      expect(startsOf(run, 'reprovision')).toHaveLength(attempt);
      await run.advance(1);
    }
    expect(startsOf(run, 'reprovision')).toHaveLength(6);
    expect(startsOf(run, ...OS_STEPS)).toEqual([]);
  });

  it('once claimed provisions the customer from the new document and fresh IMDS, and reports InProgress and Ready again', async () => {
    const run = startRun(startup());
    await toWaiting(run);
    await fail(run, 'reprovision', notYet());
    await run.advance(POLL_MS);
    await complete(run, 'reprovision', MEDIA_CUSTOMER);

    // A second pass: the media reader is told not to read the placeholder's media, IMDS is asked again.
    const media = running(run, 'media');
    expect(media.input.claimed).toBe(true);
    expect(startsOf(run, 'imds')).toHaveLength(2);
    expect(startsOf(run, 'inProgressReport')).toHaveLength(2);
    await gather(run, { imds: { ...METADATA, adminUsername: 'customer', computerName: 'vm-customer', hasCustomData: true } });

    const plan = running(run, 'validate').input.plan;
    expect(plan).toMatchObject({ username: 'customer', hostname: 'vm-customer', hasCustomData: true, customDataFound: true });
    await throughOs(run);
    for (const gate of startsOf(run, 'hostname', 'user', 'password', 'sshKeys', 'sshd', 'customData')) {
      expect(gate.input.plan.username).toBe('customer');
    }
    expect(startsOf(run, 'hostKeys').map((g) => [g.signal.aborted, g.settled])).toEqual([[true, false], [false, true]]);
    await complete(run, 'pendingMarker');
    await complete(run, 'hostnamePublish');
    expect(running(run, 'readyReport').input).toMatchObject({ health: HEALTH_READY, ppsType: 'Running' });
    await complete(run, 'readyReport');
    await complete(run, 'provisionedMarker');
    expect(run.actor.getSnapshot().output).toEqual({ result: 'provisioned', exitCode: 0, reported: true });
    expect(run.kvp.map((r) => r.event.ppsType)).toEqual(['Running', 'Running']);
  });

  it('without IMDS after the claim provisions from the customer\'s document alone', async () => {
    const run = startRun(startup());
    await toWaiting(run);
    await complete(run, 'reprovision', MEDIA_CUSTOMER);
    await readMedia(run, MEDIA_WITH_USERNAME);
    await failImds(run, new BootstateError('HTTP_STATUS', 'IMDS answered 403', { retryable: false }));
    // Even if a media reader ignored `claimed`, the customer's document wins over the physical media.
    expect(running(run, 'validate').input.plan).toMatchObject({ source: 'media', username: 'customer', hostname: 'vm-customer' });
  });

  it("the placeholder's unusable media does not reach the customer's validation", async () => {
    const run = startRun(startup());
    await failMedia(run, new BootstateError('PASSWORD_TOO_LONG', 'the placeholder password is longer than 72 characters'));
    await answerImds(run, METADATA_POOL_RUNNING);
    await complete(run, 'poolReadyReport');
    await complete(run, 'waitingMarker');
    await complete(run, 'reprovision', MEDIA_CUSTOMER);
    await gather(run, { imds: { ...METADATA, adminUsername: 'customer' } });
    expect(running(run, 'validate').input.mediaFailure).toBeNull();
  });

  it('fails naming the key when IMDS still calls the VM pre-provisioned after the claim', async () => {
    const run = startRun(startup());
    await toWaiting(run);
    await complete(run, 'reprovision', MEDIA_CUSTOMER);
    await gather(run, { imds: METADATA_POOL_RUNNING });
    const report = running(run, 'failureReport').input;
    expect(report.failure).toMatchObject({ code: 'IMDS_INVALID', data: expect.arrayContaining([['key', 'extended.compute.ppsType'], ['value', 'Running']]) });
    expect(startsOf(run, ...OS_STEPS)).toEqual([]);
  });

  it('after a reboot while waiting resumes polling: no second pool Ready, no marker rewrite, no placeholder provisioning', async () => {
    const run = startRun(startup({ marker: 'waiting-for-reuse' }));
    expect(running(run, 'reprovision').input).toMatchObject({ attempt: 1 });
    expect(run.gates.map((g) => g.id)).toEqual([STEP.reprovision]);
    expect(run.kvp).toEqual([]);
    await complete(run, 'reprovision', MEDIA_CUSTOMER);
    await gather(run, { imds: { ...METADATA, adminUsername: 'customer' } });
    expect(running(run, 'validate').input.plan.username).toBe('customer');
    expect(hasStarted(run, 'poolReadyReport', 'waitingMarker')).toBe(false);
  });

  it('SIGTERM while waiting stops without a failure report; the pool Ready stands', async () => {
    const run = startRun(startup());
    await toWaiting(run);
    const poll = running(run, 'reprovision');
    await run.send({ type: 'TERMINATE' });
    expect(poll.signal.aborted).toBe(true);
    expect(hasStarted(run, 'failureReport')).toBe(false);
    expect(run.kvp.map((r) => r.event.health)).toEqual([HEALTH_READY]);
    expect(run.actor.getSnapshot().output).toEqual({ result: 'waiting-for-reuse', exitCode: 0, reported: true });
  });

  it('a poll that fails for good (a document that is not ovf-env.xml) reports ProvisioningFailed with pps_type=Running', async () => {
    const run = startRun(startup());
    await toWaiting(run);
    await fail(run, 'reprovision', new BootstateError('OVF_INVALID', 'ovf-env.xml: root element is not an OVF Environment'));
    const report = running(run, 'failureReport').input;
    expect(report).toMatchObject({ health: HEALTH_FAILED, ppsType: 'Running', failure: { code: 'OVF_INVALID' } });
    expect(startsOf(run, ...OS_STEPS)).toEqual([]);
  });

  it('a claim over the body limit ends the wait at that poll: ProvisioningFailed naming the limit and path, no further poll', async () => {
    const run = startRun(startup());
    await toWaiting(run);
    await fail(run, 'reprovision', notYet());
    await run.advance(POLL_MS);
    const data: Array<[string, string]> = [['limit', '1048576'], ['path', '/metadata/reprovisiondata']];
    await fail(run, 'reprovision', new BootstateError('BODY_TOO_LARGE', 'response body from /metadata/reprovisiondata is larger than 1048576 bytes', { data }));
    const report = running(run, 'failureReport').input;
    expect(report).toMatchObject({ health: HEALTH_FAILED, ppsType: 'Running', failure: { code: 'BODY_TOO_LARGE', reason: 'response body too large', data, retryable: false } });
    await run.advance(10 * POLL_MS);
    expect(startsOf(run, 'reprovision')).toHaveLength(2);
    expect(startsOf(run, ...OS_STEPS)).toEqual([]);
  });

  it('a pool Ready the wireserver refuses ends in ProvisioningFailed carrying that refusal, without the marker', async () => {
    const run = startRun(startup());
    await gather(run, { imds: METADATA_POOL_RUNNING });
    await fail(run, 'poolReadyReport', new BootstateError('HTTP_STATUS', 'HTTP 403', { data: [['status', '403']], retryable: false }));
    expect(running(run, 'failureReport').input.failure).toMatchObject({ code: 'HTTP_STATUS', data: [['status', '403']] });
    expect(hasStarted(run, 'waitingMarker', 'reprovision')).toBe(false);
  });
});

describe('pool types this agent cannot serve', () => {
  for (const [name, metadata, media] of [
    ['Savable from IMDS', METADATA_POOL_SAVABLE, null],
    ['PreprovisionedOSDisk from the media', METADATA, { ...MEDIA_WITH_USERNAME, ppsType: 'PreprovisionedOSDisk' }],
  ] as const) {
    it(`${name}: a failure naming the type, pps_type in the report, the placeholder never provisioned, no pool Ready`, async () => {
      const run = startRun(startup());
      await gather(run, { media: media, imds: metadata });
      const type = media ? 'PreprovisionedOSDisk' : 'Savable';
      const report = running(run, 'failureReport').input;
      expect(report).toMatchObject({ health: HEALTH_FAILED, ppsType: type, failure: { code: 'PPS_UNSUPPORTED', reason: 'unsupported preprovisioning type' } });
      expect(report.failure.data).toContainEqual(['pps_type', type]);
      expect(run.kvp.at(-1)!.event).toMatchObject({ health: HEALTH_FAILED, ppsType: type });
      expect(startsOf(run, ...OS_STEPS, 'poolReadyReport', 'waitingMarker', 'reprovision')).toEqual([]);
      await complete(run, 'failureReport');
      expect(run.actor.getSnapshot().output).toMatchObject({ result: 'failed', code: 'PPS_UNSUPPORTED', exitCode: 1, reported: true });
    });
  }
});

describe('steps left out with --only / --skip', () => {
  it('skipped steps never start; the others run with the plan and Ready is still reported', async () => {
    const run = startRun(startup({ config: { ...TEST_CONFIG, steps: { skip: ['user', 'password', 'ssh-keys', 'custom-data'] } } }));
    await gather(run);
    await acceptPlan(run);
    expect(startsOf(run, ...OS_STEPS.slice(1), 'hostKeys').map((g) => g.id).sort()).toEqual([STEP.hostKeys, STEP.hostname].sort());
    await complete(run, 'hostname');
    // sshd waits for the host keys, made since the work began.
    expect(startsOf(run, 'sshd')).toEqual([]);
    await complete(run, 'hostKeys');
    await complete(run, 'sshd');
    expect(startsOf(run, ...OS_STEPS.slice(1), 'hostKeys').map((g) => g.id).sort()).toEqual([STEP.hostKeys, STEP.hostname, STEP.sshd].sort());
    await complete(run, 'pendingMarker');
    await complete(run, 'hostnamePublish');
    expect(running(run, 'readyReport').input.health).toBe(HEALTH_READY);
    expect(startsOf(run, 'inProgressReport')[0]!.input.health).toBe(HEALTH_IN_PROGRESS);
  });
});
