/**
 * `bootstate config check [--config FILE|DIR]`, for image builders (options parsed by the CLI table): loads the
 * configuration exactly as a first boot would, prints the merged result with the origin of every value, and exits
 * 78 on anything a first boot would only warn about (unknown sections or keys, a configuration path that is not a
 * regular file) as well as on what it would refuse (wrong types, bad TOML).
 */
import { EXIT_CONFIG, EXIT_OK } from '../core/errors.js';
import { SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE, type Config } from '../config/defaults.js';
import { loadConfig, type LoadedConfig } from '../config/load.js';

export interface ConfigCheckIo {
  stdout(text: string): void;
  stderr(text: string): void;
  systemFile?: string;
  dropinDir?: string;
  env?: Record<string, string | undefined>;
}

/** Runs `config check` with its parsed options (`--config`) and resolves to the exit code. */
export async function runConfigCheck(values: { config?: string }, io: ConfigCheckIo): Promise<number> {
  const env = io.env ?? process.env;
  let loaded: LoadedConfig;
  try {
    loaded = await loadConfig({
      systemFile: io.systemFile ?? SYSTEM_CONFIG_FILE,
      dropinDir: io.dropinDir ?? SYSTEM_CONFIG_DROPIN_DIR,
      override: values.config ?? env.BOOTSTATE_CONFIG,
      env,
    });
  } catch (error) {
    io.stderr(`error: ${(error as Error).message}\n`);
    return EXIT_CONFIG;
  }
  io.stdout(renderConfig(loaded));
  for (const warning of loaded.warnings) io.stderr(`warning: ${warning}\n`);
  let code = EXIT_OK;
  if (loaded.refused.length > 0) {
    io.stderr(`error: ${loaded.refused.length} configuration path(s) that are not regular files; a first boot would ignore them\n`);
    code = EXIT_CONFIG;
  }
  if (loaded.unknown.length > 0) {
    io.stderr(`error: ${loaded.unknown.length} unknown section(s) or key(s); a first boot would ignore them\n`);
    code = EXIT_CONFIG;
  }
  return code;
}

/** The merged configuration as TOML, every value commented with its origin (`default` or the file). */
export function renderConfig(loaded: Pick<LoadedConfig, 'config' | 'sources' | 'origins'>): string {
  const lines = [`# layers: defaults${loaded.sources.map((s) => ` → ${s}`).join('')}`];
  for (const [section, values] of Object.entries(loaded.config as Config)) {
    lines.push('', `[${section}]`);
    for (const [key, value] of Object.entries(values as Record<string, unknown>)) {
      const origin = loaded.origins[`${section}.${key}`] ?? 'default';
      lines.push(`${key} = ${JSON.stringify(value)}  # ${origin}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

