import { describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import { inState, STATE } from '../support/chart.js';
import { answerImds, complete, failImds, failMedia, hasStarted, readMedia, reportReady, running, startsOf, throughOs } from './gates.js';
import { startRun, startup } from './harness.js';
import { MEDIA_CUSTOM_DATA, MEDIA_POOL_RUNNING, MEDIA_WITH_USERNAME, MEDIA_WITHOUT_USERNAME, METADATA_PASSWORD_LOGINS, TEST_CONFIG } from './support.js';

const IMDS_TOTAL_MS = TEST_CONFIG.imds.total_retry_timeout_secs * 1000;
const IMDS_RETRY_MS = TEST_CONFIG.imds.retry_interval_secs * 1000;

describe('instance metadata', () => {
  it('the IMDS total deadline pre-empts an in-flight request and aborts its signal', async () => {
    const run = startRun(startup());
    await failImds(run, new BootstateError('HTTP_STATUS', 'IMDS answered 503', { retryable: true }));
    await run.advance(IMDS_RETRY_MS);
    const inFlight = running(run, 'imds');

    await run.advance(IMDS_TOTAL_MS - IMDS_RETRY_MS - 1);
    expect(inFlight.signal.aborted).toBe(false);
    await run.advance(1);
    expect(inFlight.signal.aborted).toBe(true);

    // The media read gave up first, at its own deadline: the IMDS failure is the reason.
    const { failure } = running(run, 'failureReport').input;
    expect(failure).toMatchObject({ code: 'TIMEOUT', reason: 'operation timed out' });
    expect(failure.data).toContainEqual(['last_error', 'http status error']);
  });

  it('IMDS failed and media with a username provisions from the media', async () => {
    const run = startRun(startup());
    await failImds(run, new BootstateError('IMDS_INVALID', 'no adminUsername'));
    await readMedia(run, MEDIA_WITH_USERNAME);

    expect(running(run, 'validate').input.plan).toMatchObject({
      source: 'media',
      username: 'mediauser',
      hostname: 'vm-media',
      passwordAuthentication: true,
      passwordProvided: true,
    });
    await throughOs(run);
    expect(startsOf(run, 'hostname', 'user', 'password', 'sshKeys', 'sshd').map((g) => g.input.plan.source)).toEqual(
      ['media', 'media', 'media', 'media', 'media'],
    );
    await reportReady(run);
    expect(run.actor.getSnapshot().output).toEqual({ result: 'provisioned', exitCode: 0, reported: true });
  });

  it('IMDS failed and no media fails with the IMDS failure reason', async () => {
    const run = startRun(startup());
    await failImds(run, new BootstateError('IMDS_INVALID', 'no adminUsername'));
    await readMedia(run);

    expect(running(run, 'failureReport').input.failure).toMatchObject({ code: 'IMDS_INVALID', reason: 'invalid IMDS metadata' });
    await complete(run, 'failureReport');
    expect(run.actor.getSnapshot().output).toMatchObject({ result: 'failed', reason: 'invalid IMDS metadata', exitCode: 78 });
  });

  it.each([
    ['a wrongly typed field', new BootstateError('IMDS_INVALID', 'invalid IMDS metadata for key=compute.osProfile.computerName', {
      data: [['key', 'compute.osProfile.computerName'], ['error', 'expected a string, received number']],
    }), 78],
    ['a body over the limit', new BootstateError('BODY_TOO_LARGE', 'response body from /metadata/instance is larger than 1048576 bytes', {
      data: [['limit', '1048576'], ['path', '/metadata/instance']],
    }), 1],
  ] as const)('an IMDS 200 with %s is not asked again: the report carries its data at once', async (_name, error, exitCode) => {
    const run = startRun(startup());
    await failImds(run, error);
    await readMedia(run);
    await run.advance(10 * IMDS_RETRY_MS);
    expect(startsOf(run, 'imds')).toHaveLength(1);
    expect(running(run, 'failureReport').input.failure).toMatchObject({ code: error.code, reason: error.reason, data: error.data, retryable: false });
    await complete(run, 'failureReport');
    expect(run.actor.getSnapshot().output).toMatchObject({ result: 'failed', reason: error.reason, exitCode });
  });

  it('IMDS failed and a malformed ovf-env.xml fails with the media\'s reason, since the media was needed', async () => {
    const run = startRun(startup());
    await failImds(run, new BootstateError('IMDS_INVALID', 'no adminUsername'));
    await failMedia(run, new BootstateError('OVF_INVALID', 'ovf-env.xml: not well-formed XML', { data: [['problem', 'not well-formed XML']] }));

    const { failure } = running(run, 'failureReport').input;
    expect(failure).toMatchObject({ code: 'OVF_INVALID', reason: 'error parsing ovf-env.xml', exitCode: 78 });
    expect(failure.data).toContainEqual(['problem', 'not well-formed XML']);
  });

  it('IMDS failed and media that cannot even be mounted fails with the IMDS failure reason', async () => {
    const run = startRun(startup());
    await failImds(run, new BootstateError('IMDS_INVALID', 'no adminUsername'));
    await failMedia(run, new BootstateError('MEDIA_FAILED', 'cannot mount /dev/sr0'));

    expect(running(run, 'failureReport').input.failure).toMatchObject({ code: 'IMDS_INVALID' });
  });

  it('IMDS failed and media without a username fails with "failed to determine username"', async () => {
    const run = startRun(startup());
    await failImds(run, new BootstateError('IMDS_INVALID', 'no adminUsername'));
    await readMedia(run, MEDIA_WITHOUT_USERNAME);

    expect(running(run, 'failureReport').input.failure).toMatchObject({ code: 'USERNAME_UNKNOWN', reason: 'failed to determine username' });
  });

  it('IMDS with password logins off still waits for the media: a pool flag there makes it a pool VM', async () => {
    const run = startRun(startup());
    const media = running(run, 'media');
    await answerImds(run);

    expect(media.signal.aborted).toBe(false);
    expect(inState(run.actor.getSnapshot(), STATE.imdsDone, STATE.mediaReading)).toBe(true);
    expect(hasStarted(run, 'validate')).toBe(false);
    await readMedia(run, MEDIA_POOL_RUNNING);
    expect(hasStarted(run, 'validate')).toBe(false);
    expect(running(run, 'poolReadyReport').input).toMatchObject({ health: 'Ready', ppsType: 'Running' });
  });

  it('CustomData on the media reaches the plan though IMDS does not say hasCustomData', async () => {
    const run = startRun(startup());
    await answerImds(run);
    await readMedia(run, MEDIA_CUSTOM_DATA);
    expect(running(run, 'validate').input.plan).toMatchObject({ source: 'imds', username: 'azureuser', hasCustomData: false, customDataFound: true });
  });

  it('the media read has its own deadline: then a warning, and the plan is made from IMDS alone', async () => {
    const run = startRun(startup());
    const media = running(run, 'media');
    await answerImds(run);
    await run.advance(TEST_CONFIG.provisioning_media.timeout_secs * 1000 - 1);
    expect(media.signal.aborted).toBe(false);
    await run.advance(1);
    expect(media.signal.aborted).toBe(true);
    expect(running(run, 'validate').input.plan).toMatchObject({ source: 'imds', username: 'azureuser', passwordProvided: false, customDataFound: false });
    expect(run.actor.getSnapshot().context.warnings).toContain(
      `provisioning media: not read within ${TEST_CONFIG.provisioning_media.timeout_secs} s; provisioning goes on without it`,
    );
  });

  it('IMDS with password logins on waits for the media, which may carry the password', async () => {
    const run = startRun(startup());
    await answerImds(run, METADATA_PASSWORD_LOGINS);
    expect(inState(run.actor.getSnapshot(), STATE.imdsDone, STATE.mediaReading)).toBe(true);

    await readMedia(run, MEDIA_WITH_USERNAME);
    expect(running(run, 'validate').input.plan).toMatchObject({ source: 'imds', username: 'azureuser', passwordAuthentication: true, passwordProvided: true });
  });
});
