/**
 * The real actors of the provisioning chart: one `fromPromise` per step, each taking its dependencies
 * explicitly so tests and the demo can swap the OS backend, the clock-free parts and the fabric addresses.
 */
import { fromCallback, fromPromise } from 'xstate';
import type { Logger } from 'pino';
import {
  HEALTH_FAILED,
  HEALTH_IN_PROGRESS,
  type ImdsInput,
  type KvpEvent,
  type PollInput,
  type ProvisioningPlan,
  type ReportInput,
} from '../../machines/provisioning.js';
import type { FirstImdsRequest } from './first-imds-request.js';
import { fetchInstanceMetadataOnce, instanceMetadataFrom } from '../azure/imds.js';
import { pollErrorKind, shouldLogPoll } from '../azure/pps.js';
import { fetchReprovisionDataOnce, parseReprovisionData } from '../azure/reprovision.js';
import type { InstanceMetadata, MediaMetadata } from '../core/metadata.js';
import { HealthReporter } from '../azure/wireserver.js';
import type { Config } from '../config/defaults.js';
import { BootstateError, toFailure, type Failure } from '../core/errors.js';
import type { KvpTelemetry } from '../kvp/telemetry.js';
import type { HostKeyType } from '../os/ssh/host-keys.js';
import type { MarkerStore, Provisioner, StepResult } from '../os/provisioner.js';
import { selectSshKeys } from '../os/ssh/key-policy.js';
import { machineHostname, validateHostname, validateUsername } from '../os/validate.js';
import { scrubData, type SecretStore } from '../core/secrets.js';
import type { EncodedReports } from './encoded-reports.js';
import { fetchCertificates } from './certificates.js';
import { poolNicActors } from './pool-nics.js';

export interface ProvisioningDeps {
  log: Logger;
  provisioner: Provisioner;
  markers(config: Config): MarkerStore;
  /**
   * The IMDS request src/provision/provision.ts sent before the chart was loaded: the first IMDS attempt takes it instead of
   * sending one.
   */
  firstImds?: FirstImdsRequest | null;
  readMedia(config: Config, secrets: SecretStore, signal: AbortSignal): Promise<MediaMetadata | null>;
  secrets: SecretStore;
  /** Where text for the console goes (the host keys' fingerprints): the unit's stdout, which systemd copies there. */
  console(text: string): void;
  reporter: HealthReporter;
  reports: EncodedReports;
  kvp: KvpTelemetry | null;
  /** Where the transport key's private directory is made (default `/run`). */
  transportParent?: string;
  /** Called after each KVP report attempt: written, or the reason it was not. */
  onKvpReport?(outcome: { written: boolean; error?: string }): void;
}

type PlanInput = { config: Config; plan: ProvisioningPlan };

/** What the actor builders share: the OS step runner and the attempt counter of the retried requests. */
interface Kit {
  /** Runs one OS step: its failure logged (unless aborted), its warnings, its line with the time it took, its console text. */
  logged<R extends StepResult>(name: string, signal: AbortSignal, run: () => Promise<R>): Promise<R>;
  /** The next attempt of a retried request (`key`): how many so far, since when. */
  nextAttempt(key: string): Attempts;
  /** Logs a retryable failure with how much of the budget is left. */
  retryWarning(what: string, entry: Attempts, budgetSecs: number, intervalSecs: number, error: BootstateError): void;
}
type Attempts = { count: number; started: number };

/** Builds the `actors` map handed to `createProvisioningMachine`. */
export function provisioningActors(deps: ProvisioningDeps) {
  const kit = actorKit(deps);
  return {
    ...reportActors(deps, kit),
    ...gatheringActors(deps, kit),
    ...osActors(deps, kit),
    ...hostKeyActors(deps, kit),
    ...poolActors(deps),
    ...poolNicActors(deps),
    ...markerActors(deps),
  };
}

