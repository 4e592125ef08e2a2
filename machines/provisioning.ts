/**
 * The provisioning chart's public face: `createProvisioningMachine` and the types its actors and callers use. The
 * chart itself is in `machines/provisioning/`, one file a part (see its `index.ts`).
 */
export { HEALTH_FAILED, HEALTH_IN_PROGRESS, HEALTH_READY, type Health } from '../src/azure/health.js';
export { ZERO_VM_ID } from '../src/core/metadata.js';
export { createProvisioningMachine, IMDS_HEAD_START_MS, PLACEHOLDER_ACTORS, type ProvisioningActors, type ProvisioningEffects, type ProvisioningMachine } from './provisioning/index.js';
export type * from './provisioning/types.js';
