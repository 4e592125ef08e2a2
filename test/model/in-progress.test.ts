import { describe, expect, it } from 'vitest';
import { HEALTH_IN_PROGRESS } from '../../machines/provisioning.js';
import { startRun, startup, throughOs } from './harness.js';
import { METADATA } from './support.js';

describe('the InProgress report', () => {
  it('is aborted when the work finishes first, so it can never be sent after the final report', async () => {
    const run = startRun(startup());
    const inProgress = run.pending('inProgressReport');
    expect(inProgress.input.health).toBe(HEALTH_IN_PROGRESS);

    await run.resolve('media', null);
    await run.resolve('imds', METADATA);
    await throughOs(run);

    expect(run.actor.getSnapshot().value).toBe('markingReportPending');
    expect(inProgress.signal.aborted).toBe(true);
    expect(run.gates.some((g) => g.id === 'readyReport')).toBe(false);

    await run.resolve('pendingMarker');
    inProgress.resolve(undefined);
    await run.settle();
    expect(run.actor.getSnapshot().value).toEqual({ reportingReady: 'requesting' });
    expect(run.gates.filter((g) => g.id === 'inProgressReport')).toHaveLength(1);
  });
});
