/**
 * Pre-provisioned VMs, path by path with their effects: what the fabric is asked (which report, with which
 * pps_type), which markers are written, which OS steps start and with whose data, for the three pool types. Written
 * from the protocol (docs/preprovisioned.md and the facts of cloud-init's flows it records), not from the chart.
 */
import { describe, expect, it } from 'vitest';
import { HEALTH_FAILED, HEALTH_IN_PROGRESS, HEALTH_READY } from '../../machines/provisioning.js';
import { BootstateError } from '../../src/core/errors.js';
import { STEP, type Step } from '../support/chart.js';
import { acceptPlan, answerImds, complete, fail, failImds, failMedia, gather, hasStarted, lastStart, readMedia, running, startsOf, throughOs } from './gates.js';
import { startRun, startup, type Run } from './harness.js';
import {
  ATTACHED_NIC,
  MEDIA_CUSTOMER,
  MEDIA_POOL_OS_DISK,
  MEDIA_POOL_SAVABLE,
  MEDIA_WITH_USERNAME,
  METADATA,
  METADATA_POOL_OS_DISK,
  METADATA_POOL_RUNNING,
  METADATA_POOL_SAVABLE,
  METADATA_POOL_UNKNOWN,
  TEST_CONFIG,
  VM_ID,
} from './support.js';

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
    // Beside the poll, the watch of the NIC's carrier starts again too.
    expect(run.gates.map((g) => g.id)).toEqual([STEP.reprovision, STEP.carrier]);
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

describe('the network while a pool VM waits to be claimed', () => {
  it("beside the polls the carrier is watched; a switch renews that NIC's lease, then the watch goes on", async () => {
    const run = startRun(startup());
    await toWaiting(run);
    const watch = running(run, 'carrier');
    expect(hasStarted(run, 'lease')).toBe(false);
    await complete(run, 'carrier', 'eth0');
    expect(running(run, 'lease').input.nic).toBe('eth0');
    // The polls go on meanwhile: on the pool's network they only hear "not yet".
    expect(running(run, 'reprovision')).toBeDefined();
    await complete(run, 'lease');
    expect(startsOf(run, 'carrier')).toHaveLength(2);
    expect(watch.settled).toBe(true);
    await complete(run, 'reprovision', MEDIA_CUSTOMER);
    // The claim ends the watch: provisioning runs on the lease it has.
    expect(running(run, 'imds')).toBeDefined();
    expect(lastStart(run, 'carrier')!.signal.aborted).toBe(true);
  });

  it('a renewal that fails is a warning and the watch goes on; a watch that fails is a warning and the polls go on alone', async () => {
    const run = startRun(startup());
    await toWaiting(run);
    await complete(run, 'carrier', 'eth0');
    await fail(run, 'lease', new BootstateError('SUBPROCESS_FAILED', 'ifup eth0 exited with 1'));
    expect(run.actor.getSnapshot().context.warnings).toEqual(['lease not renewed: subprocess failed']);
    await fail(run, 'carrier', new BootstateError('PPS_NIC_FAILED', 'ip monitor link ended'));
    expect(run.actor.getSnapshot().context.warnings.at(-1)).toBe('network watch stopped: preprovisioned VM network interface error');
    expect(startsOf(run, 'carrier')).toHaveLength(2);
    await fail(run, 'reprovision', notYet());
    await run.advance(POLL_MS);
    expect(running(run, 'reprovision').input.attempt).toBe(2);
    expect(hasStarted(run, 'failureReport')).toBe(false);
  });

  it('SIGTERM while renewing stops quietly, the renewal aborted', async () => {
    const run = startRun(startup());
    await toWaiting(run);
    await complete(run, 'carrier', 'eth0');
    const renewal = running(run, 'lease');
    await run.send({ type: 'TERMINATE' });
    expect(renewal.signal.aborted).toBe(true);
    expect(run.actor.getSnapshot().output).toEqual({ result: 'waiting-for-reuse', exitCode: 0, reported: true });
  });
});

