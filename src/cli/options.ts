/**
 * What the options several subcommands share mean, for their handlers in src/commands/: `--config` (the system
 * configuration with an override file or directory) and `--root` (an image mounted under a directory).
 */
import { stat } from 'node:fs/promises';
import { SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE, type Config } from '../config/defaults.js';
import { loadConfig, type LoadConfigOptions } from '../config/load.js';
import { UsageError } from './argv.js';

/** The configuration a first boot would use, with `--config` (else BOOTSTATE_CONFIG) applied last. */
export async function configFrom(path: string | undefined): Promise<Config> {
  return (await loadConfig(configFiles(path))).config;
}

/** Where the configuration of `--config PATH` is read from: the system file, its drop-ins, then PATH. */
export const configFiles = (path: string | undefined): LoadConfigOptions => ({
  systemFile: SYSTEM_CONFIG_FILE,
  dropinDir: SYSTEM_CONFIG_DROPIN_DIR,
  override: path ?? process.env.BOOTSTATE_CONFIG,
});

/** The root must be a directory to hold an image; anything else is a mistyped `--root`. */
export async function checkRoot(root: string): Promise<void> {
  let info;
  try {
    info = await stat(root);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(`--root ${root}: ${code === 'ENOENT' ? 'no such directory' : `cannot be read (${code ?? (error as Error).message})`}`);
  }
  if (!info.isDirectory()) throw new UsageError(`--root ${root}: not a directory`);
}
