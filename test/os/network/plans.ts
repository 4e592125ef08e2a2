/** The bound plans the network renderers' tests share: two NICs and three NICs, as IMDS would ask for them. */
import type { BoundNic, BoundPlan } from '../../../src/os/network/types.js';

function nic(index: number, name: string, extra: Partial<BoundNic>): BoundNic {
  return {
    index,
    name,
    mac: `00:0d:3a:00:00:0${index + 1}`,
    driver: 'hv_netvsc',
    primary: index === 0,
    metric: 100 * (index + 1),
    useDns: index === 0,
    static4: [],
    dhcp6: false,
    static6: [],
    ...extra,
  };
}

/** NIC0: two IPv4 addresses and one IPv6 (DHCPv6); NIC1: one IPv4. NIC0's SR-IOV VF shares its MAC. */
export const TWO_NICS: BoundPlan = {
  nics: [nic(0, 'eth0', { static4: [{ address: '10.0.0.5', prefix: 24 }], dhcp6: true }), nic(1, 'eth1', {})],
  unbound: [],
  virtualFunctions: [{ name: 'enP1s1', mac: '00:0d:3a:00:00:01', driver: 'mlx5_core', master: 'eth0' }],
};

/** NIC0: one IPv4; NIC1: three IPv4 (/24 and /26) and two IPv6; NIC2: one IPv4 and one IPv6. */
export const THREE_NICS: BoundPlan = {
  nics: [
    nic(0, 'eth0', {}),
    nic(1, 'eth1', {
      static4: [{ address: '10.0.1.5', prefix: 24 }, { address: '10.0.2.7', prefix: 26 }],
      dhcp6: true,
      static6: [{ address: 'fd00:0:0:1::6', prefix: 64 }],
    }),
    nic(2, 'eth2', { dhcp6: true }),
  ],
  unbound: [],
  virtualFunctions: [],
};

export const PLANS = { 'two-nics': TWO_NICS, 'three-nics': THREE_NICS } as const;
