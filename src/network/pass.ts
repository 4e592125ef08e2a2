/**
 * One `bootstate network` pass: the network chart (machines/network.ts) with its actors. IMDS's document is asked
 * for as provisioning asks for it (same request, retries and total deadline); the plan comes from its `network`
 * section (src/os/network/imds-network.ts), is bound to the interfaces this machine has (links.ts: a NIC lands on
 * the interface with its MAC and a synthetic driver, never on an SR-IOV VF), rendered for the image's network stack
 * (detect.ts, renderers.ts), then written and applied live in the order the stack needs (apply.ts).
 *
 * Fail safe: no plan, no stack or no IMDS keeps the image's configuration and bootstate's files of earlier boots as
 * they are; an interface the image configures differently is reported and left out; a secondary NIC that does not
 * come up is a warning. Never throws: the outcome says what happened.
 */
import { createActor, fromPromise, toPromise } from 'xstate';
import { networkMachine, type NetworkRunOutput } from '../../machines/network.js';
import { timerMs } from '../../machines/retry.js';
import { imdsDocumentFrom, requestInstanceMetadata } from '../azure/imds.js';
import type { Config } from '../config/defaults.js';
import type { Logger } from '../logging/log.js';
import { networkPlanFrom } from '../os/network/imds-network.js';
import { bindPlan, readLinks } from '../os/network/links.js';
import { detectStack } from '../os/network/detect.js';
import { renderers, type Renderer } from '../os/network/renderers.js';
import { writeAndApply } from '../os/network/apply.js';
import { writeNetworkFiles } from '../os/network/write.js';
import type { ApplyDeps, BoundPlan, FileChange, ImageConflict, NetworkPlan, RenderedFile, StackName } from '../os/network/types.js';
import { describeNic, summarize } from './summary.js';

export interface NetworkEnv {
  /** The machine's root: `/`, or a directory standing for it (tests). */
  root: string;
  /** Where the interfaces are listed: `/sys/class/net`. */
  sysClassNet: string;
  /** Whether the written files are made live: not when `root` is an image mounted somewhere. */
  live: boolean;
  run: ApplyDeps['run'];
  log: Logger;
}

/** What a pass did, for the log line, KVP and `bootstate doctor`. */
export interface NetworkOutcome extends NetworkRunOutput {
  stack: StackName | null;
  plan: BoundPlan | null;
  conflicts: ImageConflict[];
  change: FileChange | null;
  warnings: string[];
  /** One line: what was configured, left alone and why. */
  summary: string;
}

const STEP = { step: 'network' } as const;

/** The deadline of reading the machine, writing and applying, after IMDS: a stack's reload that hangs ends here. */
export const CONFIGURE_TIMEOUT_SECS = 120;

/** Runs one pass; never throws. */
export async function networkPass(config: Config, env: NetworkEnv): Promise<NetworkOutcome> {
  const state: PassState = { plan: null, bound: null, backend: null, owned: [], conflicts: [], rendered: [], change: null, warnings: [] };
  const warn = (message: string, extra: object = {}) => {
    state.warnings.push(message);
    env.log.warn({ ...STEP, ...extra }, message);
  };
  const actors = networkActors(config, env, state, warn);
  const actor = createActor(networkMachine.provide({ actors }), {
    input: {
      retryIntervalMs: timerMs(config.imds.retry_interval_secs),
      totalTimeoutMs: timerMs(config.imds.total_retry_timeout_secs),
      configureTimeoutMs: timerMs(CONFIGURE_TIMEOUT_SECS),
    },
  });
  actor.subscribe((snapshot) => env.log.debug({ ...STEP, state: JSON.stringify(snapshot.value) }, 'network step state'));
  actor.start();
  const output = await toPromise(actor);
  if (output.result === 'kept' && output.why) {
    const message = `the image's network configuration is kept: ${output.why}`;
    // No stack to render for, and nothing asked beyond the primary NIC's DHCPv4, which the image does itself.
    if (state.bound && !state.backend && !asksMoreThanDhcp(state.bound)) env.log.info(STEP, message);
    else warn(message);
  }
  const outcome = { ...output, stack: state.backend?.stack ?? null, plan: state.bound, conflicts: state.conflicts, change: state.change, warnings: state.warnings };
  return { ...outcome, summary: summarize(outcome) };
}

type PassState = {
  plan: NetworkPlan | null;
  bound: BoundPlan | null;
  backend: Renderer | null;
  owned: string[];
  conflicts: ImageConflict[];
  rendered: RenderedFile[];
  change: FileChange | null;
  warnings: string[];
};

