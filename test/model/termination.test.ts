import { describe, expect, it } from 'vitest';
import { HEALTH_FAILED } from '../../machines/provisioning.js';
import { BootstateError } from '../../src/core/errors.js';
import { acceptPlan, complete, fail, gather, running } from './gates.js';
import { startRun, startup } from './harness.js';

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
