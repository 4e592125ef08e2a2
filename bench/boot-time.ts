/**
 * Boot to first SSH login on a real Debian 12 boot (test/boot/): from starting systemd-nspawn to the first `ssh -i
 * KEY azureuser@…` that runs a command, with bootstate provisioning the key from the fake IMDS, against the same
 * cached root with the user and key baked in and no agent installed (the physical limit of this boot). Every boot
 * is a first boot of a fresh copy-on-write disk; the variants alternate; the machine's load average is recorded,
 * since these figures move with whatever else runs on the host. Needs what the boot tests need.
 *
 *   node --import tsx bench/boot-time.ts          BENCH_BOOT_RUNS=N sets the repetitions (default 7)
 */
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { run } from '../src/system/exec.js';
import { canSandbox } from '../test/e2e/ns.js';
import { createMachine, type Machine } from '../test/boot/machine.js';
import { bakeKey, bakeLayer, configLayer, createRig, imdsDocument } from '../test/boot/scenario.js';
import { fmt, interleave, median, report } from './harness.js';

const RUNS = Number(process.env.BENCH_BOOT_RUNS ?? 7);
const USER = 'azureuser';

if (!canSandbox) {
  report('boot-time', [{ metric: 'not run: needs root on Linux', median: Number.NaN, unit: 'ms' }]);
  process.exit(0);
}

const rig = await createRig();
let serial = 0;

let baked: string;
let keygen: string;
let rsaFirst: string;
try {
  baked = await bakeKey(rig, USER);
  keygen = await bakeKeygen(baked);
  // The same package with every host key made before READY=1 (none in the background).
  rsaFirst = await configLayer(rig, 'rsa-first', '[host_keys]\nbackground = []\n');
} catch (error) {
  await rig.cleanup();
  throw error;
}

/**
 * Over the baked root: the image's host keys removed and a unit that makes new ones before ssh.service, the three
 * types in parallel as bootstate does (a fresh image has to do this or share its keys with every VM made from it).
 */
async function bakeKeygen(lower: string): Promise<string> {
  const inRoot = `rm -f /etc/ssh/ssh_host_*
cat > /etc/systemd/system/host-keys.service <<'UNIT'
[Unit]
Description=Make this machine's ssh host keys
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'for t in rsa ecdsa ed25519; do ssh-keygen -q -t $$t -N "" -C "" -f /etc/ssh/ssh_host_$\${t}_key & done; wait'
[Install]
WantedBy=multi-user.target
UNIT
ln -s /etc/systemd/system/host-keys.service /etc/systemd/system/multi-user.target.wants/host-keys.service`;
  return bakeLayer(rig, 'baked-keygen', [lower, rig.debian], inRoot);
}

interface Sample {
  loginMs: number;
  /** For the agent variant: container start → bootstate.service finished, from the journal. */
  agentDoneMs?: number;
}

/** Boots a fresh VM, polls SSH until a login runs `true`, then powers it off and removes it (untimed). */
async function bootToLogin(variant: 'agent' | 'agent-rsa-first' | 'baked' | 'keygen'): Promise<Sample> {
  const agent = variant.startsWith('agent');
  const layers = {
    agent: [rig.debLayer, rig.debian],
    'agent-rsa-first': [rsaFirst, rig.debLayer, rig.debian],
    baked: [baked, rig.debian],
    keygen: [keygen, baked, rig.debian],
  }[variant];
  const machine: Machine = await createMachine({
    name: `bsbt${process.pid}x${serial++}`,
    workDir: rig.workDir,
    layers,
    fabric: agent,
    imdsDocument: imdsDocument(rig.publicKey),
  });
  try {
    const boot = await machine.boot();
    const deadline = Date.now() + 120_000;
    let loginMs = 0;
    for (;;) {
      const attempt = await boot.ssh(rig.key, USER, 'true', 10_000, ['-o', 'ConnectTimeout=2']);
      if (attempt.exitCode === 0) {
        loginMs = performance.now() - boot.startedAt;
        break;
      }
      if (Date.now() > deadline) throw new Error(`no SSH login within 120 s: ${attempt.stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const sample: Sample = { loginMs };
    if (agent) {
      // The login may come before the Ready report: that waits for the host keys made in the background.
      let kinds = await machine.reportKinds();
      for (const until = Date.now() + 60_000; !kinds.includes('Ready') && Date.now() < until; kinds = await machine.reportKinds()) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      if (kinds.join() !== 'NotReady/Provisioning,Ready') throw new Error(`reports were ${kinds.join(', ')}`);
      sample.agentDoneMs = await unitDoneMs(boot, 'bootstate.service');
    }
    await boot.shutdown();
    return sample;
  } finally {
    await machine.destroy();
  }
}

/** Milliseconds from the container's start (PID 1's first journal entry) to the unit's start job ending. */
async function unitDoneMs(boot: { exec(argv: string[]): Promise<{ stdout: string }> }, unit: string): Promise<number> {
  const lines = (await boot.exec(['journalctl', '-b', '-o', 'json', '--output-fields=UNIT,MESSAGE_ID,JOB_TYPE', '_PID=1'])).stdout;
  const entries = lines.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, string>);
  const first = Number(entries[0]?.__MONOTONIC_TIMESTAMP);
  const done = entries.find((e) => e.UNIT === unit && e.MESSAGE_ID === '39f53479d3a045ac8e11786248231fbf');
  return done ? (Number(done.__MONOTONIC_TIMESTAMP) - first) / 1000 : Number.NaN;
}

const loadBefore = loadavg()[0]!;
try {
  const samples = await interleave(
    { agent: () => bootToLogin('agent'), 'agent-rsa-first': () => bootToLogin('agent-rsa-first'), baked: () => bootToLogin('baked'), keygen: () => bootToLogin('keygen') },
    RUNS,
  );
  const loadAfter = loadavg()[0]!;
  const agent = samples.agent!.map((s) => s.loginMs);
  const floor = samples.baked!.map((s) => s.loginMs);
  const keygenFloor = samples.keygen!.map((s) => s.loginMs);
  const load = `1-min load ${fmt(loadBefore)} before, ${fmt(loadAfter)} after, on ${(await run(['nproc'])).stdout.trim()} cores`;
  report('boot-time', [
    {
      metric: 'nspawn start → first SSH login, bootstate provisioning the key (Debian 12, systemd)',
      median: median(agent),
      unit: 'ms',
      floor: median(floor),
      floorName: 'same root, key baked in, no agent',
      ratio: median(agent) / median(floor),
      target: '≤ ×1.25',
      note: load,
    },
    {
      metric: 'nspawn start → first SSH login, bootstate provisioning the key (Debian 12, systemd)',
      median: median(agent),
      unit: 'ms',
      floor: median(keygenFloor),
      floorName: 'same root, key baked in, no agent, host keys made at boot before ssh (rsa, ecdsa, ed25519 in parallel)',
      ratio: median(agent) / median(keygenFloor),
    },
    {
      metric: 'nspawn start → first SSH login, bootstate with every host key made before READY=1 (host_keys.background = [])',
      median: median(samples['agent-rsa-first']!.map((s) => s.loginMs)),
      unit: 'ms',
      floor: median(floor),
      floorName: 'same root, key baked in, no agent',
      ratio: median(samples['agent-rsa-first']!.map((s) => s.loginMs)) / median(floor),
    },
    {
      metric: 'nspawn start → bootstate.service started: READY=1 (PID 1 journal)',
      median: median(samples.agent!.map((s) => s.agentDoneMs ?? Number.NaN)),
      unit: 'ms',
    },
  ], RUNS);
} finally {
  await rig.cleanup();
}
