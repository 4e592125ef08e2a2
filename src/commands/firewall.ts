/**
 * `bootstate firewall apply|check|remove`: the wireserver firewall (src/os/firewall.ts). `apply` is what
 * bootstate-firewall.service runs on every boot, before the network comes up; with `[firewall] enable = false` it
 * removes bootstate's rules instead. `check` exits 1 and names each missing rule; `remove` removes bootstate's
 * rules and nothing else. `--snapshot FILE` keeps nft's own listing of the table as applied, so that the monitor's
 * timer can re-check the rules every minute with nft and cmp alone (packaging/libexec/firewall-recheck) and start Node
 * only when they changed.
 */
import type { ParsedArgs } from '../cli/argv.js';
import { configFrom } from '../cli/options.js';
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { run, type Runner } from '../os/exec.js';
import { writeFileAtomic } from '../os/atomic.js';
import { applyFirewall, checkFirewall, firewallTool, listNftTable, removeFirewall } from '../os/firewall.js';

export interface FirewallIo {
  stdout(text: string): void;
  stderr(text: string): void;
}

const NO_TOOL = 'neither nft nor iptables is installed: install nftables (or iptables), or set [firewall] enable = false';

export async function runFirewall(values: ParsedArgs['values'], action: string, io: FirewallIo, runner: Runner = run): Promise<number> {
  const config = await configFrom(values.config as string | undefined);
  const address = config.wireserver.address;
  const snapshot = values.snapshot as string | undefined;
  if (snapshot !== undefined && action !== 'check') await rm(snapshot, { force: true });
  if (action === 'remove' || !config.firewall.enable) {
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
