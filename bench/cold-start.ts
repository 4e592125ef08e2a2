/**
 * Cold start: how much later than bare node does bootstate answer `--version`, and how much later than a bare
 * node client does its first IMDS request leave? Target: ≤ 1.15 × `node -e 0`.
 *
 *   node --import tsx bench/cold-start.ts        (BENCH_RUNS=N to change the repetitions)
 */
import { NODE_E0, type Row, builds, interleave, report, startFabric, timeExit, timeFloor, timeProvisioning, versus } from './harness.js';

const fabric = await startFabric();
try {
  const variants: Record<string, () => Promise<number>> = {
    [NODE_E0.name]: () => timeExit(NODE_E0.argv),
    floor: async () => (await timeFloor(fabric)).firstImds,
  };
  for (const build of builds()) {
    variants[`version:${build.name}`] = () => timeExit([...build.argv, '--version']);
    variants[`imds:${build.name}`] = async () => (await timeProvisioning(build, fabric)).firstImds;
  }
  const samples = await interleave(variants);
  const rows: Row[] = [];
  for (const build of builds()) {
    rows.push(
      versus(`\`bootstate --version\`, ${build.name}`, samples[`version:${build.name}`], NODE_E0.name, samples[NODE_E0.name], { target: '≤ 1.05' }),
    );
  }
  for (const build of builds()) {
    rows.push(versus(`first IMDS request, ${build.name}`, samples[`imds:${build.name}`], NODE_E0.name, samples[NODE_E0.name]));
    rows.push(
      versus(`first IMDS request, ${build.name}`, samples[`imds:${build.name}`], 'bare node:http GET', samples.floor, {
        note: 'floor: bench/floor-client.mjs',
      }),
    );
  }
  report('cold-start', rows);
} finally {
  await fabric.close();
}