function actorKit(deps: ProvisioningDeps): Kit {
  const { log } = deps;
  const logged = async <R extends StepResult>(name: string, signal: AbortSignal, run: () => Promise<R>): Promise<R> => {
    const started = Date.now();
    const result = await run().catch((error: unknown) => {
      if (!signal.aborted) logFailure(deps.secrets, log, name, error);
      throw error;
    });
    for (const warning of result.warnings ?? []) log.warn({ step: name, backend: result.backend }, warning);
    log.info({ step: name, backend: result.backend, ms: Date.now() - started }, result.detail ?? `${name} done`);
    if (result.console) deps.console(result.console);
    return result;
  };
  // Attempts per retried request (IMDS, each health), counted from the first so a failure says how many and how much
  // of the total budget is left; the chart owns the real deadline, this only reports it.
  const series = new Map<string, Attempts>();
  const nextAttempt = (key: string) => {
    const entry = series.get(key) ?? { count: 0, started: Date.now() };
    series.set(key, entry);
    entry.count += 1;
    return entry;
  };
  const retryWarning = (what: string, entry: Attempts, budgetSecs: number, intervalSecs: number, error: BootstateError) => {
    const left = Math.max(0, budgetSecs - (Date.now() - entry.started) / 1000);
    log.warn(
      { code: error.code, reason: error.reason, attempt: entry.count, remaining_secs: Math.round(left) },
      `${what} attempt ${entry.count} failed: ${error.message}; next attempt in ${intervalSecs} s, ${Math.round(left)} s of ${budgetSecs} s left`,
    );
  };
  return { logged, nextAttempt, retryWarning };
}

/** The KVP writer and the health reports. */
function reportActors(deps: ProvisioningDeps, { nextAttempt, retryWarning }: Kit) {
  const { log } = deps;
  return {
    kvpWriter: fromCallback<KvpEvent>(({ receive }) => {
      receive((event) => {
        if (event.type !== 'kvp.report' || !deps.kvp) return;
        const encoded =
          event.health === HEALTH_FAILED && event.failure
            ? deps.reports.failure(event.failure, event.vmId, event.ppsType)
            : deps.reports.success(event.vmId, event.ppsType);
        const written = deps.kvp.writeReport(encoded);
        const error = written ? undefined : (deps.kvp.lastError ?? 'unknown error');
        // The HTTP report still goes; this line is how the operator learns the host's copy is missing.
        if (!written) log.error({ step: 'kvp', reason: 'kvp report not written', health: event.health }, `KVP report not written: ${error}`);
        deps.onKvpReport?.({ written, error });
      });
      // No flush on stop: the runner flushes once after the final state, with the final state's span included.
      return undefined;
    }),

    reportHealth: fromPromise<void, ReportInput>(async ({ input, signal }) => {
      if (input.health === HEALTH_IN_PROGRESS && !input.config.wireserver.report_in_progress) return;
      const description =
        input.health === HEALTH_FAILED && input.failure ? deps.reports.failure(input.failure, input.vmId, input.ppsType) : undefined;
      const attempt = nextAttempt(`report ${input.health}`);
      let sent = true;
      let written = false;
      const onSent = () => {
        written = true;
      };
      try {
        sent = (await deps.reporter.post({ config: input.config.wireserver, health: input.health, vmId: input.vmId, description, signal, log, onSent })).sent;
      } catch (error) {
        // A Savable pool VM's NIC is unplugged (or the VM saved) once the host has the report: the answer is lost.
        if (input.answerMayBeLost && written && !signal.aborted && error instanceof BootstateError && error.code === 'HTTP_TRANSPORT') {
          log.info({ state: input.health, pps_type: input.ppsType, error: error.message }, 'pool Ready sent; its answer was lost, as expected once the host detaches the NIC');
          return;
        }
        const { wireserver } = input.config;
        if (error instanceof BootstateError && error.retryable && !signal.aborted) {
          retryWarning(`${input.health} report`, attempt, wireserver.total_retry_timeout_secs, wireserver.retry_interval_secs, error);
        }
        throw error;
      }
      log.info({ state: input.health }, sent ? 'health report accepted' : 'health report not sent');
    }),
  };
}

