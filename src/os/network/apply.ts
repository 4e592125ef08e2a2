/**
 * Makes the network step's files take effect while the VM runs, per stack, never taking the primary NIC's address
 * away: secondaries go through the stack's own reload (networkctl reload, netplan's generated files + reload, ifup,
 * nmcli), the primary only gets additions (`ip addr add`, a default route with its metric) and its files take over
 * from the next boot. A secondary that does not come up is a warning in the outcome; nothing here throws for it.
 *
 * `writeAndApply` is the entry point: the order of writing and applying matters per stack, which `apply` alone
 * (the backend contract's, for files already written) cannot arrange:
 * - networkd: the secondaries' files are written and reloaded first, the primary's after the reload, so the
 *   reload never sees the primary's file change (a changed file makes networkd drop and re-lease the link).
 * - netplan: one YAML holds every NIC; it is written, and only the secondaries' generated networkd files are made
 *   live (apply-netplan.ts), so the primary's generated file changes at the next boot only.
 * - ifupdown: a secondary whose stanza changes or goes is taken down (ifdown) before the writer touches its file,
 *   because ifdown needs the old stanza; it comes up again (ifup) after.
 * - NetworkManager: written, then reloaded; the profiles apply by name.
 * Addresses bootstate's earlier file for the primary listed and the plan no longer does are removed live, and only
 * when the live address is not a lease (apply's `stale`); the previous text comes from the writer's beforeChange.
 */
import path from 'node:path';
import { reloadNetworkd } from './apply-networkd.js';
import { applyIfupdown, ifdownBefore } from './apply-ifupdown.js';
import { applyNetplan } from './apply-netplan.js';
import { applyNetworkManager } from './apply-networkmanager.js';
import { addressesIn, applyPrimaryLive, Outcome } from './apply-common.js';
import type { Address, ApplyDeps, ApplyOutcome, BoundPlan, FileChange, RenderedFile, StackName } from './types.js';
import { writeNetworkFiles } from './write.js';

type Apply = (plan: BoundPlan, change: FileChange, deps: ApplyDeps, outcome: Outcome, stale: Address[]) => Promise<void>;

const primaryOf = (plan: BoundPlan) => plan.nics.find((nic) => nic.primary);

const STACKS: Record<StackName, Apply> = {
  async networkd(plan, change, deps, outcome, stale) {
    await reloadNetworkd(plan, change, deps, outcome);
    const primary = primaryOf(plan);
    if (primary) await applyPrimaryLive(primary, deps, outcome, stale);
  },
  async netplan(plan, change, deps, outcome, stale) {
    await applyNetplan(plan, deps, outcome);
    const primary = primaryOf(plan);
    if (primary) await applyPrimaryLive(primary, deps, outcome, stale);
  },
  ifupdown: (plan, change, deps, outcome, stale) => applyIfupdown(plan, change, deps, outcome, stale),
  networkmanager: (plan, change, deps, outcome, stale) => applyNetworkManager(plan, change, deps, outcome, stale),
};

/** The backend contract's apply for `stack`, for files already on disk (prefer writeAndApply, which orders both). */
export function applyFor(stack: StackName): (plan: BoundPlan, change: FileChange, deps: ApplyDeps) => Promise<ApplyOutcome> {
  return async (plan, change, deps) => {
    const outcome = new Outcome(deps);
    await STACKS[stack](plan, change, deps, outcome, []);
    return outcome.result();
  };
}

export interface Applied {
  change: FileChange;
  outcome: ApplyOutcome;
}

/**
 * Writes `rendered` (removing bootstate's `owned` files not rendered now) and applies it live on `stack`, in the
 * order the stack needs (see the file comment). A failure to write throws; a failure to apply is a warning.
 *
 * @example const { change, outcome } = await writeAndApply('/', 'networkd', bound, backend.render(bound, skip), await backend.ownedFiles('/'), deps)
 */
export async function writeAndApply(root: string, stack: StackName, plan: BoundPlan, rendered: RenderedFile[], owned: string[], deps: ApplyDeps): Promise<Applied> {
  const outcome = new Outcome(deps);
  const primary = primaryOf(plan);
  const stale: Address[] = [];
  const collectStale = staleCollector(primary?.name, primary?.mac, rendered, stale);
  if (stack === 'networkd') {
    const isPrimary = (file: RenderedFile) => primary !== undefined && file.interfaces.includes(primary.name);
    const held = rendered.filter(isPrimary);
    const heldPaths = new Set(held.map((file) => path.posix.normalize(file.path)));
    const first = await writeNetworkFiles(root, rendered.filter((f) => !isPrimary(f)), owned.filter((p) => !heldPaths.has(path.posix.normalize(p))), {
      beforeChange: collectStale,
    });
    await reloadNetworkd(plan, first, deps, outcome);
    const last = await writeNetworkFiles(root, held, [], { beforeChange: collectStale });
    if (primary) await applyPrimaryLive(primary, deps, outcome, stale);
    const change = { written: [...first.written, ...last.written], removed: first.removed, unchanged: [...first.unchanged, ...last.unchanged] };
    return { change, outcome: outcome.result() };
  }
  const ifdown = stack === 'ifupdown' ? ifdownBefore(plan, deps, outcome) : null;
  const change = await writeNetworkFiles(root, rendered, owned, {
    async beforeChange(file, previous) {
      await collectStale(file, previous);
      await ifdown?.(file, previous);
    },
  });
  await STACKS[stack](plan, change, deps, outcome, stale);
  return { change, outcome: outcome.result() };
}

/** A beforeChange that notes the addresses an earlier file for the primary listed and its new text does not. */
function staleCollector(name: string | undefined, mac: string | undefined, rendered: RenderedFile[], stale: Address[]) {
  return async (file: string, previous: string): Promise<void> => {
    if (name === undefined) return;
    const next = rendered.find((f) => path.posix.normalize(f.path) === file);
    const forPrimary = next ? next.interfaces.includes(name) : new RegExp(`\\b${name}\\b`).test(previous) || (mac !== undefined && previous.toLowerCase().includes(mac));
    if (!forPrimary) return;
    const keep = new Set(addressesIn(next?.text ?? '').map((a) => `${a.address}/${a.prefix}`));
    stale.push(...addressesIn(previous).filter((a) => !keep.has(`${a.address}/${a.prefix}`)));
  };
}
