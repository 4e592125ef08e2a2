/** The three health states a provisioning agent reports to the wireserver (docs/protocol.md#health-report-bodies). */
export const HEALTH_IN_PROGRESS = 'NotReady/Provisioning';
export const HEALTH_READY = 'Ready';
export const HEALTH_FAILED = 'NotReady/ProvisioningFailed';
export type Health = typeof HEALTH_IN_PROGRESS | typeof HEALTH_READY | typeof HEALTH_FAILED;
