/**
 * Runs one fault-matrix case: the built agent against its own fake fabric, watched through /proc, and reduced
 * to what the table compares (final result and reason, exit code, attempts, time to give up, leftovers).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeReport } from '../../src/azure/report.js';
import { startFakeFabric } from '../../src/fabric/fake-fabric.js';
import { lastFailureDescription, markers, runAgent } from '../integration/agent.js';
import { closedPort, recorder, tricklingWireserver } from './endpoints.js';
import { IMDS_CONFIG, WIRESERVER_CONFIG, type FaultCase } from './fault-cases.js';
import { survivors, watchProcessTree } from './process-watch.js';
import { limitConcurrency } from './slots.js';

export interface Observed {
  exitCode: number | null;
  signal: string | null;
  result: string | null;
  reason: string | null;
  /** IMDS only: the fields of the ProvisioningFailed report the fabric received. */
  reportedReason?: string;
  lastError?: string;
  status?: string;
  /** IMDS only: every field of that report, by key. */
  reportFields?: Record<string, string>;
  attempts: number;
  /**
   * From the first attempt at the faulty endpoint (or, when nothing listens there, the chart entering that
   * phase) to the final report (IMDS) or to exit (wireserver); null if the phase was never reached.
   */
  ms: number | null;
  redirectTargetHits: number;
  /** argv of descendants still running after the agent exited. */
  leftovers: string[];
  /** stderr lines that look like a crash (fatal, uncaught, a stack frame). */
  crashLines: string[];
  markers: string[];
}

interface JournalLine {
  t: string;
  event: string;
  value: unknown;
  tags: string[];
  output?: { result: string; reason?: string; exitCode: number };
}

function journal(root: string): JournalLine[] {
  const dir = join(root, 'var/lib/bootstate/runs');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .flatMap((name) => readFileSync(join(dir, name), 'utf8').split('\n').filter(Boolean))
    .map((line) => JSON.parse(line) as JournalLine);
}

const entered = (lines: JournalLine[], state: string) => {
  const line = lines.find((l) => JSON.stringify(l.value).includes(`"${state}"`) || l.value === state);
  return line ? Date.parse(line.t) : null;
};

/** Attempts the chart saw fail: the only count when nothing listens on the endpoint. */
const failedAttempts = (lines: JournalLine[], actor: string) =>
  lines.filter((l) => l.event === `xstate.error.actor.${actor}`).length;

const CRASH = /fatal|uncaught|unhandled|^\s+at .+:\d+:\d+\)?$/im;

/** Agents running at once: more than the cores would measure CPU starvation instead of the agent. */
const inSlot = limitConcurrency(Number(process.env.FAULT_CONCURRENCY ?? 2));

/** Runs `fault` once (at most SLOTS at a time) and observes the outcome. */
export function runFaultCase(fault: FaultCase): Promise<Observed> {
  return inSlot(() => observe(fault));
}

async function observe(fault: FaultCase): Promise<Observed> {
  const fabric = await startFakeFabric();
  const redirectTarget = await recorder();
  const trickler = await tricklingWireserver();
  try {
    const overrides = fault.arrange({ fabric, closedPort: await closedPort(), redirectTarget, trickler }) ?? {};
    const isImds = fault.service === 'imds';
    let exitAt = 0;
    let stderr = '';
    let watch: ReturnType<typeof watchProcessTree> | null = null;
    let pid = 0;
    let closed!: Promise<void>;
    const run = await runAgent(fabric, {
      imds: isImds ? { ...IMDS_CONFIG, ...fault.config, ...overrides } : {},
      wireserver: isImds ? {} : { ...WIRESERVER_CONFIG, ...fault.config, ...overrides },
      onSpawn: (child) => {
        pid = child.pid!;
        watch = watchProcessTree(pid, 50);
        child.stderr!.on('data', (d) => (stderr += d));
        child.on('exit', () => (exitAt = Date.now()));
        closed = new Promise((resolve) => child.on('close', () => resolve()));
      },
    });
    await closed;
    const w = watch as ReturnType<typeof watchProcessTree> | null;
    w?.stop();
    const leftovers = w ? survivors(w, pid).map((p) => p.argv.join(' ')) : [];

    const lines = journal(run.root);
    const output = lines.at(-1)?.output;
    const description = lastFailureDescription(fabric);
    const field = (key: string) => (description ? decodeReport(description).find(([k]) => k === key)?.[1] : undefined);
    const failureReport = fabric.requestsTo('health').filter((r) => r.body.includes('ProvisioningFailed')).at(-1);
    const firstAttempt = isImds
      ? fabric.requestsTo('imds')[0]?.receivedAt
      : Math.min(
          ...fabric.requestsTo('health').filter((r) => r.body.includes('"Ready"')).map((r) => r.receivedAt),
          ...trickler.receivedAt.filter((_, i) => trickler.received[i]!.includes('"Ready"')),
        );
    // With nothing listening there is no first request: the chart entering the phase stands in for it.
    const start = Number.isFinite(firstAttempt) ? firstAttempt! : entered(lines, isImds ? 'provisioning' : 'reportingReady');
    const end = isImds ? (failureReport?.receivedAt ?? exitAt) : exitAt;
    const readyAttempts =
      fabric.requestsTo('health').filter((r) => r.body.includes('"Ready"')).length +
      trickler.received.filter((r) => r.includes('"Ready"')).length;

    return {
      exitCode: run.code,
      signal: run.signal,
      result: output?.result ?? null,
      reason: output?.reason ?? null,
      ...(isImds
        ? {
            reportedReason: field('reason'),
            lastError: field('last_error'),
            status: field('status'),
            reportFields: description ? Object.fromEntries(decodeReport(description)) : {},
          }
        : {}),
      attempts: Math.max(isImds ? fabric.requestsTo('imds').length : readyAttempts, failedAttempts(lines, isImds ? 'imds' : 'readyReport')),
      ms: start === null ? null : end - start,
      redirectTargetHits: redirectTarget.received.length,
      leftovers,
      crashLines: stderr.split('\n').filter((line) => CRASH.test(line)),
      markers: markers(run.root).map((m) => m.replace(/^.*\./, '')),
    };
  } finally {
    await Promise.all([fabric.close(), redirectTarget.close(), trickler.close()]);
  }
}