/** IMDS and the provisioning media. */
function gatheringActors(deps: ProvisioningDeps, kit: Kit) {
  const { log } = deps;
  return {
    fetchMetadata: fetchMetadata(deps, kit),
    readMedia: fromPromise<MediaMetadata | null, { config: Config; claimed: boolean }>(async ({ input, signal }) => {
      if (!input.config.provisioning_media.enable) return null;
      if (input.claimed) {
        log.info({ step: 'media' }, 'claimed pool VM: the provisioning media holds the placeholder and is not read');
        return null;
      }
      try {
        const media = await deps.readMedia(input.config, deps.secrets, signal);
        warnVerbatimCustomData(media, log);
        return media;
      } catch (error) {
        if (!signal.aborted) {
          const failure = toFailure(error);
          log.warn({ step: 'media', code: failure.code, reason: failure.reason }, `provisioning media unusable: ${(error as Error)?.message ?? failure.reason}`);
        }
        throw error;
      }
    }),
  };
}

/**
 * One IMDS attempt. The IMDS request is the one Ready waits on: the chart holds the media read and the host keys until
 * this attempt's request has been written to its socket or the attempt has ended, and hears which through the
 * `written` callback of the input (machines/provisioning/head-start.ts).
 */
function fetchMetadata(deps: ProvisioningDeps, { nextAttempt, retryWarning }: Kit) {
  const { log } = deps;
  return fromPromise<InstanceMetadata, ImdsInput>(async ({ input, signal }) => {
    const attempt = nextAttempt('imds');
    let told = false;
    const sent = () => {
      if (told || signal.aborted) return;
      told = true;
      input.written?.();
    };
    try {
      const first = input.sent ? (deps.firstImds?.take(signal) ?? null) : null;
      void first?.sent.then(sent);
      const metadata = await (first
        ? first.response.then((res) => instanceMetadataFrom(res, input.config.imds, deps.secrets))
        : fetchInstanceMetadataOnce({ config: input.config.imds, signal, secrets: deps.secrets, onSent: sent })
      ).finally(sent);
      if (metadata.userData === 'invalid') log.warn({ step: 'imds' }, 'IMDS compute.userData is not base64; it is not saved');
      return metadata;
    } catch (error) {
      const { imds } = input.config;
      if (error instanceof BootstateError && error.retryable && !signal.aborted) {
        retryWarning('IMDS', attempt, imds.total_retry_timeout_secs, imds.retry_interval_secs, error);
      }
      throw error;
    }
  });
}

/** The plan's validation, the Guest Proxy Agent, and the OS steps. */
function osActors(deps: ProvisioningDeps, { logged }: Kit) {
  const { log } = deps;
  const step = <In extends { config: Config } = PlanInput>(name: string, run: (input: In, signal: AbortSignal) => Promise<StepResult>) =>
    fromPromise<void, In>(async ({ input, signal }) => {
      await logged(name, signal, () => run(input, signal));
    });
  return {
    validatePlan: fromPromise<ProvisioningPlan, PlanInput & { mediaFailure: Failure | null }>(async ({ input }) => {
      try {
        checkCustomData(input, log);
        return await validatePlan(input, deps);
      } catch (error) {
        logFailure(deps.secrets, log, 'validate', error);
        throw error;
      }
    }),
    checkProxyAgent: fromPromise<void, { config: Config }>(async ({ signal }) => {
      const started = Date.now();
      try {
        const result = await deps.provisioner.checkProxyAgent(signal);
        log.info({ step: 'proxyAgent', backend: result.backend, ms: Date.now() - started }, result.detail ?? 'Guest Proxy Agent ready');
      } catch (error) {
        if (!signal.aborted) logFailure(deps.secrets, log, 'proxyAgent', error);
        throw error;
      }
    }),
    setHostname: step('hostname', ({ plan }, signal) => deps.provisioner.setHostname(plan.hostname, signal)),
    publishHostname: publishHostname(deps),
    createUser: step('user', ({ plan }, signal) =>
      deps.provisioner.createUser({ username: plan.username, groups: plan.groups, passwordProvided: plan.passwordProvided }, signal),
    ),
    setPassword: step('password', ({ plan }, signal) => deps.provisioner.setPassword(plan.username, deps.secrets, signal)),
    writeSshKeys: step('ssh-keys', ({ plan }, signal) =>
      deps.provisioner.writeSshKeys({ username: plan.username, keys: plan.sshKeys, passwordAuthentication: plan.passwordAuthentication }, signal),
    ),
    fetchCertificates: fromPromise<string[], PlanInput>(({ input, signal }) => fetchCertificates(deps, input, signal)),
    configureSshd: step('sshd', ({ config, plan }, signal) =>
      config.ssh.configure_sshd_password_authentication
        ? deps.provisioner.configureSshd(plan.passwordAuthentication, signal)
        : Promise.resolve({ backend: 'none', detail: 'sshd configuration disabled by config' }),
    ),
    saveCustomData: step('custom-data', (_input, signal) => deps.provisioner.saveCustomData(deps.secrets, signal)),
  };
}

