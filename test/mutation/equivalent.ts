/**
 * Mutants that cannot change anything the outside world sees, each with its argument. A surviving mutant is
 * equivalent only if a rule here explains it; every other survivor is a hole in the tests.
 */
import type { AnyStateNode } from 'xstate';
import type { Mutant } from './mutants.js';

const inert = (n: AnyStateNode | undefined) =>
  !!n && n.type === 'final' && !n.entry.length && !n.exit.length && !n.tags.length && !(n.config as { output?: unknown }).output;

/** A compound state that does nothing on its own when (re-)entered. */
const bare = (n: AnyStateNode) => !n.entry.length && !n.exit.length && !n.invoke.length && !n.after.length && !n.tags.length;

/** The argument that `mutant` is equivalent, or null. */
export function equivalence(chart: string, mutant: Mutant): string | null {
  const r = mutant.retarget;
  if (r && inert(r.from) && inert(r.to) && r.from!.parent === r.to.parent && r.to.parent?.parent) {
    return `${r.from!.key} and ${r.to.key} are both final states of ${r.to.parent!.id} with no actions, tags or output: the parent only waits for its regions to be final, so which one is entered changes nothing.`;
  }
  if (r && r.from && r.to === r.from.parent && bare(r.to) && r.to.initial?.target?.[0] === r.from && mutant.edge.startsWith(`${r.to.id}.`)) {
    return `${r.to.id} has no entry, exit, actor or timer of its own and starts in ${r.from.key}: a transition from inside it that targets it instead of ${r.from.key} lands in the same state with the same effects.`;
  }
  for (const rule of RULES[chart] ?? []) if (rule.match.test(mutant.id)) return rule.argument;
  return null;
}

/** Arguments for single mutants no structural rule above explains. */
const RULES: Record<string, Array<{ match: RegExp; argument: string }>> = {
  monitor: [
    {
      match: /^monitor\.running\.versions\.measuring done checkVersions\[1\] retarget → monitor\.running\.versions\.starting$/,
      argument:
        "the transition's own action records versionsAvailable = true before the target is entered, and versions.starting (no entry, exit, actor or timer) goes on at once to done when versionsAvailable is true: the same final state with the same observation sent.",
    },
    {
      match: /^monitor\.running\.versions\.waiting after versionsPeriod\[0\] retarget → monitor\.running\.versions\.starting$/,
      argument:
        'versions.waiting is only entered while versionsAvailable is false (a run that starts with it true goes from starting to done, and a measurement that finds it true ends in done), so versions.starting goes on at once to measuring: the same state, reached with no effect of its own.',
    },
  ],
};
