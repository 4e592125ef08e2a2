/**
 * The network step run against a booted VM from the host, with the project's own code (IMDS plan, link binding,
 * the stack's renderer, the writer and the live apply): its files go into the VM's root through /proc/PID/root, its
 * commands run inside the VM through nsenter. It stands in for `bootstate network` (the .deb's
 * bootstate-network.service) until that exists, and tells apart a fault of the step from one of its unit.
 */
import type { ApplyOutcome, FileChange, StackName } from '../../src/os/network/types.js';
import { networkPlanFrom } from '../../src/os/network/imds-network.js';
import { bindPlan, readLinks } from '../../src/os/network/links.js';
import { renderers } from '../../src/os/network/renderers.js';
import { writeAndApply } from '../../src/os/network/apply.js';
import { run, type Runner } from '../../src/system/exec.js';
import type { Boot } from './machine.js';

export interface StepResult {
  change: FileChange;
  outcome: ApplyOutcome;
  conflicts: string[];
  virtualFunctions: string[];
  unbound: string[];
}

/** Runs the step once for `imds` (the document the fabric serves) on `stack`, binding NICs with `drivers`. */
export async function runNetworkStepFromHost(boot: Boot, stack: StackName, imds: unknown, drivers: string[]): Promise<StepResult> {
  const root = `/proc/${boot.pid}/root`;
  const inVm: Runner = (argv, options) => run(['nsenter', '-t', String(boot.pid), '-a', ...argv], options);
  const planned = networkPlanFrom(imds);
  if (!planned.plan) throw new Error(`no plan from the IMDS document: ${JSON.stringify(planned.warnings)}`);
  const links = await readLinks({ sysClassNet: `${root}/sys/class/net`, run: inVm });
  const bound = bindPlan(planned.plan, links, drivers);
  const renderer = renderers[stack];
  const conflicts = await renderer.conflicts(root, bound);
  const declared = renderer.declared ? await renderer.declared(root, bound) : new Set<string>();
  const rendered = renderer.render(bound, new Set(conflicts.map((c) => c.interface)), declared);
  const { change, outcome } = await writeAndApply(root, stack, bound, rendered, await renderer.ownedFiles(root), {
    run: inVm,
    log: { info: () => undefined, warn: () => undefined },
  });
  return {
    change,
    outcome,
    conflicts: conflicts.map((c) => `${c.interface}: ${c.file}: ${c.why}`),
    virtualFunctions: bound.virtualFunctions.map((l) => l.name),
    unbound: bound.unbound.map((u) => `${u.nic.mac}: ${u.why}`),
  };
}
