/** The three health states a provisioning agent reports to the wireserver (docs/protocol.md#health-report-bodies), and the VM id used when none can be read. */
export const HEALTH_IN_PROGRESS = 'NotReady/Provisioning';
export const HEALTH_READY = 'Ready';
export const HEALTH_FAILED = 'NotReady/ProvisioningFailed';
export type Health = typeof HEALTH_IN_PROGRESS | typeof HEALTH_READY | typeof HEALTH_FAILED;

/** The VM id reported when product_uuid cannot be read (azure-init's convention). */
export const ZERO_VM_ID = '00000000-0000-0000-0000-000000000000';
