/**
 * Later hostname changes reach Azure DNS (WALinuxAgent's `Provisioning.MonitorHostName`): each monitor cycle compares
 * the kernel hostname with the one last published, kept in `<data_dir>/published-hostname` so a reboot does not
 * publish it again, and publishes a change once, through the DHCP backends the first boot uses
 * (src/os/hostname/hostname-publish.ts), within `hostname_publishing.timeout_secs`. Best effort: the name is recorded as
 * published after the attempt either way, and what went wrong is a warning. A restarted dhclient is a transient
 * service, not a child of the cycle: the cycle's sandbox (no capabilities, no packet sockets) would be its own.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { hostname as kernelHostname } from 'node:os';
import path from 'node:path';
import type { HostnamePublishingConfig } from '../config/defaults.js';
import { withDeadline } from '../core/signals.js';
import { run } from '../system/exec.js';
import { publishHostname } from '../os/hostname/hostname-publish.js';
import { PUBLISHED_FILE } from './published-hostname.js';

export interface HostnameWatchLog {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface HostnameWatchOptions {
  config: HostnamePublishingConfig;
  dataDir: string;
  log: HostnameWatchLog;
  signal?: AbortSignal;
  /** The current name; the kernel's by default. */
  current?: () => string;
}

export type HostnameWatchOutcome = 'off' | 'unchanged' | 'recorded' | 'published' | 'not published';

/** One comparison, and at most one publication. */
export async function watchHostname(options: HostnameWatchOptions): Promise<HostnameWatchOutcome> {
  const { config, log } = options;
  if (!config.enable || !config.monitor) return 'off';
  const name = (options.current ?? kernelHostname)();
  const file = path.join(options.dataDir, PUBLISHED_FILE);
  const last = await readFile(file, 'utf8').then((text) => text.trim(), () => null);
  if (last === name) return 'unchanged';
  // The first cycle after provisioning takes the name the first boot published as its starting point.
  if (last === null) {
    await record(file, name);
    return 'recorded';
  }
  const deadline = Date.now() + config.timeout_secs * 1000;
  const bound = withDeadline(options.signal, config.timeout_secs * 1000);
  const signal = bound.signal;
  let outcome: HostnameWatchOutcome = 'not published';
  try {
    const result = await publishHostname(name, config.backends, { root: '/', run, rootOwner: { uid: 0, gid: 0 } }, { probeRoot: '/', deadline, observe: true, dhclientUnder: 'service' }, signal);
    for (const warning of result.warnings ?? []) log.warn({ step: 'hostnamePublish', backend: result.backend }, warning);
    if (result.backend !== 'none') outcome = 'published';
    log.info({ step: 'hostnamePublish', backend: result.backend, previous: last }, result.detail ?? `hostname ${name} published`);
  } catch (error) {
    log.warn({ step: 'hostnamePublish', hostname: name }, `hostname not published: ${(error as Error).message}`);
  } finally {
    bound.clear();
  }
  await record(file, name);
  return outcome;
}

async function record(file: string, name: string): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  await mkdir(path.dirname(file), { recursive: true, mode: 0o755 });
  await writeFile(temporary, `${name}\n`, { mode: 0o644 });
  await rename(temporary, file);
}
