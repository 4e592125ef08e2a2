/** `bootstate inspect-server`: relays live runs (`--inspect`) to a browser viewer until SIGINT or SIGTERM. */
import type { ParsedArgs } from '../cli/argv.js';
import { UsageError } from '../cli/argv.js';
import { EXIT_OK } from '../core/errors.js';

export async function inspectServer(values: ParsedArgs['values']): Promise<number> {
  const host = values.host as string;
  if (!isLoopback(host) && values['allow-remote'] !== true) {
    throw new UsageError(`--host ${host} is not a loopback address: anyone who reaches it sees every run; add --allow-remote to mean it`);
  }
  const { startInspectServer } = await import('../inspect/live.js');
  const server = await startInspectServer({ host, port: Number(values.port) });
  process.stdout.write(`${JSON.stringify({ agent: server.agentUrl, viewer: server.viewerUrl })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  return EXIT_OK;
}

/** `127.0.0.0/8`, `::1` and `localhost`: addresses only this machine can reach. */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  return bare === 'localhost' || bare === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(bare) || /^::ffff:127\./.test(bare);
}
