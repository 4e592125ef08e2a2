/**
 * The provisioning chart built with its named placeholder actors, when this module is first imported: what the model
 * tests, the mutation check, `graph` and `trace` read. `bootstate provision` never imports it: it builds the chart
 * once, with its real actors (`createProvisioningMachine` in `src/provision/provision.ts`).
 */
import { createProvisioningMachine } from './provisioning.js';

export const provisioningMachine = createProvisioningMachine();
