/**
 * Loads the configuration in layers, later ones winning key by key: built-in defaults → the system file →
 * every `*.toml` in the drop-in directory (sorted) → `--config FILE|DIR` (or `BOOTSTATE_CONFIG`). Each file is
 * validated on its own, so an error names the file and key that caused it. Unknown sections and keys are warnings
 * (unknown-keys.ts), and the file each value came from is kept for `bootstate config check`. A path in the layers
 * that exists but is not a regular file (a FIFO, a device, a directory, a dangling symlink) is refused with a warning
 * naming it; only a `--config` FILE that is one is an error. With `root` (doctor --root), every path is a path in the
 * image under it, resolved inside it as chroot(2) would.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { join } from 'node:path';
import * as v from 'valibot';
import { parse as parseToml } from 'smol-toml';
import { BootstateError } from '../core/errors.js';
import { type Config, DEFAULT_CONFIG, SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE } from './defaults.js';
import { ConfigSchema, type Layer, LayerSchema, describeIssue, isTable, normalizeAzureInitNames, normalizeOlderNames } from './schema.js';
import { setAsideUnknown } from './unknown-keys.js';
import { kindOf } from '../system/open-regular.js';
import { resolveInRoot } from '../system/paths.js';

export interface LoadConfigOptions {
  systemFile?: string;
  dropinDir?: string;
  /** `--config FILE|DIR`; wins over `BOOTSTATE_CONFIG`. */
  override?: string;
  /** Where `BOOTSTATE_CONFIG` is read from; defaults to process.env. */
  env?: Record<string, string | undefined>;
  /**
   * The image the paths above belong to (default `/`, this system): each is resolved inside it, symlinks included,
   * and named as `<root>/<path>` in sources, origins and messages.
   */
  root?: string;
  /**
   * Reads only these keys of each file (`{ firewall: ['enable'] }`); every other section and key is left unread, so
   * a broken value elsewhere cannot fail the load, and the rest of the result holds the defaults. A file that cannot
   * be read or parsed still fails it: what it says about these keys is unknown.
   */
  only?: Readonly<Record<string, readonly string[]>>;
}

export interface LoadedConfig {
  config: Config;
  /** Files merged, in order. */
  sources: string[];
  /** Things accepted but worth telling the operator (ignored azure-init keys, unknown keys), each naming its file. */
  warnings: string[];
  /** The unknown sections and keys among the warnings: `file: [section] key: unknown key, ignored`. */
  unknown: string[];
  /** The paths refused among the warnings: `file: not a regular file (fifo), ignored`. */
  refused: string[];
  /** `section.key` → the file that set it last; keys absent here have their default. */
  origins: Record<string, string>;
}

/**
 * Builds the effective configuration.
 *
 * @example
 *   const { config, sources } = await loadConfig({ override: '/run/bootstate/test.toml' });
 * @throws BootstateError CONFIG_INVALID naming the file and key, e.g.
 *   `/etc/bootstate/bootstate.toml.d/50-x.toml: [imds] retry_interval_secs: expected number, got string`.
 */
export async function loadConfig(options: LoadConfigOptions = {}): Promise<LoadedConfig> {
  const systemFile = options.systemFile ?? SYSTEM_CONFIG_FILE;
  const dropinDir = options.dropinDir ?? SYSTEM_CONFIG_DROPIN_DIR;
  const override = options.override ?? (options.env ?? process.env).BOOTSTATE_CONFIG;

  const warnings: string[] = [];
  const unknown: string[] = [];
  const refused: string[] = [];
  const place = placeIn(options.root, (shown, why) => {
    refused.push(`${shown}: ${why}, ignored`);
    warnings.push(`${shown}: ${why}, ignored`);
  });
  const files: string[] = [];
  // Synchronous reads: a few small local files, each read as a thread-pool round trip would cost more than the read
  // itself on a booting machine, and nothing else runs before the configuration is known.
  if (regularFile(place, systemFile)) files.push(systemFile);
  files.push(...tomlFilesIn(place, dropinDir, false));
  if (override !== undefined && override !== '') files.push(...overrideFiles(place, override));

  let config: Config = structuredClone(DEFAULT_CONFIG);
  const origins: Record<string, string> = {};
  for (const file of files) {
    const shown = place.shown(file);
    const layer = readLayer(place, file, warnings, unknown, options.only);
    config = mergeLayer(config, layer);
    for (const [section, values] of Object.entries(layer)) {
      for (const [key, value] of Object.entries(values ?? {})) if (value !== undefined) origins[`${section}.${key}`] = shown;
    }
  }
  const checked = v.safeParse(ConfigSchema, config);
  if (!checked.success) {
    throw configError('merged configuration', describeIssue(checked.issues[0], new Map()));
  }
  warnings.push(...durationWarnings(config));
  return { config, sources: files.map((file) => place.shown(file)), warnings, unknown, refused, origins };
}

