import { mkdtempSync, rmSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { nativeAddon, nativeAddonStatus } from '../../src/system/native-addon.js';
import { SdNotifier } from '../../src/system/sd-notify.js';
import { startNotifyReceiver, type NotifyReceiver } from '../support/notify-receiver.js';

let dir: string;
let receivers: NotifyReceiver[] = [];
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'bootstate-notify-'));
});
afterEach(async () => {
  await Promise.all(receivers.map((r) => r.stop()));
  receivers = [];
  rmSync(dir, { recursive: true, force: true });
});

async function receiver(address: string): Promise<NotifyReceiver> {
  const r = await startNotifyReceiver(address);
  receivers.push(r);
  return r;
}

const abstractName = () => `@bootstate-test-${process.pid}-${Math.random().toString(16).slice(2)}`;

describe("the native addon's notify", () => {
  it('loads here with both functions', () => {
    expect(nativeAddonStatus()).toBe('loaded');
    expect(typeof nativeAddon()!.notify).toBe('function');
  });

  it('sends one datagram to a socket path, from our own PID', async () => {
    const r = await receiver(path.join(dir, 'notify'));
    expect(nativeAddon()!.notify(r.address, 'STATUS=hello\nREADY=1\n')).toBe(0);
    const message = await r.waitFor(() => true);
    expect(message).toMatchObject({ pid: process.pid, lines: ['STATUS=hello', 'READY=1'] });
  });

  it('sends to an abstract socket, whose address is the name without a trailing NUL', async () => {
    const r = await receiver(abstractName());
    expect(nativeAddon()!.notify(r.address, 'READY=1\n')).toBe(0);
    expect((await r.waitFor(() => true)).lines).toEqual(['READY=1']);
    // The same name with a trailing NUL is another address: nobody listens there.
    expect(nativeAddon()!.notify(`${r.address}\0`, 'READY=1\n')).not.toBe(0);
  });

  it('returns an errno instead of throwing: no listener, a name too long, an address family it does not speak', () => {
    const { errno } = constants;
    expect(nativeAddon()!.notify(path.join(dir, 'nobody'), 'READY=1\n')).toBe(errno.ENOENT);
    expect(nativeAddon()!.notify(`/${'x'.repeat(200)}`, 'READY=1\n')).toBe(errno.ENAMETOOLONG);
    expect(nativeAddon()!.notify(`@${'x'.repeat(200)}`, 'READY=1\n')).toBe(errno.ENAMETOOLONG);
    expect(nativeAddon()!.notify('vsock:2:1234', 'READY=1\n')).toBe(errno.EAFNOSUPPORT);
    expect(() => (nativeAddon() as unknown as { notify(a: unknown, b: unknown): number }).notify(1, 'x')).toThrow(TypeError);
  });
});

