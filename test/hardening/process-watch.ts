/**
 * Watches a process tree through /proc while it runs: every descendant the agent starts (and its argv), so a
 * test can check afterwards that none outlived the agent and that no argv carried a secret. One shared scan
 * serves every watch, so concurrent cases do not multiply the /proc traffic.
 */
import { readdirSync, readFileSync } from 'node:fs';

export interface SeenProcess {
  pid: number;
  /** Field 22 of /proc/PID/stat: together with the pid it names one process even if the pid is reused. */
  startTime: string;
  argv: string[];
}

export interface ProcessWatch {
  /** The root and every descendant observed while the watch ran, by pid. */
  seen: Map<number, SeenProcess>;
  stop(): void;
}

interface Stat {
  ppid: number;
  state: string;
  startTime: string;
}

const watches = new Set<{ root: number; seen: Map<number, SeenProcess> }>();
let timer: NodeJS.Timeout | null = null;

function readStat(pid: number): Stat | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0], ppid: Number(fields[1]), startTime: fields[19] };
  } catch {
    return null;
  }
}

function readArgv(pid: number): string[] {
  try {
    const parts = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    if (parts.at(-1) === '') parts.pop();
    return parts;
  } catch {
    return [];
  }
}

function scan(): void {
  const children = new Map<number, number[]>();
  const stats = new Map<number, Stat>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    const stat = readStat(pid);
    if (!stat) continue;
    stats.set(pid, stat);
    const list = children.get(stat.ppid) ?? [];
    list.push(pid);
    children.set(stat.ppid, list);
  }
  for (const watch of watches) {
    const queue = [watch.root];
    while (queue.length > 0) {
      const pid = queue.shift()!;
      const stat = stats.get(pid);
      if (!stat) continue;
      const known = watch.seen.get(pid);
      if (!known || known.startTime !== stat.startTime || known.argv.length === 0) {
        watch.seen.set(pid, { pid, startTime: stat.startTime, argv: readArgv(pid) });
      }
      queue.push(...(children.get(pid) ?? []));
    }
  }
}

/** Starts recording `root` and its descendants every `intervalMs` until `stop()`. */
export function watchProcessTree(root: number, intervalMs = 25): ProcessWatch {
  const watch = { root, seen: new Map<number, SeenProcess>() };
  watches.add(watch);
  scan();
  if (!timer) timer = setInterval(scan, intervalMs);
  return {
    seen: watch.seen,
    stop: () => {
      scan();
      watches.delete(watch);
      if (watches.size === 0 && timer) {
        clearInterval(timer);
        timer = null;
      }
    },
  };
}

/** The observed processes other than `root` that are still running (same pid and start time, not a zombie). */
export function survivors(watch: ProcessWatch, root: number): SeenProcess[] {
  return [...watch.seen.values()].filter((p) => {
    if (p.pid === root) return false;
    const stat = readStat(p.pid);
    return stat !== null && stat.startTime === p.startTime && stat.state !== 'Z';
  });
}

/** Pids whose parent is `pid` right now (what `ps -o pid= --ppid PID` prints). */
export function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((p) => readStat(p)?.ppid === pid);
}
