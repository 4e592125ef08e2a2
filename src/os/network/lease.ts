/**
 * A pool VM's lease on the customer's network (docs/preprovisioned.md): after its claim moved the NIC (Running) or
 * the host attached a new one (Savable), the NIC must get an address from the new network before `reprovisiondata`
 * can answer. systemd-networkd (and netplan, which renders for it) restarts DHCP on a carrier change by itself;
 * ifupdown's dhclient keeps the old lease until asked, so the NIC is taken down and up again through ifupdown (ifup
 * in a transient unit of its own, as the network step does, so its dhclient outlives bootstate's unit);
 * NetworkManager is asked to activate the device again. Only the NIC the host moved or attached is touched, and
 * only once it has moved: its old address is of no use on the new network.
 */
import type { StackName } from './types.js';
import { attempt, query } from './apply-common.js';
import type { ApplyDeps } from './types.js';
import { BootstateError } from '../../core/errors.js';
import { ifupOutside } from './apply-ifupdown.js';

/** What one stack is asked to do for `nic`, in order; an empty list: the stack does it by itself. */
export function renewalCommands(stack: StackName | null, nic: string): string[][] {
  switch (stack) {
    case 'ifupdown':
      return [
        ['ifdown', '--force', nic],
        ['ifup', nic],
      ];
    case 'networkmanager':
      return [['nmcli', 'device', 'connect', nic]];
    case 'networkd':
    case 'netplan':
    case null:
      return [];
  }
}

/**
 * Makes `stack` renew `nic`'s lease and says what was done (for the log).
 *
 * @throws BootstateError SUBPROCESS_FAILED naming the command that failed.
 */
export async function renewLease(stack: StackName | null, nic: string, deps: ApplyDeps): Promise<string> {
  const commands = renewalCommands(stack, nic);
  if (stack === null) return `no network stack detected: ${nic}'s lease is left to whatever configures it`;
  if (commands.length === 0) return `${stack} restarts DHCP on ${nic} when its carrier comes back: nothing to do`;
  for (const argv of commands) {
    // ifup's dhclient must outlive this run's unit: it runs in a transient unit of its own (apply-ifupdown.ts).
    const failed = argv[0] === 'ifup' ? await ifupOutside(deps, nic) : await attempt(deps, argv);
    if (failed) throw new BootstateError('SUBPROCESS_FAILED', failed, { data: [['interface', nic], ['error', failed]] });
  }
  return `${stack}: ${commands.map((c) => c.join(' ')).join(', then ')}`;
}

/** The interface the kernel routes `address` through, or null when `ip route get` cannot tell. */
export async function routeDevice(deps: ApplyDeps, address: string): Promise<string | null> {
  const out = await query(deps, ['ip', '-o', 'route', 'get', address]);
  return out ? (/\bdev (\S+)/.exec(out)?.[1] ?? null) : null;
}

/** The IPv4 addresses on `nic` (`ip -o -4 addr show dev NIC`), link-local left out; null when ip failed. */
export async function ipv4Of(deps: ApplyDeps, nic: string): Promise<string[] | null> {
  const out = await query(deps, ['ip', '-o', '-4', 'addr', 'show', 'dev', nic]);
  if (out === null) return null;
  return [...out.matchAll(/\binet (\d+\.\d+\.\d+\.\d+)\//g)].map((m) => m[1]!).filter((a) => !a.startsWith('169.254.'));
}