/** Best effort: its warnings and its failure are logged as warnings, and the chart goes on either way. */
function publishHostname({ log, provisioner }: ProvisioningDeps) {
  return fromPromise<void, PlanInput>(async ({ input, signal }) => {
    const started = Date.now();
    let result;
    try {
      result = await provisioner.publishHostname(input.plan.hostname, signal);
    } catch (error) {
      if (!signal.aborted) {
        const failure = toFailure(error);
        log.warn({ step: 'hostnamePublish', code: failure.code, reason: failure.reason }, `hostname not published: ${(error as Error)?.message ?? failure.reason}`);
      }
      throw error;
    }
    for (const warning of result.warnings ?? []) log.warn({ step: 'hostnamePublish', backend: result.backend }, warning);
    log.info({ step: 'hostnamePublish', backend: result.backend, ms: Date.now() - started }, result.detail ?? 'hostname published');
  });
}

/** This VM's own host keys: made while IMDS is asked, once its request has left (the chart's head start). */
function hostKeyActors({ provisioner }: ProvisioningDeps, { logged }: Kit) {
  return {
    // Its output: the types left for addHostKeys, made in the background (logins do not wait for them).
    regenerateHostKeys: fromPromise<HostKeyType[], { config: Config }>(async ({ signal }) => {
      return (await logged('host-keys', signal, () => provisioner.regenerateHostKeys(signal))).later;
    }),
    addHostKeys: fromPromise<void, { config: Config; types: HostKeyType[] }>(async ({ input, signal }) => {
      await logged('host-keys', signal, () => provisioner.addHostKeys(input.types, signal));
    }),
    completeHostKeys: fromPromise<void, { config: Config }>(async ({ signal }) => {
      await logged('host-keys', signal, () => provisioner.completeHostKeys(signal));
    }),
  };
}

/** A pool VM's wait: one poll of `reprovisiondata`, until the customer's document arrives. */
function poolActors(deps: ProvisioningDeps) {
  const { log } = deps;
  return {
    pollReprovisionData: fromPromise<MediaMetadata, PollInput>(async ({ input, signal }) => {
      let text: string;
      try {
        text = await fetchReprovisionDataOnce({ config: input.config.imds, signal });
      } catch (error) {
        const failure = toFailure(error);
        const kind = pollErrorKind(failure);
        if (signal.aborted) throw error;
        // A poll that ends the wait is always said; "not yet" only as often as shouldLogPoll allows.
        if (!failure.retryable) logFailure(deps.secrets, log, 'pps', error);
        else if (shouldLogPoll(input.attempt, kind, input.previousError)) {
          log.info({ step: 'pps', attempt: input.attempt, code: failure.code, kind }, `reprovisiondata poll ${input.attempt} failed: ${(error as Error).message}`);
        }
        throw error;
      }
      // Whatever the placeholder's media held (password, custom data) belongs to nobody now.
      deps.secrets.clear();
      let media: MediaMetadata;
      try {
        media = await parseReprovisionData(text, { secrets: deps.secrets });
      } catch (error) {
        logFailure(deps.secrets, log, 'pps', error);
        throw error;
      }
      warnVerbatimCustomData(media, log);
      log.info({ step: 'pps', polls: input.attempt }, `claimed after ${input.attempt} poll(s): provisioning with the customer's ovf-env.xml`);
      return media;
    }),
  };
}