describe('SdNotifier', () => {
  it('sends READY=1 once, a STATUS line only when it changes, and EXTEND_TIMEOUT_USEC only before READY and when it moves the deadline on', async () => {
    const r = await receiver(path.join(dir, 'notify'));
    let now = 0;
    const notify = new SdNotifier({ socket: r.address, now: () => now });
    notify.status('waiting for IMDS: attempt 1, 300 s left', 310_000_000);
    notify.status('waiting for IMDS: attempt 1, 300 s left');
    now = 5_000;
    notify.status('waiting for IMDS: attempt 1, 300 s left', 305_000_000.4);
    notify.status('waiting for IMDS: attempt 2, 295 s left', 300_000_000);
    now = 10_000;
    notify.status('configuring the OS', 310_000_000);
    notify.ready();
    notify.ready();
    notify.status('reporting Ready: attempt 2', 10_000_000);
    notify.status('provisioned');
    await r.waitFor((m) => m.lines.includes('STATUS=provisioned'));
    expect(r.messages().map((m) => m.lines)).toEqual([
      ['STATUS=waiting for IMDS: attempt 1, 300 s left', 'EXTEND_TIMEOUT_USEC=310000000'],
      ['STATUS=waiting for IMDS: attempt 2, 295 s left'],
      ['STATUS=configuring the OS', 'EXTEND_TIMEOUT_USEC=310000000'],
      ['READY=1'],
      ['STATUS=reporting Ready: attempt 2'],
      ['STATUS=provisioned'],
    ]);
    expect(notify.isReady).toBe(true);
  });

  it('puts a status on one line', async () => {
    const r = await receiver(abstractName());
    const notify = new SdNotifier({ socket: r.address });
    notify.ready('failed:\nIMDS_FAILED');
    expect((await r.waitFor(() => true)).lines).toEqual(['READY=1', 'STATUS=failed: IMDS_FAILED']);
  });

  it('does nothing and loads nothing outside systemd', () => {
    let loaded = 0;
    const notify = new SdNotifier({ socket: undefined, addon: () => (loaded++, nativeAddon()) });
    notify.status('x', 1);
    notify.ready();
    expect(notify.active).toBe(false);
    expect(loaded).toBe(0);
  });

  it('takes NOTIFY_SOCKET out of the environment, so the commands it runs cannot speak for the unit', async () => {
    const r = await receiver(path.join(dir, 'notify'));
    process.env.NOTIFY_SOCKET = r.address;
    const notify = SdNotifier.fromEnvironment();
    expect(process.env.NOTIFY_SOCKET).toBeUndefined();
    notify.ready();
    expect((await r.waitFor(() => true)).lines).toEqual(['READY=1']);
    expect(SdNotifier.fromEnvironment().active).toBe(false);
  });

  it('warns once when the socket refuses the datagrams', () => {
    const warnings: string[] = [];
    const notify = new SdNotifier({ socket: path.join(dir, 'gone'), warn: (m) => warnings.push(m) });
    notify.status('a', 1);
    notify.ready();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/cannot tell systemd STATUS, EXTEND_TIMEOUT_USEC through .*gone: ENOENT/);
  });

  describe('without the addon', () => {
    it("falls back to systemd-notify --pid, which as root sends with our PID, as NotifyAccess=main requires", async () => {
      expect(process.getuid?.(), 'the fallback test runs as root (systemd-notify may then send for another PID)').toBe(0);
      const r = await receiver(path.join(dir, 'notify'));
      const warnings: string[] = [];
      const notify = new SdNotifier({ socket: r.address, addon: () => null, warn: (m) => warnings.push(m) });
      notify.status('reading the provisioning media', 40_000_000);
      notify.ready();
      await notify.flush();
      await r.waitFor((m) => m.lines.includes('READY=1'));
      // Each systemd-notify's barrier may arrive after its message: wait for the second one.
      await r.waitFor((m) => m.lines.includes('BARRIER=1') && r.messages().filter((n) => n.lines.includes('BARRIER=1')).length >= 2);
      expect(warnings).toEqual([]);
      // systemd 252's systemd-notify then waits on a BARRIER=1 of its own (from its own PID), which the manager
      // answers before any access check.
      const all = r.messages();
      expect(all.filter((m) => m.pid !== process.pid).map((m) => m.lines)).toEqual([['BARRIER=1'], ['BARRIER=1']]);
      const messages = all.filter((m) => m.pid === process.pid);
      // systemd-notify adds MAINPID= for --pid: the same PID, which systemd already knows as the main one.
      expect(messages.map((m) => m.lines.filter((l) => !l.startsWith('MAINPID=')))).toEqual([
        ['STATUS=reading the provisioning media', 'EXTEND_TIMEOUT_USEC=40000000'],
        ['READY=1'],
      ]);
      for (const m of messages) expect(m.lines.filter((l) => l.startsWith('MAINPID='))).toEqual([`MAINPID=${process.pid}`]);
    });

    it('sends to an abstract socket too', async () => {
      const r = await receiver(abstractName());
      const notify = new SdNotifier({ socket: r.address, addon: () => null });
      notify.ready();
      await notify.flush();
      expect((await r.waitFor(() => true)).lines).toContain('READY=1');
    });

    it('warns once, naming why, when systemd-notify is missing too, and stops trying', async () => {
      const warnings: string[] = [];
      let runs = 0;
      const notify = new SdNotifier({
        socket: path.join(dir, 'notify'),
        addon: () => null,
        systemdNotify: path.join(dir, 'no-such-systemd-notify'),
        runner: async (argv, options) => {
          runs++;
          return (await import('../../src/system/exec.js')).run(argv, options);
        },
        warn: (m) => warnings.push(m),
      });
      notify.status('a');
      notify.status('b');
      notify.ready();
      await notify.flush();
      expect(runs).toBe(1);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/systemd is not told when logins may start: the native addon is not in use \(.*\) and .*no-such-systemd-notify is missing/);
    });
  });
});
