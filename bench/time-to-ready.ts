/**
 * Time to Ready with an instant loopback fabric: spawn → the Ready POST arriving, for a `--scratch`
 * provisioning. A dry run executes no OS commands, so its floor is bench/floor-client.mjs: node plus the two
 * round trips no agent can avoid (IMDS GET, then Ready POST), with nothing else loaded. Target: ≤ 1.3 × floor.
 * The real backend (useradd, chpasswd, hostname, sshd -G …) is measured by bench/time-to-ready-sandbox.ts.
 *
 *   node --import tsx bench/time-to-ready.ts
 */
import { NODE_E0, type Row, builds, interleave, report, startFabric, timeExit, timeFloor, timeProvisioning, versus } from './harness.js';

const fabric = await startFabric();
try {
  const variants: Record<string, () => Promise<{ ready: number; exit: number }>> = {
    floor: () => timeFloor(fabric),
    [NODE_E0.name]: async () => ({ ready: await timeExit(NODE_E0.argv), exit: 0 }),
  };
  for (const build of builds()) variants[build.name] = () => timeProvisioning(build, fabric);
  const samples = await interleave(variants);
  const ready = (name: string) => samples[name].map((s) => s.ready);
  const exit = (name: string) => samples[name].map((s) => s.exit);
  const rows: Row[] = [];
  for (const build of builds()) {
    rows.push(
      versus(`time to Ready (dry run), ${build.name}`, ready(build.name), 'node + IMDS GET + Ready POST', ready('floor'), {
        target: '≤ 1.3',
      }),
      versus(`time to exit (dry run), ${build.name}`, exit(build.name), 'node + IMDS GET + Ready POST', exit('floor')),
      versus(`time to Ready (dry run), ${build.name}`, ready(build.name), NODE_E0.name, ready(NODE_E0.name)),
    );
  }
  report('time-to-ready', rows);
} finally {
  await fabric.close();
}
