/**
 * A network pass told in one line (the journal's last word, KVP's event, `bootstate doctor`), and one NIC of the
 * plan in a phrase.
 */
import { describeFailure } from '../core/errors.js';
import type { BoundNic } from '../os/network/types.js';
import type { NetworkOutcome } from './pass.js';

/** `eth1 (00:0d:3a:…, metric 200): DHCPv4 + 10.0.1.5/24, DHCPv6`. */
export function describeNic(nic: BoundNic): string {
  const extras = [...nic.static4, ...nic.static6].map((a) => `${a.address}/${a.prefix}`);
  const parts = [`DHCPv4${nic.useDns ? '' : ' (no DNS)'}`, ...extras, ...(nic.dhcp6 ? ['DHCPv6'] : [])];
  return `${nic.name} (${nic.mac}, ${nic.primary ? 'primary, ' : ''}metric ${nic.metric}): ${parts.join(' + ')}`;
}

/** `configured networkd: eth0, eth1; left alone: vf0 (VF); 1 warning` or `kept: <why>`. */
export function summarize(outcome: Omit<NetworkOutcome, 'summary'>): string {
  if (outcome.result === 'kept') return `kept the image's network configuration: ${outcome.why ?? 'no plan'}`;
  if (outcome.result === 'failed') return `failed: ${outcome.failure ? describeFailure(outcome.failure) : (outcome.why ?? 'unknown error')}`;
  const nics = outcome.plan?.nics.filter((n) => !outcome.conflicts.some((c) => c.interface === n.name)).map((n) => n.name) ?? [];
  const vfs = outcome.plan?.virtualFunctions.map((l) => `${l.name} (VF)`) ?? [];
  const left = [...vfs, ...outcome.conflicts.map((c) => `${c.interface} (the image's)`)];
  const warnings = outcome.warnings.length ? `; ${outcome.warnings.length} warning${outcome.warnings.length === 1 ? '' : 's'}` : '';
  return `configured ${outcome.stack}: ${nics.join(', ') || 'no interface'}${left.length ? `; left alone: ${left.join(', ')}` : ''}${warnings}`;
}
