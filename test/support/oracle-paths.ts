/**
 * The two ways a small chart's oracle paths are used, for charts whose oracle's paths cover every state (the report
 * and network charts): as the mutation check's fixed paths (test/mutation/charts.ts), and as the model test's
 * walk, which stops at the first path where a chart disagrees with its oracle.
 */
import type { AnyStateMachine } from 'xstate';

/** One path the mutation check plays; its id stays the same across runs while the path exists (the kill-set's key). */
export interface CheckPath {
  id: string;
  name: string;
  play(machine: AnyStateMachine): Promise<void>;
}

/** `fixedPaths` and `firstDisagreement` over `paths()`, each named by `describe` and played by `play`. */
export function oracleChecks<Step>(paths: () => Step[][], describe: (steps: Step[]) => string, play: (machine: AnyStateMachine, steps: Step[]) => Promise<void>) {
  return {
    async fixedPaths(): Promise<CheckPath[]> {
      return paths().map((steps) => ({ id: `oracle ${describe(steps)}`, name: describe(steps), play: (machine) => play(machine, steps) }));
    },
    /** The first path on which `machine` and the oracle disagree, or null. */
    async firstDisagreement(machine: AnyStateMachine): Promise<{ path: string; message: string } | null> {
      for (const steps of paths()) {
        try {
          await play(machine, steps);
        } catch (error) {
          return { path: describe(steps), message: (error as Error).message };
        }
      }
      return null;
    },
  };
}