function networkActors(config: Config, env: NetworkEnv, state: PassState, warn: (m: string, extra?: object) => void) {
  return {
    fetchDocument: fromPromise<unknown, void>(async ({ signal }) => imdsDocumentFrom(await requestInstanceMetadata({ config: config.imds, signal }), config.imds)),
    plan: fromPromise<{ planned: boolean; why: string | null }, { document: unknown }>(async ({ input }) => {
      const result = networkPlanFrom(input.document);
      for (const w of result.warnings) warn(`IMDS network section: ${w.message}`, { code: w.code });
      state.plan = result.plan;
      if (!result.plan) return { planned: false, why: result.warnings.map((w) => w.message).join('; ') || 'no network section' };
      return { planned: true, why: null };
    }),
    inspect: fromPromise<{ stack: string | null; why: string | null }, void>(async () => inspect(config, env, state, warn)),
    render: fromPromise<void, void>(async () => {
      const backend = state.backend!;
      const skip = new Set(state.conflicts.map((c) => c.interface));
      const declared = backend.declared ? await backend.declared(env.root, state.bound!) : new Set<string>();
      state.rendered = backend.render(state.bound!, skip, declared);
    }),
    apply: fromPromise<void, void>(async ({ signal }) => {
      // A NIC with no interface this boot may be one whose file is there: nothing of bootstate's is removed on a
      // boot whose plan is not bound in full.
      const removable = state.bound!.unbound.length === 0 ? state.owned : [];
      if (removable.length < state.owned.length) env.log.info(STEP, "bootstate's files of earlier boots are kept: a planned NIC has no interface this boot");
      if (!env.live) {
        state.change = await writeNetworkFiles(env.root, state.rendered, removable);
        env.log.info({ ...STEP, root: env.root }, `${state.change.written.length} file(s) written under ${env.root}, ${state.change.removed.length} removed: nothing is applied live`);
        return;
      }
      const { change, outcome } = await writeAndApply(env.root, state.backend!.stack, state.bound!, state.rendered, removable, { run: env.run, log: env.log, signal });
      state.change = change;
      const { written, removed, unchanged } = change;
      env.log.info({ ...STEP, written: written.map((f) => f.path), removed }, `${state.backend!.stack}: ${written.length} file(s) written, ${removed.length} removed, ${unchanged.length} unchanged`);
      for (const w of outcome.warnings) warn(`${w.interface}: ${w.message}`, { interface: w.interface });
      if (outcome.applied.length) env.log.info({ ...STEP, applied: outcome.applied }, `applied live: ${outcome.applied.join(', ')}`);
    }),
  };
}

async function inspect(config: Config, env: NetworkEnv, state: PassState, warn: (m: string, extra?: object) => void) {
  const links = await readLinks({ sysClassNet: env.sysClassNet, run: env.run });
  const bound = bindPlan(state.plan!, links, config.network.drivers);
  state.bound = bound;
  for (const { nic, why } of bound.unbound) warn(`NIC ${nic.index} (${nic.mac}) is not configured: ${why}`, { mac: nic.mac });
  for (const vf of bound.virtualFunctions) env.log.info({ ...STEP, interface: vf.name }, `${vf.name} (driver ${vf.driver ?? 'unknown'}) shares a planned NIC's MAC: an SR-IOV virtual function, left alone`);
  for (const nic of bound.nics) env.log.info({ ...STEP, interface: nic.name }, `planned: ${describeNic(nic)}`);
  const detected = await detectStack(env.root, config.network.stack);
  if (!detected.stack) return { stack: null, why: `no network stack to render for: ${detected.why}` };
  env.log.info({ ...STEP, stack: detected.stack }, `rendering for ${detected.stack}: ${detected.why}`);
  state.backend = renderers[detected.stack];
  state.owned = await state.backend.ownedFiles(env.root);
  state.conflicts = await state.backend.conflicts(env.root, bound);
  for (const c of state.conflicts) warn(`${c.interface} is left to the image's own configuration in ${c.file}: ${c.why}`, { interface: c.interface, file: c.file });
  return { stack: detected.stack, why: null };
}

/** Whether the plan asks for anything an image's DHCP on its primary NIC does not give: another NIC, address or IPv6. */
function asksMoreThanDhcp(plan: BoundPlan): boolean {
  return plan.unbound.length > 0 || plan.nics.some((nic) => !nic.primary || nic.static4.length > 0 || nic.static6.length > 0 || nic.dhcp6);
}
