/**
 * The provisioning chart's retry loop (the shared builder of machines/retry.ts, bound to this chart) and the one
 * place that names where a failure goes: the failure report, or the end that leaves Ready for the next boot.
 */
import { retryFor, withError } from '../retry.js';
import { chart } from './setup.js';

export { withError } from '../retry.js';

/** Builds the state of one of this chart's retry loops. */
export const retried = retryFor(chart);

/** Where every failure of the run goes: the ProvisioningFailed report. */
export const FAIL = '#provisioning.reportingFailure';

/** A stop once the report-pending marker is down: Ready is left for the next boot. */
export const READY_LEFT = '#provisioning.readyNotAccepted';

/** Any step's error fails the run: recorded, then the failure report. */
export const failRun = { target: FAIL, actions: { type: 'recordFailure', params: withError } } as const;
