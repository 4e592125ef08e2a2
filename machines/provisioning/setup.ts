/**
 * The chart's vocabulary: every actor it invokes (as a named placeholder: the chart performs no I/O), every guard,
 * delay and action, by name, each group in its own file (actors.ts, guards.ts, delays.ts, actions.ts). The state
 * files build on `chart` (`chart.createStateConfig`), so each is typed against exactly these names.
 */
import { setup } from 'xstate';
import type { Health } from '../../src/azure/health.js';
import { actionsOf, type ProvisioningEffects } from './actions.js';
import { PLACEHOLDER_ACTORS, type ProvisioningActors } from './actors.js';
import { delays } from './delays.js';
import { guards } from './guards.js';
import type * as T from './types.js';

export { PLACEHOLDER_ACTORS, type ProvisioningActors, type ProvisioningEffects };

/**
 * The chart's setup; `actors` replace the placeholders of the same names and `effects` are the direct effects (a
 * run sets it up with the real ones).
 */
export const provisioningSetup = (actors: Partial<ProvisioningActors> = {}, effects: ProvisioningEffects = {}) =>
  setup({
    types: {
      context: {} as T.ProvisioningContext,
      events: {} as T.ProvisioningEvent,
      input: {} as T.ProvisioningInput,
      output: {} as T.ProvisioningOutput,
      tags: {} as Health,
    },
    actors: { ...PLACEHOLDER_ACTORS, ...actors },
    guards,
    delays,
    actions: actionsOf(effects),
  });

/** The chart's setup with its placeholder actors: what every state file builds on. */
export const chart = provisioningSetup();
