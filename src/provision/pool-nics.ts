/**
 * The actors of a pool VM's network (docs/preprovisioned.md): a Savable VM's waits for the host to detach its NIC and
 * hot-attach the customer's, the probe that finds the primary NIC among those attached, and, while a Running or
 * Savable VM polls, the watch of its NIC's carrier and the renewal of its lease through the OS's stack. The waits
 * are kernel link events (src/os/network/nic-events.ts); the chart owns every deadline.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { fromPromise } from 'xstate';
import type { Logger } from 'pino';
import type { AttachedNic, LeaseInput, NicWaitInput, ProbeInput } from '../../machines/provisioning.js';
import { request } from '../azure/http.js';
import type { Config } from '../config/defaults.js';
import { BootstateError, toFailure } from '../core/errors.js';
import { withDeadline } from '../core/signals.js';
import { detectStack } from '../os/network/detect.js';
import { renewLease, routeDevice } from '../os/network/lease.js';
import { attempt } from '../os/network/apply-common.js';
import { waitForAddress, waitForCarrierSwitch, waitForNicAttach, waitForNicDetach } from '../os/network/nic-events.js';
import type { ApplyDeps } from '../os/network/types.js';
import { run } from '../system/exec.js';

/** How long a NIC being tried may take to get a lease before the next one is tried. */
export const PROBE_LEASE_SECS = 30;

export interface PoolNicDeps {
  log: Logger;
  /** The root whose network stack is detected (default `/`). */
  networkRoot?: string;
}

/**
 * The commands of a pool actor run under its signal: the chart's deadline, a TERMINATE or the claim ends them with
 * the actor, so no `ifdown`/`ifup` or `ip` goes on changing a NIC after the state that asked for it is gone.
 */
const applyDeps = (log: Logger, signal: AbortSignal): ApplyDeps => ({
  run: (argv, options) => run(argv, { ...options, signal }),
  log,
  signal,
});

/** The stack that configures this VM's network, as `[network] stack` or the image says. */
async function stackOf(deps: PoolNicDeps, config: Config) {
  return (await detectStack(deps.networkRoot ?? '/', config.network.stack)).stack;
}

/** The actors the chart's pool region invokes for its network. */
export function poolNicActors(deps: PoolNicDeps) {
  const { log } = deps;
  return {
    waitForNicDetach: fromPromise<string, { config: Config }>(async ({ signal }) => {
      const name = await waitForNicDetach({ signal });
      log.info({ step: 'pps', interface: name }, name ? `the host detached ${name}` : 'no NIC left: the host detached it before the wait began');
      return name;
    }),
    waitForNicAttach: fromPromise<AttachedNic, NicWaitInput>(async ({ input, signal }) => {
      const nic = await waitForNicAttach({ signal, tried: input.tried });
      log.info({ step: 'pps', interface: nic.name, mac: nic.mac }, `network interface ${nic.name} (${nic.mac}) is attached`);
      return nic;
    }),
    probePrimaryNic: fromPromise<void, ProbeInput>(async ({ input, signal }) => {
      try {
        await probePrimary(deps, input, signal);
      } catch (error) {
        // The chart goes on to the next NIC without a word: the reason is told here.
        if (!signal.aborted) log.info({ step: 'pps', interface: input.nic.name, error: toFailure(error).reason }, (error as Error)?.message ?? toFailure(error).reason);
        throw error;
      }
    }),
    waitForCarrierSwitch: fromPromise<string, { config: Config }>(async ({ signal }) => {
      const name = await waitForCarrierSwitch({ signal });
      log.info({ step: 'pps', interface: name }, `${name}'s carrier went down and up: the host moved it, its lease is renewed`);
      return name;
    }),
    renewLease: fromPromise<void, LeaseInput>(async ({ input, signal }) => {
      const stack = await stackOf(deps, input.config);
      const done = await renewLease(stack, input.nic, applyDeps(log, signal));
      log.info({ step: 'pps', interface: input.nic, stack }, `lease on ${input.nic}: ${done}`);
    }),
  };
}

/** How long a NIC that has its address may take to get the route to IMDS too (a DHCP client adds it just after). */
export const ROUTE_SETTLE_MS = 5000;

/**
 * The interface the kernel routes `address` through, once it is `nic` or ROUTE_SETTLE_MS have passed: a DHCP client
 * adds the address first and the default route a moment later, and a probe that asked in between would rule the
 * primary NIC out for good. A few quick questions within a bound, not a watch that runs on.
 */
