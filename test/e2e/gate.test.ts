/**
 * `bootstate gate`, as WALinuxAgent's ExecCondition= runs it: inside the VM's namespaces, after (or while) the real
 * agent provisions against the fake fabric, reading the markers the run left and the instance lock it holds. Exit 0
 * only for a provisioned VM (or one off Azure); its own code for a failed run, a pending Ready, a pool VM waiting to be
 * claimed, and a run that outlasts --timeout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../src/system/exec.js';
import { AGENT, withVm, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox, createSandbox, runInSandbox, type Sandbox } from './ns.js';

const PREFIX = `bs-gate-${process.pid}`;
const DATA_DIR = '/var/lib/bootstate';
const VM_ID = '550e8400-e29b-41d4-a716-446655440000';
const vms: Vm[] = [];
const sandboxes: Sandbox[] = [];

interface Gate { exitCode: number | null; stdout: string; stderr: string }

/** Runs `bootstate gate` inside the sandbox's namespaces, as the unit's ExecCondition= would. */
async function runGate(sandbox: Sandbox, args: string[] = [], netns?: string): Promise<Gate> {
  const result = await runInSandbox(sandbox, [process.execPath, AGENT, 'gate', ...args], { netns, timeoutMs: 120_000, env: { BOOTSTATE_CONFIG: undefined } });
  return { exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr };
}

const markers = async (sandbox: Sandbox) => (await readdir(sandbox.hostPath(DATA_DIR)).catch(() => [])).filter((n) => /\.(provisioned|report-pending|waiting-for-reuse)$/.test(n)).sort();

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A sandbox with its data directory; with `marker`, this VM id's marker of that kind. */
async function dataSandbox(marker?: 'provisioned'): Promise<Sandbox> {
  const sandbox = await createSandbox({ generation: 2 });
  sandboxes.push(sandbox);
  await mkdir(sandbox.hostPath(DATA_DIR), { recursive: true, mode: 0o700 });
  if (marker) await writeFile(sandbox.hostPath(`${DATA_DIR}/${VM_ID}.${marker}`), '', { mode: 0o600 });
  return sandbox;
}

/** A real holder of the flock(2) a run takes: flock(1) on the sandbox's lock file, until `release`. */
async function holdLock(sandbox: Sandbox): Promise<{ holder: ChildProcess; release(): Promise<void> }> {
  const lock = sandbox.hostPath(`${DATA_DIR}/bootstate.lock`);
  await writeFile(lock, '');
  const holder = spawn('flock', ['--exclusive', lock, 'sh', '-c', 'echo locked; read _'], { stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    holder.stdout.once('data', () => resolve());
    holder.once('error', reject);
  });
  const exited = new Promise((resolve) => holder.once('exit', resolve));
  return {
    holder,
    release: async () => {
      holder.stdin.end();
      await exited;
    },
  };
}

/** Runs the gate inside the sandbox with its stdout a pipe whose reading end was closed before it started. */
const CLOSED_STDOUT = `
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)
print(p.returncode)
sys.stdout.write(p.stderr.decode())
`;

/** libfaketime: what it changes is read from a file on every call, so the wall clock can be stepped mid-run. */
async function libfaketime(): Promise<string> {
  const files = (await run(['dpkg', '-L', 'libfaketime'])).stdout.split('\n');
  const lib = files.find((file) => file.endsWith('/libfaketime.so.1'));
  if (!lib) throw new Error('libfaketime.so.1 not found: install libfaketime (scripts/test-packages.txt)');
  return lib;
}

let provisioned: Promise<{ vm: Vm; boot: BootResult; gate: Gate }>;
let failed: Promise<{ vm: Vm; boot: BootResult; gate: Gate }>;
let readyInFlight: Promise<{ vm: Vm; boot: BootResult; gate: Gate; markersWhenGateStarted: string[] }>;
let pool: Promise<{ vm: Vm; boot: BootResult; during: Gate; after: Gate }>;

