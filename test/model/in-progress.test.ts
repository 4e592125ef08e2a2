import { describe, expect, it } from 'vitest';
import { HEALTH_IN_PROGRESS } from '../../machines/provisioning.js';
import { completeEach, gather, hasStarted, running, startsOf, throughOs } from './gates.js';
import { startRun, startup } from './harness.js';

describe('the InProgress report', () => {
  it('is aborted when the work finishes first, so it can never be sent after the final report', async () => {
    const run = startRun(startup());
    const inProgress = running(run, 'inProgressReport');
    expect(inProgress.input.health).toBe(HEALTH_IN_PROGRESS);

    await gather(run);
    await throughOs(run);

    // The report-pending marker is written while the report may still be on its way; Ready waits for it to end.
    expect(running(run, 'pendingMarker')).toBeDefined();
    expect(hasStarted(run, 'readyReport')).toBe(false);

    await completeEach(run, ['pendingMarker', 'hostnamePublish']);
    expect(inProgress.signal.aborted).toBe(true);
    expect(run.actor.getSnapshot().value).toEqual({ reportingReady: 'requesting' });
    inProgress.resolve(undefined);
    await run.settle();
    expect(run.actor.getSnapshot().value).toEqual({ reportingReady: 'requesting' });
    expect(startsOf(run, 'inProgressReport')).toHaveLength(1);
  });
});
