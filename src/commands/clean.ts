/**
 * `bootstate clean [--logs]`: re-arms an image for capture by removing the provisioned markers; with `--logs` also
 * the log file, the run journals and the guest KVP pool's records.
 */
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { ParsedArgs } from '../cli/argv.js';
import { configFrom } from '../cli/options.js';
import type { Config } from '../config/defaults.js';
import { EXIT_OK } from '../core/errors.js';
import { FileMarkerStore } from '../provision/marker.js';

export async function clean(values: ParsedArgs['values']): Promise<number> {
  const config = await configFrom(values.config as string | undefined);
  const logs = values.logs === true;
  const removed = await new FileMarkerStore(config.data_dir.path).clean({ logs, logPath: config.log_path.path });
  for (const path of removed) process.stdout.write(`removed ${path}\n`);
  const history = logs ? await cleanRunHistory(config) : [];
  for (const line of history) process.stdout.write(`${line}\n`);
  if (removed.length === 0 && history.length === 0) process.stdout.write('nothing to remove\n');
  return EXIT_OK;
}

/**
 * `clean --logs` for image capture: the build VM's run journals (and traces drawn next to them) and the records in
 * the guest KVP pool must not ship in the image. Returns one line per thing removed or emptied.
 */
async function cleanRunHistory(config: Config): Promise<string[]> {
  const lines: string[] = [];
  const runs = join(config.data_dir.path, 'runs');
  const names = await readdir(runs).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [] as string[];
    throw error;
  });
  for (const name of names.sort()) {
    await rm(join(runs, name), { recursive: true });
    lines.push(`removed ${join(runs, name)}`);
  }
  const { KvpStore, poolPath } = await import('../kvp/store.js');
  const pool = new KvpStore({ path: poolPath(config.telemetry.kvp_dir, config.telemetry.kvp_pool), lossy: true });
  const { exists, size, records } = pool.info();
  if (exists && size > 0) {
    pool.clear();
    lines.push(`emptied ${pool.path} (${records} KVP record${records === 1 ? '' : 's'})`);
  }
  return lines;
}