describe.skipIf(!canSandbox)('bootstate gate next to a real provisioning run, in namespaces', { timeout: 240_000 }, () => {
  beforeAll(() => {
    assertNamespaces();
    provisioned = withVm(vms, `${PREFIX}-ok`, { generation: 2 }, async (vm) => {
      const boot = await vm.boot();
      return { vm, boot, gate: await runGate(vm.sandbox, [], vm.netns.name) };
    });
    failed = withVm(vms, `${PREFIX}-fail`, { generation: 2, scenario: 'hostile-username' }, async (vm) => {
      const boot = await vm.boot();
      return { vm, boot, gate: await runGate(vm.sandbox, [], vm.netns.name) };
    });
    // Ready answered 503 three times: the gate starts while the run holds its lock and retries Ready.
    readyInFlight = withVm(vms, `${PREFIX}-ready`, { generation: 2, scenario: 'ready-unavailable-3' }, async (vm) => {
      const booting = vm.boot();
      await until(() => existsSync(vm.sandbox.hostPath(`${DATA_DIR}/${VM_ID}.report-pending`)), 'the report-pending marker');
      const markersWhenGateStarted = await markers(vm.sandbox);
      const gate = await runGate(vm.sandbox, [], vm.netns.name);
      return { vm, boot: await booting, gate, markersWhenGateStarted };
    });
    // A pool VM nobody claims: the gate runs while the agent waits (and holds its lock), then after SIGTERM ended it.
    pool = withVm(vms, `${PREFIX}-pool`, { generation: 2, scenario: 'pps-unclaimed' }, async (vm) => {
      let during: Promise<Gate> | null = null;
      const booting = vm.boot([], {
        // The journal records the macrostep into `waiting` once the marker is durable.
        terminateWhen: `grep -qs '"waiting":' ${DATA_DIR}/runs/*.jsonl && [ -e /run/.gate-done ]`,
      });
      await until(async () => (await markers(vm.sandbox)).includes(`${VM_ID}.waiting-for-reuse`), 'the waiting-for-reuse marker');
      during = runGate(vm.sandbox, ['--timeout', '2'], vm.netns.name);
      const duringResult = await during;
      await writeFile(vm.sandbox.hostPath('/run/.gate-done'), '');
      const boot = await booting;
      return { vm, boot, during: duringResult, after: await runGate(vm.sandbox, [], vm.netns.name) };
    });
    for (const p of [provisioned, failed, readyInFlight, pool]) p.catch(() => undefined);
  });

  afterAll(async () => {
    await Promise.allSettled([provisioned, failed, readyInFlight, pool]);
    await Promise.allSettled([...vms.map((vm) => vm.sandbox.cleanup()), ...sandboxes.map((s) => s.cleanup())]);
  });

  it('opens (exit 0) once the run provisioned the VM and Ready was accepted', async () => {
    const { boot, gate } = await provisioned;
    expect(boot.exitCode, boot.stderr).toBe(0);
    expect(gate.exitCode, gate.stdout + gate.stderr).toBe(0);
    expect(gate.stdout).toContain(`open: VM ${VM_ID} is provisioned`);
  });

  it('stays shut (exit 1) after a run that reported ProvisioningFailed', async () => {
    const { vm, boot, gate } = await failed;
    expect(boot.exitCode).not.toBe(0);
    expect(await vm.reportKinds()).toContain('NotReady/ProvisioningFailed');
    expect(gate.exitCode, gate.stdout + gate.stderr).toBe(1);
    expect(gate.stdout).toContain(`shut: VM ${VM_ID} is not provisioned`);
  });

  it('waits while the run holds its lock and reports Ready, then opens once Ready was accepted', async () => {
    const { vm, boot, gate, markersWhenGateStarted } = await readyInFlight;
    expect(markersWhenGateStarted).toEqual([`${VM_ID}.report-pending`]);
    expect(boot.exitCode, boot.stderr).toBe(0);
    expect(gate.stdout).toMatch(/waiting up to \d+ s for the provisioning run \(pid \d+\) holding \/var\/lib\/bootstate\/bootstate\.lock/);
    expect(gate.exitCode, gate.stdout + gate.stderr).toBe(0);
    expect(gate.stdout).toContain('open:');
    expect((await vm.reportKinds()).filter((k) => k === 'Ready')).toHaveLength(4);
  });

  it('stays shut (exit 4) for a pool VM waiting to be claimed: while the agent waits, past --timeout, and after it stopped', async () => {
    const { boot, during, after } = await pool;
    expect(during.stdout).toContain('waiting up to 2 s');
    expect(during.exitCode, during.stdout + during.stderr).toBe(4);
    expect(during.stdout).toContain('pre-provisioned pool VM waiting to be claimed (still waiting after 2 s)');
    expect(boot.exitCode, boot.stderr).toBe(0);
    expect(after.exitCode, after.stdout + after.stderr).toBe(4);
  });

  it('stays shut (exit 3) while Ready is pending, and opens for a VM azure-init provisioned', async () => {
    const sandbox = await createSandbox({ generation: 2 });
    sandboxes.push(sandbox);
    await mkdir(sandbox.hostPath(DATA_DIR), { recursive: true, mode: 0o700 });
    await writeFile(sandbox.hostPath(`${DATA_DIR}/${VM_ID}.report-pending`), '', { mode: 0o600 });
    const pending = await runGate(sandbox);
    expect(pending.exitCode, pending.stdout + pending.stderr).toBe(3);
    expect(pending.stdout).toContain('has not accepted Ready yet');
    // The gate only reads: the marker is still there.
    expect(await markers(sandbox)).toEqual([`${VM_ID}.report-pending`]);

    await mkdir(sandbox.hostPath('/var/lib/azure-init'), { recursive: true });
    await writeFile(sandbox.hostPath(`/var/lib/azure-init/${VM_ID}.provisioned`), '');
    const azureInit = await runGate(sandbox);
    expect(azureInit.exitCode, azureInit.stdout + azureInit.stderr).toBe(0);
  });

  it('times out (exit 5) when a run holds the lock longer than --timeout', async () => {
    const sandbox = await createSandbox({ generation: 2 });
    sandboxes.push(sandbox);
    await mkdir(sandbox.hostPath(DATA_DIR), { recursive: true, mode: 0o700 });
    const lock = await holdLock(sandbox);
    try {
      const gate = await runGate(sandbox, ['--timeout', '1']);
      expect(gate.exitCode, gate.stdout + gate.stderr).toBe(5);
      expect(gate.stdout).toContain(`waiting up to 1 s for the provisioning run (pid ${lock.holder.pid}) holding ${DATA_DIR}/bootstate.lock`);
      expect(gate.stdout).toContain(`shut: the provisioning run still holds ${DATA_DIR}/bootstate.lock after 1 s`);
    } finally {
      await lock.release();
    }
    // Once the holder is gone, nothing is holding the lock: the gate decides on the markers at once.
    const free = await runGate(sandbox, ['--timeout', '1']);
    expect(free.exitCode).toBe(1);
    expect(free.stdout).not.toContain('waiting');
  });

  it('never opens on an I/O error of its own output: exit 6 when stdout is a closed pipe, while a run holds the lock and for a provisioned VM', async () => {
    const sandbox = await dataSandbox();
    const lock = await holdLock(sandbox);
    let held;
    try {
      held = await runInSandbox(sandbox, ['python3', '-c', CLOSED_STDOUT, process.execPath, AGENT, 'gate', '--timeout', '120'], { timeoutMs: 200_000, env: { BOOTSTATE_CONFIG: undefined } });
    } finally {
      await lock.release();
    }
    expect(held.stdout.split('\n')[0], held.stdout + held.stderr).toBe('6');
    // Nothing holds the lock and the VM is provisioned: the gate would open, but its last line cannot be written.
    await writeFile(sandbox.hostPath(`${DATA_DIR}/${VM_ID}.provisioned`), '', { mode: 0o600 });
    expect((await runGate(sandbox)).exitCode).toBe(0);
    const open = await runInSandbox(sandbox, ['python3', '-c', CLOSED_STDOUT, process.execPath, AGENT, 'gate'], { timeoutMs: 120_000, env: { BOOTSTATE_CONFIG: undefined } });
    expect(open.stdout.split('\n')[0], open.stdout + open.stderr).toBe('6');
  });

  it('never opens on a configuration error: exit 6 for a provisioned VM whose configuration does not load', async () => {
    const sandbox = await dataSandbox('provisioned');
    await mkdir(sandbox.hostPath('/etc/bootstate'), { recursive: true });
    await writeFile(sandbox.hostPath('/etc/bootstate/bootstate.toml'), '[resource_disk]\nswap_size_mb = "2048"\n');
    const gate = await runGate(sandbox);
    expect(gate.exitCode, gate.stdout + gate.stderr).toBe(6);
    expect(gate.stdout).toContain('bootstate gate: shut: the configuration does not load (/etc/bootstate/bootstate.toml: [resource_disk] swap_size_mb: expected number, got string)');
  });

  it('waits on the monotonic clock: a step of the wall clock by +2 h (libfaketime, CLOCK_REALTIME only) does not end its wait', async () => {
    const sandbox = await dataSandbox();
    const clock = sandbox.hostPath('/run/faketime');
    await writeFile(clock, '+0\n');
    const env = { BOOTSTATE_CONFIG: undefined, LD_PRELOAD: await libfaketime(), FAKETIME_TIMESTAMP_FILE: '/run/faketime', FAKETIME_NO_CACHE: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' };
    const lock = await holdLock(sandbox);
    let gate;
    try {
      const running = runInSandbox(sandbox, ['sh', '-c', 'exec "$@" >/run/gate.out', 'gate', process.execPath, AGENT, 'gate', '--timeout', '600'], { timeoutMs: 900_000, env });
      let ended = false;
      void running.then(() => (ended = true));
      const out = () => readFile(sandbox.hostPath('/run/gate.out'), 'utf8').catch(() => '');
      await until(async () => ended || (await out()).includes('waiting up to 600 s'), 'the gate to wait');
      await writeFile(clock, '+2h\n');
      // The control: a process started the same way now reads the wall clock 2 h ahead.
      const date = await runInSandbox(sandbox, ['date', '+%s'], { env });
      expect(Number(date.stdout) - Date.now() / 1000).toBeGreaterThan(7000);
      // A deadline on the wall clock passes at the next look at the lock (every 250 ms): give it 40 of them.
      await new Promise((resolve) => setTimeout(resolve, 10_000));
      expect([ended, await out()]).toEqual([false, expect.stringContaining('waiting up to 600 s')]);
      await lock.release();
      gate = await running;
    } finally {
      await lock.release();
    }
    expect(gate.exitCode, gate.stdout + gate.stderr).toBe(1);
    expect(await readFile(sandbox.hostPath('/run/gate.out'), 'utf8')).toContain(`shut: VM ${VM_ID} is not provisioned`);
  }, 900_000);

  it('sees a run\'s lock on btrfs taken through flock(1) whose process has exited, and waits for it (exit 5 past --timeout)', async () => {
    const sandbox = await dataSandbox('provisioned');
    const image = sandbox.hostPath('/btrfs.img');
    await run(['truncate', '-s', '200M', image]);
    await run(['mkfs.btrfs', '-q', image]);
    const loop = (await run(['losetup', '--find', '--show', image])).stdout.trim();
    // In the sandbox's own mount namespace: the lock as the run takes it without its native addon (flock(1) on an
    // inherited descriptor, then exits), the gate, then the lock let go and the gate again.
    const script = `mount -t btrfs "$1" ${DATA_DIR} || exit 99
: > ${DATA_DIR}/${VM_ID}.provisioned
exec 9>${DATA_DIR}/bootstate.lock
flock --exclusive 9
"$2" "$3" gate --timeout 2; echo "held: $?"
exec 9>&-
"$2" "$3" gate --timeout 2; echo "free: $?"`;
    try {
      const result = await runInSandbox(sandbox, ['sh', '-c', script, 'btrfs-gate', loop, process.execPath, AGENT], { timeoutMs: 200_000, env: { BOOTSTATE_CONFIG: undefined } });
      expect(result.stdout, result.stderr).toContain('held: 5');
      expect(result.stdout).toMatch(/waiting up to 2 s for the provisioning run( \(pid \d+\))? holding \/var\/lib\/bootstate\/bootstate\.lock/);
      expect(result.stdout).toContain(`free: 0`);
      expect(result.stdout).toContain(`open: VM ${VM_ID} is provisioned`);
    } finally {
      await run(['losetup', '--detach', loop], { allowFailure: true });
    }
  });

  it('opens (exit 0) off Azure, where bootstate provisions nothing', async () => {
    const sandbox = await createSandbox({ generation: 2, chassisAssetTag: 'Default string' });
    sandboxes.push(sandbox);
    const gate = await runGate(sandbox);
    expect(gate.exitCode, gate.stdout + gate.stderr).toBe(0);
    expect(gate.stdout).toContain('open: not an Azure VM');
  });
});