async function routedThrough(apply: ApplyDeps, address: string, nic: string, signal: AbortSignal): Promise<string | null> {
  const until = Date.now() + ROUTE_SETTLE_MS;
  for (;;) {
    const dev = await routeDevice(apply, address);
    if (dev === nic || Date.now() >= until || signal.aborted) return dev;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Not the primary NIC (or not one that can be used): retryable, so the chart tries the next one. */
const notPrimary = (nic: string, why: string) =>
  new BootstateError('PPS_NIC_FAILED', `${nic} is not the primary network interface: ${why}`, { data: [['interface', nic], ['error', why]], retryable: true });

/**
 * Link up, a lease through the OS's stack (within PROBE_LEASE_SECS), IMDS routed through this NIC and answering
 * there: then it is the primary NIC. Any HTTP answer counts; no answer within PROBE_IMDS_SECS means the fabric is not
 * behind it.
 */
async function probePrimary(deps: PoolNicDeps, { config, nic: { name } }: ProbeInput, signal: AbortSignal): Promise<void> {
  const { log } = deps;
  const apply = applyDeps(log, signal);
  const up = await attempt(apply, ['ip', 'link', 'set', 'dev', name, 'up']);
  if (up) throw notPrimary(name, up);
  const stack = await stackOf(deps, config);
  try {
    log.info({ step: 'pps', interface: name, stack }, `lease on ${name}: ${await renewLease(stack, name, apply)}`);
  } catch (error) {
    throw notPrimary(name, toFailure(error).data.find(([k]) => k === 'error')?.[1] ?? toFailure(error).reason);
  }
  const leased = withDeadline(signal, PROBE_LEASE_SECS * 1000);
  const address = await waitForAddress({ signal: leased.signal, nic: name })
    .catch(() => {
      // The usual cause: the image configures its network for the pool NIC only (its MAC, or a name it no longer has).
      const why = `no IPv4 address within ${PROBE_LEASE_SECS} s from ${stack ?? 'the OS'}`;
      log.warn(
        { step: 'pps', interface: name, stack },
        `${name}: ${why}; an image whose network configuration matches only the pool NIC (by MAC or name) leaves a hot-attached NIC unconfigured (docs/preprovisioned.md)`,
      );
      throw notPrimary(name, why);
    })
    .finally(leased.clear);
  const imds = new URL(config.imds.endpoint);
  const dev = await routedThrough(apply, imds.hostname, name, signal);
  if (dev !== name) throw notPrimary(name, `IMDS is routed through ${dev ?? 'no interface'}`);
  try {
    const status = await imdsStatus(imds, config, signal);
    log.info({ step: 'pps', interface: name, address, status }, `${name} (${address}) is the primary network interface: IMDS answers through it`);
  } catch (error) {
    if (signal.aborted) throw error;
    throw notPrimary(name, `IMDS does not answer through it within ${PROBE_IMDS_SECS} s (${(error as Error).message})`);
  }
}

/** How long the probe asks IMDS through a NIC before ruling it out, and how long one question may take at most. */
export const PROBE_IMDS_SECS = 60;
const PROBE_QUESTION_MS = 10_000;

/**
 * The status IMDS answers with, asked again a second after a question that got none, until PROBE_IMDS_SECS have
 * passed (a deadline no question outlasts): a NIC just attached may lose its first packets while its network is set
 * up, and a NIC ruled out is never tried again, so one lost question would leave the VM waiting for a NIC that never
 * comes.
 */
async function imdsStatus(imds: URL, config: Config, signal: AbortSignal): Promise<number> {
  const probe = withDeadline(signal, PROBE_IMDS_SECS * 1000);
  try {
    for (;;) {
      try {
        const res = await request(imds.toString(), {
          method: 'GET',
          headers: { Metadata: 'true' },
          connectTimeoutMs: Math.min(config.imds.connection_timeout_secs * 1000, PROBE_QUESTION_MS),
          requestTimeoutMs: Math.min(config.imds.request_timeout_secs * 1000, PROBE_QUESTION_MS),
          readBody: false,
          signal: probe.signal,
        });
        return res.status;
      } catch (error) {
        if (probe.signal.aborted) throw error;
        await sleep(1000, undefined, { signal: probe.signal });
      }
    }
  } finally {
    probe.clear();
  }
}
