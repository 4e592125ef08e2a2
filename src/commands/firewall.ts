/**
 * `bootstate firewall apply|check|remove`: the wireserver firewall (src/firewall/firewall.ts). `apply` is what
 * bootstate-firewall.service runs on every boot, before the network comes up; with `[firewall] enable = false` it
 * removes bootstate's rules instead. `check` exits 1 and names each missing rule; `remove` removes bootstate's
 * rules and nothing else. `--snapshot FILE` keeps nft's own listing of the table as applied, so that
 * bootstate-firewall-recheck.timer can re-check the rules every 30 s with nft and cmp alone
 * (packaging/libexec/firewall-recheck) and start Node only when they changed.
 *
 * A security feature that errs stays closed: the firewall reads only its own two keys, so a broken value elsewhere in
 * the configuration leaves it working (with a warning), and when its own keys cannot be read it applies the rules
 * with the defaults (on, for the default wireserver address).
 */
import type { ParsedArgs } from '../cli/argv.js';
import { configFiles } from '../cli/options.js';
import { loadConfigOrOnly } from '../config/load.js';
import { DEFAULT_CONFIG } from '../config/defaults.js';
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';
import { isIPv4 } from 'node:net';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { run, type Runner } from '../system/exec.js';
import { writeFileAtomic } from '../system/atomic.js';
import { applyFirewall, checkFirewall, firewallTool, listNftTable, removeFirewall } from '../firewall/firewall.js';

export interface FirewallIo {
  stdout(text: string): void;
  stderr(text: string): void;
}

const NO_TOOL = 'neither nft nor iptables is installed: install nftables (or iptables), or set [firewall] enable = false';

/** The only keys the firewall reads. */
const FIREWALL_KEYS = { firewall: ['enable'], wireserver: ['address'] } as const;

/** What the firewall does: on or off, and for which address. */
interface FirewallSettings {
  enable: boolean;
  address: string;
}

/**
 * The firewall's two settings. A broken value in any other key is a warning: those keys are not read. When its own
 * keys cannot be read (a file that does not parse, a value of the wrong type, an address that is not IPv4), the
 * defaults: on, for the default address.
 */
export async function firewallSettings(configPath: string | undefined, io: FirewallIo): Promise<FirewallSettings> {
  const warn = (text: string) => io.stderr(`bootstate firewall: warning: ${text}\n`);
  const defaults = { enable: DEFAULT_CONFIG.firewall.enable, address: DEFAULT_CONFIG.wireserver.address };
  const loaded = await loadConfigOrOnly(configFiles(configPath), FIREWALL_KEYS);
  if ('onlyError' in loaded) {
    warn(`${(loaded.onlyError as Error).message}; using the defaults, [firewall] enable = true and [wireserver] address = "${defaults.address}"`);
    return defaults;
  }
  const { firewall, wireserver } = loaded.config;
  if (!isIPv4(wireserver.address)) {
    warn(`[wireserver] address "${wireserver.address}" is not an IPv4 address; using the defaults, [firewall] enable = true and [wireserver] address = "${defaults.address}"`);
    return defaults;
  }
  if ('error' in loaded) warn(`${(loaded.error as Error).message}; the firewall reads only [firewall] enable and [wireserver] address, and goes on with them`);
  return { enable: firewall.enable, address: wireserver.address };
}

export async function runFirewall(values: ParsedArgs['values'], action: string, io: FirewallIo, runner: Runner = run): Promise<number> {
  const snapshot = values.snapshot as string | undefined;
  if (snapshot !== undefined && action !== 'check') await rm(snapshot, { force: true });
  // `remove` needs no configuration: a broken one never keeps the rules from being taken away.
  const config = action === 'remove' ? { enable: false, address: '' } : await firewallSettings(values.config as string | undefined, io);
  const address = config.address;
  if (action === 'remove' || !config.enable) {
    if (action === 'check') {
      io.stdout('firewall: off ([firewall] enable = false), nothing to check\n');
      return EXIT_OK;
    }
    const removed = await removeFirewall(runner);
    for (const line of removed) io.stdout(`removed ${line}\n`);
    if (action === 'apply') io.stdout('firewall: off ([firewall] enable = false)\n');
    else if (removed.length === 0) io.stdout('firewall: no bootstate rules to remove\n');
    return EXIT_OK;
  }
  const tool = await firewallTool(runner);
  if (!tool) {
    io.stderr(`bootstate firewall: ${NO_TOOL}\n`);
    return EXIT_FAILURE;
  }
  if (action === 'check') {
    const { missing } = await checkFirewall(runner, tool, address);
    if (missing.length === 0) {
      io.stdout(`firewall: in place (${tool}): only root reaches ${address}, TCP port 53 excepted\n`);
      return EXIT_OK;
    }
    for (const line of missing) io.stdout(`firewall: ${line}\n`);
    io.stdout('firewall: not in place (bootstate firewall apply puts it back)\n');
    return EXIT_FAILURE;
  }
  const changed = await applyFirewall(runner, tool, address);
  if (snapshot !== undefined && tool === 'nft') {
    await mkdir(path.dirname(snapshot), { recursive: true, mode: 0o755 });
    await writeFileAtomic(snapshot, await listNftTable(runner), { mode: 0o600 });
  }
  io.stdout(`firewall: ${changed ? 'applied' : 'already in place'} (${tool}): only root reaches ${address}, TCP port 53 excepted\n`);
  return EXIT_OK;
}