/** Where the loader finds a path and what it calls it: the path itself, or the path in the image under `root`. */
interface Place {
  /** The name in messages, sources and origins. */
  shown(p: string): string;
  /** The path to open or stat (its last component followed, as open(2) does). */
  real(p: string): string;
  /** The path to lstat (its last component not followed). */
  link(p: string): string;
  /** Records a path (as shown) that exists but is not what a layer must be, with why (`not a regular file (fifo)`). */
  refuse(p: string, why: string): void;
}

function placeIn(root: string | undefined, refuse: (shown: string, why: string) => void): Place {
  if (root === undefined || root === '/') return { shown: (p) => p, real: (p) => p, link: (p) => p, refuse };
  return {
    shown: (p) => join(root, p),
    real: (p) => resolveInRoot(root, p),
    link: (p) => resolveInRoot(root, p, { followLast: false }),
    refuse,
  };
}

/**
 * Durations that are valid one by one but make little sense together. They are warnings, not errors: a total
 * shorter than one attempt is how tests (and impatient images) make the total deadline the only bound.
 */
export function durationWarnings(config: Config): string[] {
  const warnings: string[] = [];
  const shorter = (section: string, total: string, totalSecs: number, attempt: string, attemptSecs: number, effect: string) => {
    if (totalSecs < attemptSecs) warnings.push(`[${section}] ${total} (${totalSecs} s) is shorter than ${attempt} (${attemptSecs} s): ${effect}`);
  };
  shorter('imds', 'total_retry_timeout_secs', config.imds.total_retry_timeout_secs, 'request_timeout_secs', config.imds.request_timeout_secs, 'the total deadline ends the first attempt');
  shorter('wireserver', 'total_retry_timeout_secs', config.wireserver.total_retry_timeout_secs, 'read_timeout_secs', config.wireserver.read_timeout_secs, 'the total deadline ends the first attempt');
  shorter('monitor', 'heartbeat_rollup_secs', config.monitor.heartbeat_rollup_secs, 'heartbeat_period_secs', config.monitor.heartbeat_period_secs, 'one failed measurement reports the plugin unhealthy');
  shorter('monitor', 'imds_rollup_secs', config.monitor.imds_rollup_secs, 'imds_period_secs', config.monitor.imds_period_secs, 'one failed measurement reports IMDS unhealthy');
  // The OS deadline counts from before the hostname is set, so publishing must end strictly earlier to stay a warning.
  const { os, hostname_publishing: publishing } = config;
  if (publishing.enable && os.timeout_secs <= publishing.timeout_secs) {
    warnings.push(
      `[os] timeout_secs (${os.timeout_secs} s) is not longer than [hostname_publishing] timeout_secs (${publishing.timeout_secs} s): a DHCP client that does not answer fails the run instead of leaving a warning`,
    );
  }
  return warnings;
}

/** Overlays one validated layer on a config: per section, keys replace keys; arrays replace arrays. */
export function mergeLayer(config: Config, layer: Layer): Config {
  const merged = structuredClone(config) as unknown as Record<string, Record<string, unknown>>;
  for (const [section, values] of Object.entries(layer)) {
    if (values === undefined) continue;
    for (const [key, value] of Object.entries(values)) {
      if (value !== undefined) merged[section][key] = structuredClone(value);
    }
  }
  return merged as unknown as Config;
}

/** loadConfigOrOnly's answer: the whole configuration, or why not and `only` read alone, or why not even that. */
export type WholeOrOnly =
  | { config: Config; warnings: string[] }
  | { error: unknown; config: Config }
  | { error: unknown; onlyError: unknown };

/**
 * The whole configuration; when it fails to load, the error and `only` read alone over the defaults, so a broken value
 * elsewhere cannot take away the keys a caller must have (the firewall's, the run's startup keys); when even those
 * cannot be read (a file that cannot be read or parsed, one of these keys invalid), both errors.
 */
export async function loadConfigOrOnly(options: LoadConfigOptions, only: NonNullable<LoadConfigOptions['only']>): Promise<WholeOrOnly> {
  try {
    return await loadConfig(options);
  } catch (error) {
    try {
      return { error, config: (await loadConfig({ ...options, only })).config };
    } catch (onlyError) {
      return { error, onlyError };
    }
  }
}

