/**
 * Runs the fuzz properties of test/fuzz with many cases each (FUZZ_RUNS, default 100,000) and reports the count
 * and time per file. The same files run with 300 cases in `npm test`.
 *
 *   npx tsx scripts/fuzz.ts            # 100k cases per property
 *   FUZZ_RUNS=5000 npx tsx scripts/fuzz.ts test/fuzz/ovf.test.ts
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';

const runs = process.env.FUZZ_RUNS ?? '100000';
const files = process.argv.length > 2 ? process.argv.slice(2) : readdirSync('test/fuzz').filter((f) => f.endsWith('.test.ts')).map((f) => `test/fuzz/${f}`);

let failed = 0;
for (const file of files) {
  const started = performance.now();
  const result = spawnSync('npx', ['vitest', 'run', file], { stdio: 'inherit', env: { ...process.env, FUZZ_RUNS: runs } });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const status = result.status === 0 ? 'passed' : 'FAILED';
  if (result.status !== 0) failed += 1;
  process.stdout.write(`fuzz: ${file}: ${runs} cases per property, ${status} in ${seconds} s\n`);
}
process.exit(failed === 0 ? 0 : 1);
