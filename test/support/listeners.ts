/** Loopback listeners that misbehave at the TCP level, for tests of connects that never complete. */
import { spawn } from 'node:child_process';
import { connect } from 'node:net';

/**
 * A listener whose accept queue is full, so new SYNs go unanswered. Node always accepts, so a tiny Python
 * process holds the socket; null without python3.
 */
export async function backlogFullListener(): Promise<{ port: number; close(): void } | null> {
  const script = 'import socket,time\ns=socket.socket()\ns.bind(("127.0.0.1",0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\ntime.sleep(30)';
  const child = spawn('python3', ['-c', script], { stdio: ['ignore', 'pipe', 'ignore'] });
  const port = await new Promise<number | null>((resolve) => {
    child.once('error', () => resolve(null));
    child.stdout.once('data', (data) => resolve(Number(String(data).trim())));
  });
  if (port === null) return null;
  const fillers = Array.from({ length: 4 }, () => connect(port, '127.0.0.1').on('error', () => undefined));
  await new Promise((resolve) => setTimeout(resolve, 200));
  return {
    port,
    close: () => {
      for (const socket of fillers) socket.destroy();
      child.kill();
    },
  };
}
