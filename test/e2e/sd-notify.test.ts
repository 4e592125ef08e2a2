/**
 * What the built agent tells systemd under Type=notify, received by a real AF_UNIX datagram socket (the socket
 * systemd would hand it in NOTIFY_SOCKET): STATUS lines while it works, EXTEND_TIMEOUT_USEC while the start job
 * waits, READY=1 once, as soon as the OS is configured — while the Ready report is still being retried — and the
 * same through systemd-notify(1) when the native addon is off. Each VM is a namespace sandbox with the fake fabric
 * on Azure's addresses (boot.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withVm, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox } from './ns.js';
import { startNotifyReceiver, type NotifyMessage } from '../support/notify-receiver.js';

interface Run { vm: Vm; boot: BootResult; messages: NotifyMessage[] }

const vms: Vm[] = [];
let dir: string;
let runs: { happy: Promise<Run>; retried: Promise<Run>; fallback: Promise<Run> };

/** Boots `vm` with a receiver at `address` (an abstract one lives in the VM's network namespace). */
async function bootWithReceiver(vm: Vm, address: string, env: NodeJS.ProcessEnv = {}): Promise<Run> {
  const receiver = await startNotifyReceiver(address, address.startsWith('@') ? { netns: vm.netns.name } : {});
  try {
    const boot = await vm.boot([], { env: { NOTIFY_SOCKET: address, ...env } });
    // The last datagram left before the agent exited; give the receiver a moment to print it.
    await receiver.waitFor((m) => m.lines.some((l) => /^STATUS=(provisioned|provisioning failed)/.test(l)), 10_000).catch(() => undefined);
    return { vm, boot, messages: receiver.messages() };
  } finally {
    await receiver.stop();
  }
}

const lines = (run: Run) => run.messages.flatMap((m) => m.lines);
const statuses = (run: Run) => lines(run).filter((l) => l.startsWith('STATUS=')).map((l) => l.slice('STATUS='.length));
const story = (run: Run) => `sd_notify messages:\n${run.messages.map((m) => `[${m.pid}] ${m.lines.join(' | ')}`).join('\n')}\nagent stderr:\n${run.boot.stderr}`;

describe.skipIf(!canSandbox)('what the agent tells systemd', { timeout: 180_000 }, () => {
  beforeAll(async () => {
    assertNamespaces();
    dir = await mkdtemp(path.join(tmpdir(), 'bootstate-notify-e2e-'));
    const tag = `bs-sdn-${process.pid}`;
    runs = {
      happy: withVm(vms, `${tag}-ok`, {}, (vm) => bootWithReceiver(vm, path.join(dir, 'happy.sock'))),
      retried: withVm(vms, `${tag}-503`, { scenario: 'ready-unavailable-3' }, (vm) => bootWithReceiver(vm, `@bootstate-e2e-${process.pid}-503`)),
      fallback: withVm(vms, `${tag}-fb`, {}, (vm) => bootWithReceiver(vm, path.join(dir, 'fallback.sock'), { BOOTSTATE_NATIVE: 'off' })),
    };
    for (const run of Object.values(runs)) run.catch(() => undefined);
  }, 180_000);

  afterAll(async () => {
    if (runs) await Promise.allSettled(Object.values(runs));
    await Promise.allSettled(vms.map((vm) => vm.sandbox.cleanup()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('says what it waits for with the rest of its budget, says READY=1 once after the OS is configured, and ends on "provisioned"', async () => {
    const run = await runs.happy;
    expect(run.boot.exitCode, run.boot.stderr).toBe(0);
    const all = lines(run);
    expect(all.filter((l) => l === 'READY=1'), story(run)).toHaveLength(1);
    const ready = all.indexOf('READY=1');
    const before = statuses(run).filter((s) => all.indexOf(`STATUS=${s}`) < ready);
    expect(before[0], story(run)).toMatch(/^waiting for IMDS: attempt 1, (299|300) s left$/);
    expect(before, story(run)).toContain('configuring the OS');
    expect(all.slice(ready), story(run)).toContainEqual(expect.stringMatching(/^STATUS=reporting Ready: attempt 1, \d+ s left$/));
    expect(statuses(run).at(-1)).toBe('provisioned');
    // The IMDS line extends the start by the rest of its 300 s and the slack; nothing is extended after READY=1.
    const first = run.messages.find((m) => m.lines.some((l) => l.startsWith('STATUS=waiting for IMDS')))!;
    const extend = Number(first.lines.find((l) => l.startsWith('EXTEND_TIMEOUT_USEC='))!.split('=')[1]);
    expect(extend).toBeGreaterThanOrEqual(320e6);
    expect(extend).toBeLessThanOrEqual(330e6);
    expect(all.slice(ready).filter((l) => l.startsWith('EXTEND_TIMEOUT_USEC='))).toEqual([]);
    // One sender, the agent itself (NotifyAccess=main), and no child it ran.
    expect(new Set(run.messages.map((m) => m.pid)).size, story(run)).toBe(1);
    expect(run.messages[0]!.pid).not.toBeNull();
  });

  it('says READY=1 before the Ready report gets through while the wireserver answers 503, and shows each retry (abstract socket)', async () => {
    const run = await runs.retried;
    expect(run.boot.exitCode, run.boot.stderr).toBe(0);
    const readyPosts = (await run.vm.requests()).filter((r) => r.route === 'health' && r.body.includes('"state":"Ready"'));
    expect(readyPosts).toHaveLength(4);
    const ready = run.messages.find((m) => m.lines.includes('READY=1'));
    expect(ready, story(run)).toBeDefined();
    // READY=1 reached the socket before the first Ready POST got its 503, let alone before the accepted one.
    expect(ready!.wallMs).toBeLessThan(readyPosts[0]!.receivedAt + 1_000);
    expect(ready!.wallMs).toBeLessThan(readyPosts[3]!.receivedAt);
    const reporting = statuses(run).filter((s) => s.startsWith('reporting Ready')).map((s) => s.replace(/, \d+ s left$/, ''));
    expect([...new Set(reporting)], story(run)).toEqual(['reporting Ready: attempt 1', 'reporting Ready: attempt 2', 'reporting Ready: attempt 3', 'reporting Ready: attempt 4']);
    expect(statuses(run).at(-1)).toBe('provisioned');
  });

  it('without the native addon sends the same through systemd-notify, with the credentials of the agent (as NotifyAccess=main needs)', async () => {
    const run = await runs.fallback;
    expect(run.boot.exitCode, run.boot.stderr).toBe(0);
    expect(run.boot.stderr).not.toMatch(/systemd is not told|cannot tell systemd|systemd-notify .*failed/);
    const own = run.messages.filter((m) => !m.lines.includes('BARRIER=1'));
    expect(lines({ ...run, messages: own }).filter((l) => l === 'READY=1'), story(run)).toHaveLength(1);
    const pids = new Set(own.map((m) => m.pid));
    expect(pids.size, story(run)).toBe(1);
    // systemd-notify --pid=<agent> puts the agent's PID in the credentials and in MAINPID=.
    for (const m of own) expect(m.lines).toContain(`MAINPID=${m.pid}`);
    expect(statuses(run).at(-1)).toBe('provisioned');
  });
});