/** The markers: waiting for reuse, report pending, provisioned. */
function markerActors({ log, markers }: ProvisioningDeps) {
  return {
    markWaitingForReuse: fromPromise<void, { config: Config; vmId: string; ppsType?: string }>(async ({ input }) => {
      await markers(input.config).markWaitingForReuse(input.vmId, input.ppsType);
      log.info({ step: 'pps', vmId: input.vmId, pps_type: input.ppsType }, 'pool VM reported Ready; waiting to be claimed');
    }),
    markWaitingForShutdown: fromPromise<void, { config: Config; vmId: string }>(async ({ input }) => {
      await markers(input.config).markWaitingForShutdown(input.vmId);
      log.info({ step: 'pps', vmId: input.vmId }, 'OS-disk pool VM reported Ready; waiting for the host to shut it down');
    }),
    markReportPending: fromPromise<void, { config: Config; vmId: string }>(async ({ input }) => {
      await markers(input.config).markReportPending(input.vmId);
    }),
    markProvisioned: fromPromise<void, { config: Config; vmId: string }>(async ({ input }) => {
      await markers(input.config).markProvisioned(input.vmId);
    }),
  };
}

/**
 * Checks the plan before anything runs: username, hostname (reduced to its first label) and the SSH keys, of
 * which every valid one is kept and every other one skipped with a warning (see key-policy.ts). Media that could
 * not be used fails the run when it mattered: a password longer than 72 characters always (the VM owner set it),
 * a malformed ovf-env.xml when password logins are on and no key is usable (the password was the only way in).
 */
async function validatePlan(
  { plan, mediaFailure }: PlanInput & { mediaFailure: Failure | null },
  deps: Pick<ProvisioningDeps, 'provisioner' | 'log'>,
): Promise<ProvisioningPlan> {
  if (mediaFailure?.code === 'PASSWORD_TOO_LONG') throw fromFailure(mediaFailure, 'the provisioning media carries a password longer than 72 characters');
  if (deps.provisioner.validateUsername) await deps.provisioner.validateUsername(plan.username);
  else await validateUsername(plan.username);
  const hostname = machineHostname(validateHostname(plan.hostname));
  const { keys, skipped } = selectSshKeys(plan.sshKeys, plan.passwordAuthentication);
  for (const { key, problem } of skipped) {
    deps.log.warn({ step: 'validate', key, problem }, `ssh key skipped: ${key} ${problem}`);
  }
  if (mediaFailure?.code === 'OVF_INVALID' && plan.passwordAuthentication && keys.length === 0) {
    throw fromFailure(mediaFailure, 'password logins are on, no ssh key is usable, and the password was in the unusable ovf-env.xml');
  }
  return { ...plan, hostname, sshKeys: keys };
}

function fromFailure(failure: Failure, message: string): BootstateError {
  return new BootstateError(failure.code, message, { data: failure.data });
}

/**
 * The platform said the owner gave custom data but none arrived (cloud-init's MissingCustomData,
 * docs/protocol.md#failure-reasons): a warning, or a failure with `[custom_data] require = true`.
 */
function checkCustomData({ config, plan }: PlanInput, log: Logger): void {
  if (!plan.hasCustomData || plan.customDataFound) return;
  const message = 'IMDS hasCustomData is true but no CustomData arrived in ovf-env.xml';
  if (!config.custom_data.require) {
    log.warn({ step: 'custom-data' }, `${message}; continuing ([custom_data] require = false)`);
    return;
  }
  throw new BootstateError('MISSING_CUSTOM_DATA', message, {
    data: [['error', message]],
  });
}

/** Logs a failed step at error level with its kind and supporting data, the run's secrets scrubbed out (a failed command's stderr is the command's to write). */
function logFailure(secrets: SecretStore, log: Logger, step: string, error: unknown): void {
  const failure = toFailure(error);
  const data = scrubData(secrets, failure.data.filter(([k]) => k !== 'stack_base64'));
  log.error({ step, code: failure.code, reason: failure.reason, data: Object.fromEntries(data) }, `${step} failed: ${(error as Error)?.message ?? failure.reason}`);
}

/** CustomData that was not base64 is saved as received; its owner should know why the bytes look as they do. */
function warnVerbatimCustomData(media: MediaMetadata | null, log: Logger): void {
  if (media?.customDataEncoding === 'verbatim') {
    log.warn({ step: 'custom-data', device: media.device }, 'CustomData is not base64: saved as received');
  }
}