describe('a pre-provisioned VM of type Savable', () => {
  const NIC_2 = { name: 'eth2', mac: '00:0d:3a:00:00:03' };
  const DETACH_MS = TEST_CONFIG.preprovisioning.nic_detach_timeout_secs * 1000;
  const ATTACH_MS = TEST_CONFIG.preprovisioning.nic_attach_timeout_secs * 1000;
  const notPrimary = () => new BootstateError('PPS_NIC_FAILED', 'the fabric does not answer through eth1', { retryable: true });

  /** Boots a Savable pool VM up to its wait for the NIC's detach. */
  async function toDetaching(run: Run, order: 'media first' | 'imds first' = 'media first', from: 'imds' | 'media' = 'imds') {
    const imds = from === 'imds' ? METADATA_POOL_SAVABLE : METADATA_POOL_RUNNING;
    const media = from === 'media' ? MEDIA_POOL_SAVABLE : null;
    if (order === 'media first') await gather(run, { imds, media });
    else {
      await answerImds(run, imds);
      await readMedia(run, media);
    }
    await complete(run, 'poolReadyReport');
    await complete(run, 'waitingMarker');
  }

  for (const order of ['media first', 'imds first'] as const) {
    for (const from of ['imds', 'media'] as const) {
      it(`Savable from ${from} (${order}, beside Running from the other): Ready told its answer may be lost, the reuse marker, then the NIC's detach`, async () => {
        const run = startRun(startup());
        const imds = from === 'imds' ? METADATA_POOL_SAVABLE : METADATA_POOL_RUNNING;
        const media = from === 'media' ? MEDIA_POOL_SAVABLE : null;
        if (order === 'media first') await gather(run, { imds, media });
        else {
          await answerImds(run, imds);
          await readMedia(run, media);
        }
        expect(running(run, 'poolReadyReport').input).toMatchObject({ health: HEALTH_READY, ppsType: 'Savable', answerMayBeLost: true });
        expect(run.kvp.map((r) => r.event)).toEqual([{ type: 'kvp.report', health: HEALTH_READY, vmId: VM_ID, failure: null, ppsType: 'Savable' }]);
        await complete(run, 'poolReadyReport');
        await complete(run, 'waitingMarker');
        expect(running(run, 'nicDetach')).toBeDefined();
        expect(hasStarted(run, 'nicAttach', 'reprovision', 'shutdownMarker', ...OS_STEPS)).toBe(false);
      });
    }
  }

  it('detached, waits for an attached NIC, tries each until the primary one, then polls and is claimed', async () => {
    const run = startRun(startup());
    await toDetaching(run);
    await complete(run, 'nicDetach', 'eth0');
    expect(running(run, 'nicAttach').input.tried).toEqual([]);
    await complete(run, 'nicAttach', ATTACHED_NIC);
    expect(running(run, 'primaryNic').input.nic).toEqual(ATTACHED_NIC);
    await fail(run, 'primaryNic', notPrimary());
    // The one tried is skipped by the next wait.
    expect(running(run, 'nicAttach').input.tried).toEqual(['eth1']);
    await complete(run, 'nicAttach', NIC_2);
    expect(running(run, 'primaryNic').input.nic).toEqual(NIC_2);
    expect(hasStarted(run, 'reprovision')).toBe(false);
    await complete(run, 'primaryNic');
    expect(running(run, 'reprovision').input).toMatchObject({ attempt: 1, previousError: null });
    await complete(run, 'reprovision', MEDIA_CUSTOMER);
    await gather(run, { imds: { ...METADATA, adminUsername: 'customer' } });
    expect(running(run, 'validate').input.plan.username).toBe('customer');
    await throughOs(run);
    await complete(run, 'pendingMarker');
    await complete(run, 'hostnamePublish');
    expect(running(run, 'readyReport').input).toMatchObject({ health: HEALTH_READY, ppsType: 'Savable' });
    // Only the pool's Ready may lose its answer.
    expect(running(run, 'readyReport').input.answerMayBeLost).toBeUndefined();
  });

  it('a NIC the host never detaches: ProvisioningFailed TIMEOUT (phase preprovisioning) once its deadline passes, no poll', async () => {
    const run = startRun(startup());
    await toDetaching(run);
    await run.advance(DETACH_MS - 1);
    expect(hasStarted(run, 'failureReport')).toBe(false);
    await run.advance(1);
    const report = running(run, 'failureReport').input;
    expect(report).toMatchObject({ health: HEALTH_FAILED, ppsType: 'Savable', failure: { code: 'TIMEOUT' } });
    expect(report.failure.data).toContainEqual(['phase', 'preprovisioning']);
    expect(running(run, 'failureReport').input.failure.data.find(([k]: [string]) => k === 'error')[1]).toMatch(/did not detach/);
    expect(hasStarted(run, 'nicAttach', 'reprovision')).toBe(false);
  });

  it('the attach deadline counts from the detach and bounds the tries too: ProvisioningFailed TIMEOUT mid-probe', async () => {
    const run = startRun(startup());
    await toDetaching(run);
    await run.advance(DETACH_MS - 5);
    await complete(run, 'nicDetach', 'eth0');
    await run.advance(ATTACH_MS - 10);
    await complete(run, 'nicAttach', ATTACHED_NIC);
    const probe = running(run, 'primaryNic');
    await run.advance(10);
    expect(probe.signal.aborted).toBe(true);
    const report = running(run, 'failureReport').input;
    expect(report.failure).toMatchObject({ code: 'TIMEOUT' });
    expect(report.failure.data.find(([k]: [string]) => k === 'error')[1]).toMatch(/no attached network interface reached the fabric within 120 s/);
  });

  it('a NIC that fails its probe does not restart the attach deadline: it still falls due counted from the detach', async () => {
    const run = startRun(startup());
    await toDetaching(run);
    await complete(run, 'nicDetach', 'eth0');
    await run.advance(ATTACH_MS - 10);
    await complete(run, 'nicAttach', ATTACHED_NIC);
    await fail(run, 'primaryNic', notPrimary());
    expect(running(run, 'nicAttach').input.tried).toEqual(['eth1']);
    await run.advance(10);
    const report = running(run, 'failureReport').input;
    expect(report.failure).toMatchObject({ code: 'TIMEOUT' });
    expect(report.failure.data).toContainEqual(['phase', 'preprovisioning']);
  });

  it('writes a reuse marker of its own (its type in the name), so that a resumed run knows it is Savable', async () => {
    const run = startRun(startup());
    await toDetaching(run);
    expect(startsOf(run, 'waitingMarker').map((g) => g.input)).toEqual([expect.objectContaining({ vmId: VM_ID, ppsType: 'Savable' })]);
  });

  it('resumed after a reboot: no second pool Ready; waits for an attached NIC (one present counts), probes it, polls, and reports pps_type=Savable', async () => {
    const run = startRun(startup({ marker: 'waiting-for-reuse-savable' }));
    expect(run.kvp).toEqual([]);
    expect(running(run, 'nicAttach').input.tried).toEqual([]);
    expect(hasStarted(run, 'poolReadyReport', 'waitingMarker', 'nicDetach', 'reprovision')).toBe(false);
    await complete(run, 'nicAttach', ATTACHED_NIC);
    await complete(run, 'primaryNic');
    expect(running(run, 'reprovision')).toBeDefined();
    expect(running(run, 'nicGone')).toBeDefined();
    await complete(run, 'reprovision', MEDIA_CUSTOMER);
    await gather(run, { imds: { ...METADATA, adminUsername: 'customer' } });
    await throughOs(run);
    await complete(run, 'pendingMarker');
    await complete(run, 'hostnamePublish');
    expect(running(run, 'readyReport').input).toMatchObject({ health: HEALTH_READY, ppsType: 'Savable' });
    expect(run.kvp.map((r) => r.event)).toEqual([{ type: 'kvp.report', health: HEALTH_READY, vmId: VM_ID, failure: null, ppsType: 'Savable' }]);
    expect(hasStarted(run, 'poolReadyReport', 'waitingMarker')).toBe(false);
  });

  it('resumed: the NIC it found was the pool\'s, which the host then detaches: back to the wait for an attached one, its deadline afresh', async () => {
    const run = startRun(startup({ marker: 'waiting-for-reuse-savable' }));
    await complete(run, 'nicAttach', { name: 'eth0', mac: '00:0d:3a:00:00:01' });
    await complete(run, 'primaryNic');
    const poll = running(run, 'reprovision');
    await run.advance(ATTACH_MS);
    await complete(run, 'nicGone', 'eth0');
    expect(poll.signal.aborted).toBe(true);
    expect(running(run, 'nicAttach').input.tried).toEqual([]);
    await run.advance(ATTACH_MS - 1);
    expect(hasStarted(run, 'failureReport')).toBe(false);
    await complete(run, 'nicAttach', ATTACHED_NIC);
    await complete(run, 'primaryNic');
    expect(running(run, 'reprovision')).toBeDefined();
    expect(hasStarted(run, 'failureReport', 'poolReadyReport')).toBe(false);
  });

  it('resumed: the watch of the NIC failing is a warning; the polls go on', async () => {
    const run = startRun(startup({ marker: 'waiting-for-reuse-savable' }));
    await complete(run, 'nicAttach', ATTACHED_NIC);
    await complete(run, 'primaryNic');
    await fail(run, 'nicGone', new BootstateError('PPS_NIC_FAILED', 'ip monitor link ended'));
    expect(running(run, 'reprovision')).toBeDefined();
    expect(run.actor.getSnapshot().context.warnings).toContainEqual(expect.stringMatching(/^NIC watch stopped: /));
  });

  it('resumed with no NIC attached within the deadline: ProvisioningFailed TIMEOUT (phase preprovisioning), pps_type=Savable', async () => {
    const run = startRun(startup({ marker: 'waiting-for-reuse-savable' }));
    await run.advance(ATTACH_MS);
    const report = running(run, 'failureReport').input;
    expect(report).toMatchObject({ health: HEALTH_FAILED, ppsType: 'Savable', failure: { code: 'TIMEOUT' } });
    expect(report.failure.data).toContainEqual(['phase', 'preprovisioning']);
  });

  for (const step of ['nicDetach', 'nicAttach', 'primaryNic'] as const) {
    it(`SIGTERM in ${step} stops quietly (waiting-for-reuse, exit 0): Ready reached the pool, the marker is down`, async () => {
      const run = startRun(startup());
      await toDetaching(run);
      if (step !== 'nicDetach') await complete(run, 'nicDetach', 'eth0');
      if (step === 'primaryNic') await complete(run, 'nicAttach', ATTACHED_NIC);
      const gate = running(run, step);
      await run.send({ type: 'TERMINATE' });
      expect(gate.signal.aborted).toBe(true);
      expect(hasStarted(run, 'failureReport')).toBe(false);
      expect(run.actor.getSnapshot().output).toEqual({ result: 'waiting-for-reuse', exitCode: 0, reported: true });
    });
  }

  it('a NIC wait that fails outright (not a retry question) reports that failure', async () => {
    const run = startRun(startup());
    await toDetaching(run);
    await fail(run, 'nicDetach', new BootstateError('PPS_NIC_FAILED', 'ip monitor exited'));
    expect(running(run, 'failureReport').input.failure).toMatchObject({ code: 'PPS_NIC_FAILED', reason: 'preprovisioned VM network interface error' });
  });
});

