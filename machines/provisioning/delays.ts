/** The provisioning chart's delays, by name: every retry interval and deadline, in ms, from the configuration. */
import { timerMs } from '../retry.js';
import { IMDS_HEAD_START_MS } from './head-start.js';
import type { ProvisioningContext } from './types.js';

type Args = { context: ProvisioningContext };

/** The period of an OS-disk pool VM's wait (delays.shutdownTick): systemd's start timeout is extended by it each time. */
export const SHUTDOWN_TICK_MS = 60_000;

/** Seconds the Guest Proxy Agent's check may take: the agent's own --wait, and a little more for the command itself. */
export const proxyAgentSecs = (context: ProvisioningContext) => context.config.azure_proxy_agent.wait_secs + 10;

/** Seconds the failure report may take: on SIGTERM a short budget, so the agent exits within 2 s. */
export const failureReportSecs = (context: ProvisioningContext) => (context.terminating ? 1.5 : context.config.wireserver.total_retry_timeout_secs);

export const delays = {
  imdsHeadStart: IMDS_HEAD_START_MS,
  imdsRetryInterval: ({ context }: Args) => timerMs(context.config.imds.retry_interval_secs),
  imdsTotalTimeout: ({ context }: Args) => timerMs(context.config.imds.total_retry_timeout_secs),
  /** Local work has a deadline too: a hung file system or command must not hold the first boot forever. */
  osTimeout: ({ context }: Args) => timerMs(context.config.os.timeout_secs),
  mediaTimeout: ({ context }: Args) => timerMs(context.config.provisioning_media.timeout_secs),
  proxyAgentTimeout: ({ context }: Args) => timerMs(proxyAgentSecs(context)),
  certificatesTotalTimeout: ({ context }: Args) => timerMs(context.config.certificates.total_retry_timeout_secs),
  hostnamePublishTimeout: ({ context }: Args) => timerMs(context.config.hostname_publishing.timeout_secs),
  /** Once terminating, retries come quickly so one more attempt fits the short budget. */
  wireserverRetryInterval: ({ context }: Args) =>
    context.terminating ? Math.min(200, timerMs(context.config.wireserver.retry_interval_secs)) : timerMs(context.config.wireserver.retry_interval_secs),
  wireserverTotalTimeout: ({ context }: Args) => timerMs(context.config.wireserver.total_retry_timeout_secs),
  reprovisionPollInterval: ({ context }: Args) => timerMs(context.config.preprovisioning.poll_interval_secs),
  nicDetachTimeout: ({ context }: Args) => timerMs(context.config.preprovisioning.nic_detach_timeout_secs),
  nicAttachTimeout: ({ context }: Args) => timerMs(context.config.preprovisioning.nic_attach_timeout_secs),
  /** How often an OS-disk pool VM's wait for its shutdown tells the service manager it goes on. */
  shutdownTick: SHUTDOWN_TICK_MS,
  failureReportTimeout: ({ context }: Args) => timerMs(failureReportSecs(context)),
};
