// Child process for live.test.ts: runs the fixture machine with the live inspector pointed at argv[2], then
// (unless argv[3] is "no-stop") stops it, and returns without process.exit so that leftover handles would show.
import { startLiveInspector } from '../../src/inspect/live.js';
import { fixtureMachine, runMachine } from './fixtures.js';

const live = startLiveInspector(process.argv[2]!, { retryMs: 200 });
const output = await runMachine(fixtureMachine({ failures: 1 }), [live.inspect]);
if (process.argv[3] !== 'no-stop') {
  const started = Date.now();
  await live.stop();
  process.stdout.write(`${JSON.stringify({ stopMs: Date.now() - started, result: (output.output as { result: string }).result })}\n`);
} else process.stdout.write(`${JSON.stringify({ result: (output.output as { result: string }).result })}\n`);
