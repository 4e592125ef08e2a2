/**
 * Time to Ready when every fabric request takes 100 ms: how many round trips sit one after another on the path
 * to Ready? Only two are unavoidable (IMDS GET, then the Ready POST; InProgress goes out in parallel). The
 * chain is reconstructed from arrival times: a request depends on an earlier one only if it arrived after that
 * one's answer left. Target: no more than the unavoidable round trips.
 *
 *   node --import tsx bench/latency.ts
 */
import { type Arrival, type Row, builds, interleave, median, report, startFabric, timeFloor, timeProvisioning, versus } from './harness.js';

const LATENCY_MS = 100;
const UNAVOIDABLE = 2;
/** Timer and scheduling slack when deciding that a request came after another's answer. */
const SLACK_MS = 3;

/** The longest chain of strictly sequential requests ending in the Ready POST, oldest first. */
function criticalChain(arrivals: Arrival[]): Arrival[] {
  const sorted = [...arrivals].sort((a, b) => a.at - b.at);
  const chains: Arrival[][] = [];
  for (const [i, arrival] of sorted.entries()) {
    let best: Arrival[] = [];
    for (let j = 0; j < i; j++) {
      if (sorted[j].at + LATENCY_MS <= arrival.at + SLACK_MS && chains[j].length >= best.length) best = chains[j];
    }
    chains.push([...best, arrival]);
  }
  const readyIndex = sorted.findIndex((a) => a.route === 'health' && a.body.includes('"Ready"'));
  return readyIndex < 0 ? [] : chains[readyIndex];
}

const label = (a: Arrival) => (a.route === 'health' ? `${a.route}(${/"state":"([^"]+)"/.exec(a.body)?.[1] ?? '?'})` : String(a.route));

const fabric = await startFabric(LATENCY_MS);
try {
  const variants: Record<string, () => Promise<{ ready: number; exit: number; chain: Arrival[] }>> = {
    floor: async () => ({ ...(await timeFloor(fabric)), chain: [] }),
  };
  for (const build of builds()) {
    variants[build.name] = async () => {
      const timing = await timeProvisioning(build, fabric);
      return { ...timing, chain: criticalChain(timing.arrivals) };
    };
  }
  const samples = await interleave(variants);
  const rows: Row[] = [];
  for (const build of builds()) {
    const runs = samples[build.name];
    const depths = runs.map((r) => r.chain.length);
    const typical = runs.find((r) => r.chain.length === median(depths)) ?? runs[0];
    rows.push({
      metric: `sequential round trips to Ready at ${LATENCY_MS} ms, ${build.name}`,
      median: median(depths),
      unit: 'round trips',
      floor: UNAVOIDABLE,
      floorName: 'IMDS GET → Ready POST',
      ratio: median(depths) / UNAVOIDABLE,
      target: '≤ 1',
      note: typical.chain.map(label).join(' → '),
    });
    rows.push(
      versus(`time to exit at ${LATENCY_MS} ms, ${build.name}`, runs.map((r) => r.exit), `node + 2 × ${LATENCY_MS} ms`, samples.floor.map((r) => r.exit)),
    );
  }
  report('latency', rows);
} finally {
  await fabric.close();
}