describe('SIGTERM while the pool marker is written (the pool accepted Ready)', () => {
  for (const [imds, marker, result] of [
    [METADATA_POOL_RUNNING, 'waitingMarker', 'waiting-for-reuse'],
    [METADATA_POOL_SAVABLE, 'waitingMarker', 'waiting-for-reuse'],
    [METADATA_POOL_OS_DISK, 'shutdownMarker', 'pool-shutdown'],
  ] as const) {
    it(`${imds.ppsType}: waits for the ${marker}, then ends as a stop in the wait (${result}); never ProvisioningFailed after the pool's Ready`, async () => {
      const run = startRun(startup());
      await gather(run, { imds });
      await complete(run, 'poolReadyReport');
      const writing = running(run, marker);
      await run.send({ type: 'TERMINATE' });
      expect(writing.signal.aborted).toBe(false);
      expect(hasStarted(run, 'failureReport')).toBe(false);
      await complete(run, marker);
      expect(run.actor.getSnapshot().output).toEqual({ result, exitCode: 0, reported: true });
      expect(run.kvp.map((r) => r.event.health)).toEqual([HEALTH_READY]);
      expect(startsOf(run, 'failureReport', 'reprovision', 'nicDetach')).toEqual([]);
    });
  }

  it('a marker that then fails is reported, within the short budget of a stop', async () => {
    const run = startRun(startup());
    await gather(run, { imds: METADATA_POOL_OS_DISK });
    await complete(run, 'poolReadyReport');
    await run.send({ type: 'TERMINATE' });
    await fail(run, 'shutdownMarker', new BootstateError('MARKER_FAILED', 'cannot write marker: EROFS'));
    expect(running(run, 'failureReport').input.failure).toMatchObject({ code: 'MARKER_FAILED' });
  });
});

