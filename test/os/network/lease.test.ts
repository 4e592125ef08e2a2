/**
 * What each network stack is asked to do for a pool VM's lease once the host moved or attached its NIC
 * (src/os/network/lease.ts): nothing for the stacks that react to the carrier, ifdown then ifup of that NIC alone for
 * ifupdown, a new activation for NetworkManager; a command that fails is named in the error.
 */
import { describe, expect, it } from 'vitest';
import { renewalCommands, renewLease } from '../../../src/os/network/lease.js';
import type { ApplyDeps } from '../../../src/os/network/types.js';

function fakeDeps(fail: string | null = null) {
  const calls: string[][] = [];
  const deps: ApplyDeps = {
    run: async (argv) => {
      calls.push(argv);
      const failed = fail !== null && argv[0] === fail;
      return { exitCode: failed ? 1 : 0, signal: null, stdout: '', stderr: failed ? 'ifup: unknown interface eth1' : '' } as never;
    },
    log: { info: () => undefined, warn: () => undefined },
  };
  return { deps, calls };
}

describe('renewing a pool VM lease', () => {
  it('touches only the moved NIC: ifdown then ifup with ifupdown, nmcli device connect with NetworkManager', async () => {
    expect(renewalCommands('ifupdown', 'eth0')).toEqual([['ifdown', '--force', 'eth0'], ['ifup', 'eth0']]);
    expect(renewalCommands('networkmanager', 'eth1')).toEqual([['nmcli', 'device', 'connect', 'eth1']]);
    const { deps, calls } = fakeDeps();
    await expect(renewLease('ifupdown', 'eth0', deps)).resolves.toBe('ifupdown: ifdown --force eth0, then ifup eth0');
    // ifup runs in a transient unit of its own, so the dhclient it starts outlives bootstate's unit.
    expect(calls).toEqual([
      ['ifdown', '--force', 'eth0'],
      ['systemctl', 'stop', 'bootstate-ifup-eth0.service'],
      ['systemd-run', '--unit=bootstate-ifup-eth0.service', '--collect', '--service-type=oneshot', '--property=RemainAfterExit=yes', '--quiet', 'ifup', 'eth0'],
    ]);
  });

  it('asks networkd (and netplan, which renders for it) for nothing: it restarts DHCP on the carrier itself', async () => {
    for (const stack of ['networkd', 'netplan'] as const) {
      const { deps, calls } = fakeDeps();
      expect(await renewLease(stack, 'eth0', deps)).toBe(`${stack} restarts DHCP on eth0 when its carrier comes back: nothing to do`);
      expect(calls).toEqual([]);
    }
    const { deps } = fakeDeps();
    expect(await renewLease(null, 'eth0', deps)).toMatch(/no network stack detected/);
  });

  it('a command that fails is a SUBPROCESS_FAILED naming it; what follows it is not run', async () => {
    const { deps, calls } = fakeDeps('ifdown');
    await expect(renewLease('ifupdown', 'eth1', deps)).rejects.toMatchObject({ code: 'SUBPROCESS_FAILED', data: expect.arrayContaining([['interface', 'eth1']]) });
    expect(calls).toEqual([['ifdown', '--force', 'eth1']]);
  });
});
