/**
 * Crash-at-every-state harness: enumerates the provisioning chart's states, runs the built agent until the run
 * journal shows a chosen state, freezes it (SIGSTOP), reads which state the journal says it is in, and SIGKILLs
 * it; then snapshots what the root holds so a second boot can be compared with an uninterrupted run.
 */
import { readdirSync, readFileSync, statSync, lstatSync, existsSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { join, relative } from 'node:path';
import type { StateValue } from 'xstate';
import { provisioningMachine } from '../../machines/provisioning-machine.js';
import type { FakeFabric } from '../../src/fabric/fake-fabric.js';
import { latestJournal, readJournal, type JournalLine } from '../../src/inspect/journal.js';
import { RECORD_BYTES, decodeRecords } from '../../src/kvp/codec.js';
import { KvpStore } from '../../src/kvp/store.js';
import { runAgent, type AgentOptions, type AgentRun } from '../integration/agent.js';

export const DATA_DIR = 'var/lib/bootstate';
export const KVP_POOL = 'var/lib/hyperv/.kvp_pool_1';

interface StateNodeLike {
  key: string;
  type: string;
  states: Record<string, StateNodeLike>;
}

/** Every state below the root as a dotted path (as test/support/chart.ts spells them), parents first. */
export function chartStates(): string[] {
  const out: string[] = [];
  const walk = (node: StateNodeLike, prefix: string[]) => {
    for (const [key, child] of Object.entries(node.states)) {
      const path = [...prefix, key];
      out.push(path.join('.'));
      walk(child, path);
    }
  };
  walk(provisioningMachine.root as unknown as StateNodeLike, []);
  return out;
}

/** Whether the dotted state path is active in a state value. */
export function isActive(value: StateValue, path: string): boolean {
  let current: StateValue | undefined = value;
  for (const key of path.split('.')) {
    if (current === undefined) return false;
    if (typeof current === 'string') {
      if (current !== key) return false;
      current = undefined;
      continue;
    }
    if (!(key in current)) return false;
    current = current[key] as StateValue;
  }
  return true;
}

export interface KillResult {
  run: AgentRun;
  /** The journal line the agent was frozen at (null when no journal line existed yet). */
  killedAt: JournalLine | null;
  /** Whether the kill landed while the target was active. */
  landed: boolean;
  /** Whether the agent was killed at all (false: it exited first). */
  killed: boolean;
}

export interface KillPlan {
  /** The state to kill in. */
  target: string;
  /** Extra condition before the kill (e.g. the gated request reached the fabric). */
  ready?: () => boolean;
  /** Give up (kill anyway, counted as a miss) after this long. */
  timeoutMs?: number;
  /** For states entered before the journal exists: decides from outside the journal that the agent is held there. */
  heldWithoutJournal?: (child: ChildProcess) => boolean;
}

function lastLine(dataDir: string, ignore: Set<string>): { line: JournalLine | null; all: JournalLine[] } {
  const file = latestJournal(dataDir);
  if (!file || ignore.has(file)) return { line: null, all: [] };
  const all = readJournal(file);
  return { line: all.at(-1) ?? null, all };
}

/**
 * Runs the agent into `root` and SIGKILLs it once the journal's last line shows `plan.target` (polled every
 * millisecond). The process is frozen with SIGSTOP first, so the line read afterwards is the state it died in.
 */
export async function runAndKill(fabric: FakeFabric, root: string, options: AgentOptions, plan: KillPlan): Promise<KillResult> {
  const dataDir = join(root, DATA_DIR);
  // Journals of earlier boots into the same root are not this run's.
  const runs = join(dataDir, 'runs');
  const earlier = new Set<string>(existsSync(runs) ? readdirSync(runs).map((name) => join(runs, name)) : []);
  let killedAt: JournalLine | null = null;
  let landed = false;
  let killed = false;
  const run = await runAgent(fabric, {
    ...options,
    root,
    onSpawn(child) {
      const started = Date.now();
      let lastSize = -1;
      let done = false;
      const freezeAndKill = (matched: boolean) => {
        done = true;
        clearInterval(timer);
        child.kill('SIGSTOP');
        const { line } = lastLine(dataDir, earlier);
        killedAt = line;
        landed = matched && (plan.heldWithoutJournal ? line === null && plan.heldWithoutJournal(child) : line !== null && isActive(line.value, plan.target));
        killed = child.kill('SIGKILL');
      };
      const timer = setInterval(() => {
        if (done) return;
        if (child.exitCode !== null || child.signalCode !== null) {
          done = true;
          clearInterval(timer);
          return;
        }
        if (Date.now() - started > (plan.timeoutMs ?? 15_000)) return freezeAndKill(false);
        if (plan.heldWithoutJournal) {
          if (plan.heldWithoutJournal(child)) freezeAndKill(true);
          return;
        }
        const file = latestJournal(dataDir);
        if (!file || earlier.has(file)) return;
        let size: number;
        try {
          size = statSync(file).size;
        } catch {
          return;
        }
        if (size === lastSize) {
          if (!plan.ready) return;
        }
        lastSize = size;
        const all = readJournal(file);
        const line = all.at(-1);
        if (!line) return;
        if (isActive(line.value, plan.target)) {
          if (!plan.ready || plan.ready()) freezeAndKill(true);
          return;
        }
        // Passed the target without the poller seeing it held: a miss; stop early.
        if (all.some((l) => isActive(l.value, plan.target)) || line.status !== 'active') freezeAndKill(false);
      }, 1);
    },
  });
  // A final state's process may already have exited when the poller sees its line: the signals then reach a zombie
  // and the run ends with its own exit code. Only a run that died of the SIGKILL was killed in the state.
  if (run.signal !== 'SIGKILL') landed = false;
  return { run, killedAt, landed, killed };
}

export interface TreeEntry {
  mode: string;
  content?: string;
}

/** Whether a name is one the atomic writers give their temp files (`.<name>.<hex>.tmp`). */
export const isTempName = (name: string): boolean => /\.tmp$|\.tmp[.-]|~$/.test(name);

/** Whether `dir` holds an atomic writer's temp file right now. */
export function hasTempFile(dir: string): boolean {
  try {
    return readdirSync(dir).some(isTempName);
  } catch {
    return false;
  }
}

/** Files and directories under `root` that provisioning writes (the OS tree), with mode and content; temp files are left to `tempFiles`. */
export function osTree(root: string): Record<string, TreeEntry> {
  const out: Record<string, TreeEntry> = {};
  for (const top of ['etc', 'home']) {
    const base = join(root, top);
    if (!existsSync(base)) continue;
    for (const name of readdirSync(base, { recursive: true, encoding: 'utf8' })) {
      if (isTempName(name)) continue;
      const path = join(base, name);
      const stat = lstatSync(path);
      const key = relative(root, path);
      out[key] = {
        mode: (stat.mode & 0o170777).toString(8),
        ...(stat.isFile() ? { content: readFileSync(path, 'utf8') } : {}),
      };
    }
  }
  return out;
}

/** Every path under `root` whose name looks like an atomic writer's temp file. */
export function tempFiles(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' }).filter(isTempName);
}

export interface PoolCheck {
  bytes: number;
  records: number;
  reportKeys: number;
  /** Decode error of the strict decoder, if any record is torn or not UTF-8. */
  error?: string;
}

/** Checks the KVP pool: whole records only, each decodes strictly, and how many PROVISIONING_REPORT keys it holds. */
export function checkPool(root: string): PoolCheck {
  const file = join(root, KVP_POOL);
  if (!existsSync(file)) return { bytes: 0, records: 0, reportKeys: 0 };
  const bytes = readFileSync(file);
  try {
    const records = decodeRecords(bytes);
    const viaStore = new KvpStore({ path: file }).dump();
    return {
      bytes: bytes.length,
      records: records.length,
      reportKeys: viaStore.filter((r) => r.key === 'PROVISIONING_REPORT').length,
      ...(bytes.length % RECORD_BYTES === 0 ? {} : { error: `pool size ${bytes.length} is not a multiple of ${RECORD_BYTES}` }),
    };
  } catch (error) {
    return { bytes: bytes.length, records: -1, reportKeys: -1, error: (error as Error).message };
  }
}