describe('a pre-provisioned VM of type PreprovisionedOSDisk', () => {
  for (const [from, imds, media] of [
    ['imds', METADATA_POOL_OS_DISK, null],
    ['the media', METADATA_POOL_RUNNING, MEDIA_POOL_OS_DISK],
  ] as const) {
    it(`from ${from}: Ready to the pool, its own marker (never the reuse marker), then waits with no deadline until the host shuts it down`, async () => {
      const run = startRun(startup());
      await gather(run, { imds, media });
      expect(running(run, 'poolReadyReport').input).toMatchObject({ health: HEALTH_READY, ppsType: 'PreprovisionedOSDisk' });
      expect(running(run, 'poolReadyReport').input.answerMayBeLost).toBeUndefined();
      await complete(run, 'poolReadyReport');
      expect(running(run, 'shutdownMarker').input).toMatchObject({ vmId: VM_ID });
      await complete(run, 'shutdownMarker');
      await run.advance(7 * 24 * 3600 * 1000);
      expect(run.actor.getSnapshot().status).toBe('active');
      expect(startsOf(run, 'waitingMarker', 'reprovision', 'nicDetach', 'failureReport', ...OS_STEPS)).toEqual([]);
      await run.send({ type: 'TERMINATE' });
      expect(run.actor.getSnapshot().output).toEqual({ result: 'pool-shutdown', exitCode: 0, reported: true });
      expect(hasStarted(run, 'failureReport')).toBe(false);
      expect(run.kvp.map((r) => r.event.health)).toEqual([HEALTH_READY]);
    });
  }

  it('a boot that finds the shutdown marker and is still an OS-disk pool VM reports PPS_NOT_SHUT_DOWN; no second pool Ready', async () => {
    const run = startRun(startup({ marker: 'waiting-for-shutdown' }));
    await gather(run, { imds: METADATA_POOL_OS_DISK });
    const report = running(run, 'failureReport').input;
    expect(report).toMatchObject({ health: HEALTH_FAILED, ppsType: 'PreprovisionedOSDisk', failure: { code: 'PPS_NOT_SHUT_DOWN' } });
    expect(report.failure.data).toContainEqual(['pps_type', 'PreprovisionedOSDisk']);
    expect(hasStarted(run, 'poolReadyReport', 'shutdownMarker', ...OS_STEPS)).toBe(false);
    await complete(run, 'failureReport');
    expect(run.actor.getSnapshot().output).toMatchObject({ result: 'failed', code: 'PPS_NOT_SHUT_DOWN', exitCode: 1, reported: true });
  });

  it('a boot that finds the shutdown marker but is no longer a pool VM provisions as any first boot', async () => {
    const run = startRun(startup({ marker: 'waiting-for-shutdown' }));
    await gather(run);
    expect(running(run, 'validate').input.plan.username).toBe('azureuser');
  });

  it('a shutdown marker that cannot be written fails the run', async () => {
    const run = startRun(startup());
    await gather(run, { imds: METADATA_POOL_OS_DISK });
    await complete(run, 'poolReadyReport');
    await fail(run, 'shutdownMarker', new BootstateError('MARKER_FAILED', 'read-only file system'));
    expect(running(run, 'failureReport').input.failure).toMatchObject({ code: 'MARKER_FAILED' });
  });
});

describe('a pool type this agent does not know', () => {
  it('a failure naming the type, pps_type in the report, the placeholder never provisioned, no pool Ready', async () => {
    const run = startRun(startup());
    await gather(run, { imds: METADATA_POOL_UNKNOWN, media: MEDIA_POOL_SAVABLE });
    const report = running(run, 'failureReport').input;
    expect(report).toMatchObject({ health: HEALTH_FAILED, ppsType: 'Unknown', failure: { code: 'PPS_UNSUPPORTED', reason: 'unsupported preprovisioning type' } });
    expect(report.failure.data).toContainEqual(['pps_type', 'Hibernated']);
    expect(startsOf(run, ...OS_STEPS, 'poolReadyReport', 'waitingMarker', 'reprovision')).toEqual([]);
  });
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