/** Reads, parses and validates one file; warnings about ignored azure-init keys and unknown keys are appended. */
function readLayer(place: Place, path: string, warnings: string[], unknown: string[], only?: LoadConfigOptions['only']): Layer {
  const file = place.shown(path);
  let text: string;
  try {
    text = readRegularFile(place.real(path));
  } catch (error) {
    throw configError(file, `cannot read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = parseToml(text);
  } catch (error) {
    const { line, column } = error as { line?: number; column?: number };
    const at = line !== undefined && column !== undefined ? ` at line ${line}, column ${column}` : '';
    throw configError(file, `not valid TOML${at}: ${(error as Error).message.split('\n')[0]}`);
  }
  if (!isTable(parsed)) throw configError(file, 'not a TOML table');
  const doc = only ? picked(parsed, only) : parsed;
  const names = new Map<string, string>();
  // Older names first: a file's own passwordless_sudo is its say on sudo, which the azure-init default must not override.
  const older = normalizeOlderNames(doc);
  if (older.problem !== null) throw configError(file, older.problem);
  for (const warning of [...older.warnings, ...normalizeAzureInitNames(doc, names)]) warnings.push(`${file}: ${warning}`);
  for (const problem of setAsideUnknown(doc, names)) {
    unknown.push(`${file}: ${problem}`);
    warnings.push(`${file}: ${problem}`);
  }
  const result = v.safeParse(LayerSchema, doc);
  if (!result.success) {
    throw configError(file, result.issues.map((issue) => describeIssue(issue, names)).join('; '));
  }
  return result.output;
}

/** The keys of a parsed file that `only` names; a section that is not a table is kept whole, to be refused. */
function picked(doc: Record<string, unknown>, only: NonNullable<LoadConfigOptions['only']>): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const [section, keys] of Object.entries(only)) {
    const values = doc[section];
    if (values === undefined) continue;
    kept[section] = isTable(values) ? Object.fromEntries(keys.filter((key) => key in values).map((key) => [key, values[key]])) : values;
  }
  return kept;
}

/**
 * Reads a regular file as UTF-8. Opened non-blocking and checked before reading, so a FIFO or device in place of a
 * configuration file is an error at once instead of a first boot that never ends.
 */
function readRegularFile(file: string): string {
  const fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const info = fstatSync(fd);
    if (!info.isFile()) throw Object.assign(new Error('not a regular file'), { code: `not a regular file (${kindOf(info)})` });
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}

/** The files a `--config` value stands for: the file itself, or a directory's sorted `*.toml`. */
function overrideFiles(place: Place, path: string): string[] {
  let info;
  try {
    info = statSync(place.real(path));
  } catch (error) {
    throw configError(place.shown(path), `cannot read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  return info.isDirectory() ? tomlFilesIn(place, path, true) : [path];
}

/**
 * Sorted `*.toml` regular files (or links to them) in a directory; a missing directory is empty unless required, and
 * so is a non-directory in its place (refused). Entries that are not regular files are refused.
 */
function tomlFilesIn(place: Place, dir: string, required: boolean): string[] {
  let names: string[];
  try {
    names = readdirSync(place.real(dir));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (!required && (code === 'ENOENT' || code === 'ENOTDIR')) {
      const what = kindAt(place, dir);
      if (what !== null && what !== 'directory') place.refuse(place.shown(dir), `not a directory (${what})`);
      return [];
    }
    throw configError(place.shown(dir), `cannot list: ${code ?? (error as Error).message}`);
  }
  const files: string[] = [];
  for (const name of names.filter((n) => n.endsWith('.toml')).sort()) {
    if (regularFile(place, join(dir, name))) files.push(join(dir, name));
  }
  return files;
}

/**
 * True when the path is (or links to) a regular file; absent is false; something else in its place (a FIFO, a
 * device, a directory, a dangling symlink) is false and refused; unreadable is an error.
 */
function regularFile(place: Place, path: string): boolean {
  let what: string | null;
  try {
    what = kindAt(place, path);
  } catch (error) {
    throw configError(place.shown(path), `cannot read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  if (what === 'file') return true;
  if (what !== null) place.refuse(place.shown(path), what === 'dangling symlink' ? `dangling symlink (to ${linkTarget(place, path)})` : `not a regular file (${what})`);
  return false;
}

/** What is at a path once links are followed (kindOf's names), `dangling symlink`, or null when nothing is. */
function kindAt(place: Place, path: string): string | null {
  try {
    return kindOf(statSync(place.real(path)));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
  }
  try {
    return lstatSync(place.link(path)).isSymbolicLink() ? 'dangling symlink' : null;
  } catch {
    return null;
  }
}

function linkTarget(place: Place, path: string): string {
  try {
    return readlinkSync(place.link(path));
  } catch {
    return '?';
  }
}

function configError(file: string, problem: string): BootstateError {
  return new BootstateError('CONFIG_INVALID', `${file}: ${problem}`, {
    data: [
      ['file', file],
      ['error', problem],
    ],
  });
}
