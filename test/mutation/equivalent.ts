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

const RULES: Record<string, Array<{ match: RegExp; argument: string }>> = {
  report: [
    {
      match: /retarget → report\.(accepted|notAccepted)$/,
      argument:
        'accepted and notAccepted are final states with no actions or output of their own; the output (and so the exit code and message of `bootstate report`) reads only context.failure, and the command keeps no journal.',
    },
  ],
  provisioning: [
    {
      match: /^provisioning\.(readyNotAccepted|failedUnreported) entry #0 recordEnd entry dropped$/,
      argument:
        "outputOf reads context.end ?? { result: 'failed', reported: false }: exactly what readyNotAccepted and failedUnreported record, so a run ending there without recording it has the same output.",
    },
    {
      match:
        /^provisioning\.(provisioned entry #0 recordEnd entry moved → provisioning\.markingProvisioned|alreadyProvisioned entry #1 recordEnd entry moved → provisioning\.checkingMarker|notOnAzure entry #1 recordEnd entry moved → provisioning\.checkingPlatform|waitingInterrupted entry #0 recordEnd entry moved → provisioning\.preprovisioned\.waiting|readyNotAccepted entry #0 recordEnd entry moved → provisioning\.reportingReady(\.requesting)?|markerNotWritten entry #0 recordEnd entry moved → provisioning\.markingProvisioned|failed entry #0 recordEnd entry moved → provisioning\.reportingFailure\.requesting|failedUnreported entry #0 recordEnd entry moved → provisioning\.reportingFailure(\.requesting)?)$/,
      argument:
        'context.end is read only once the run is over (the output), and every final state records its own end on entry. Moved into the state the final is entered from, the record is made one step earlier on the same way in, and every other way out of that state ends in a final that overwrites it (or, for readyNotAccepted and failedUnreported, in outputOf\'s default, which is the same record).',
    },
    {
      match: /^provisioning\.reportingFailure\.(requesting error failureReport\[[01]\]|requesting error failureReport) action dropped #0 recordReportFailure$|^provisioning\.reportingFailure after failureReportTimeout\[0\] action dropped #0 recordReportTimeout$/,
      argument:
        'reportFailure is read only when failure is null (output, log detail); every way into reportingFailure sets failure, so recording why the failure report was refused changes nothing seen.',
    },
  ],
};
