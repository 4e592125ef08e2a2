/**
 * The network step seen from an image: which stack `bootstate network` renders for on every boot, and which of the
 * interfaces an Azure VM is likely to have (eth0…eth7: Azure's synthetic NICs are named so by the images that use
 * it, and a plan's MACs are unknown before a VM exists) the image already configures differently, so bootstate will
 * leave them to the image. Read under the root, never run.
 */
import type { Config } from '../config/defaults.js';
import { detectStack } from '../os/network/detect.js';
import { renderers } from '../os/network/renderers.js';
import type { BoundPlan, StackName } from '../os/network/types.js';
import type { Finding } from './finding.js';

/** The interfaces looked at: Azure VMs have up to eight NICs on most sizes. */
const PROBED = Array.from({ length: 8 }, (_, index) => `eth${index}`);

/** A plan standing for any VM: one DHCP NIC per probed name, with no MAC any file could name. */
function probePlan(): BoundPlan {
  const nics = PROBED.map((name, index) => ({
    index, name, mac: '', driver: 'hv_netvsc', primary: index === 0, metric: 100 * (index + 1), useDns: index === 0, static4: [], dhcp6: false, static6: [],
  }));
  return { nics, unbound: [], virtualFunctions: [] };
}

export interface NetworkView {
  stack: StackName | null;
  why: string;
  findings: Finding[];
}

/** The stack and what in the image the step would leave alone; nothing when `[network] enable = false`. */
export async function networkView(root: string, config: Config): Promise<NetworkView | null> {
  if (!config.network.enable) return null;
  const detected = await detectStack(root, config.network.stack);
  if (!detected.stack) {
    return {
      ...detected,
      findings: [{
        id: 'network-stack',
        severity: 'warns',
        problem: `no network stack to render IMDS's NICs and secondary IP addresses for (${detected.why}): a VM from this image gets its primary NIC's DHCP address only`,
        fix: 'enable systemd-networkd, NetworkManager, netplan or ifupdown, or name one in [network] stack; [network] enable = false if the image configures its network itself',
      }],
    };
  }
  const conflicts = await renderers[detected.stack].conflicts(root, probePlan());
  const findings: Finding[] = conflicts.map((c) => ({
    id: 'network-image-config',
    severity: 'handled',
    problem: `${c.interface} is configured by the image in ${c.file} (${c.why}): bootstate leaves it to the image and configures no address IMDS lists for it`,
    fix: `nothing, if that is meant; otherwise remove ${c.interface}'s configuration from ${c.file} so that IMDS's addresses reach it`,
  }));
  return { stack: detected.stack, why: detected.why, findings };
}
