/**
 * sshd PasswordAuthentication (docs/protocol.md#sshd-password-policy). sshd keeps the first value it reads and includes
 * `sshd_config.d/*.conf` in lexical order, so our drop-in is named to sort first (`00-bootstate.conf`); an sshd_config
 * without that Include gets the setting itself (sshd-main-config.ts). What counts is the effective value, which
 * `sshd -T` reports and we check. sshd is reloaded when it runs under
 * systemd; otherwise the unit's `Before=ssh.service` ordering means sshd starts after we wrote the file.
 */
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { SshConfig } from '../../config/defaults.js';
import { BootstateError } from '../../core/errors.js';
import { writeFileAtomic } from '../../system/atomic.js';
import type { OsContext } from '../backends.js';
import { sshdDumpValue } from './authorized-keys-file.js';
import { firstLine, isCommandMissing, stderrOf } from '../../system/exec.js';
import { exists, resolveInRoot, under } from '../../system/paths.js';
import { restoreContexts } from '../selinux.js';
import { setMainConfigPasswordAuthentication } from './sshd-main-config.js';
import type { StepResult } from '../provisioner.js';

export const SSHD_DROPIN_NAME = '00-bootstate.conf';

/** The drop-in's text for a PasswordAuthentication value. */
export function sshdDropIn(passwordAuthentication: boolean): string {
  return `# Written by bootstate from provisioning metadata. Named to sort first: sshd keeps the first value.\nPasswordAuthentication ${passwordAuthentication ? 'yes' : 'no'}\n`;
}

/** Whether the main sshd_config text includes the drop-in directory (absolute or relative to /etc/ssh). */
export function includesDropInDir(mainConfig: string, dropInDir: string, mainConfigPath: string): boolean {
  const base = path.posix.dirname(mainConfigPath);
  return mainConfig.split('\n').some((line) => {
    const [keyword, ...args] = line.trim().split(/\s+/);
    if (keyword?.toLowerCase() !== 'include') return false;
    return args.some((arg) => {
      const absolute = arg.startsWith('/') ? arg : `${base}/${arg}`;
      return path.posix.dirname(path.posix.normalize(absolute)) === path.posix.normalize(dropInDir) && /\*(\.conf)?$/.test(arg);
    });
  });
}

/**
 * Writes the drop-in (or, when sshd_config never includes its directory, the main file), checks the effective value
 * with `sshd -T`, and reloads sshd when systemd runs it.
 */
export async function configureSshd(passwordAuthentication: boolean, config: SshConfig, context: OsContext, signal: AbortSignal): Promise<StepResult> {
  if (!config.configure_sshd_password_authentication) {
    return { backend: 'none', detail: 'ssh.configure_sshd_password_authentication is false' };
  }
  const warnings: string[] = [];
  const mainPath = under(context.root, config.sshd_config_path);
  const want = passwordAuthentication ? 'yes' : 'no';
  const main = await readFile(mainPath, 'utf8').catch(() => null);
  const written = main !== null && !includesDropInDir(main, config.sshd_config_dir, config.sshd_config_path)
    ? await writeMainConfig(want, config, context, signal)
    : await writeDropIn(want, config, context);
  warnings.push(...(await restoreContexts(written.labelled, context, signal)));

  await ensureSshdRuntimeDir(context.root);
  let detail = written.detail;
  let pidFile: string | null = null;
  try {
    const dump = await context.run(['sshd', '-T', '-f', mainPath], { signal, timeoutMs: 30_000 });
    pidFile = sshdDumpValue(dump.stdout, 'pidfile');
    const effective = sshdDumpValue(dump.stdout, 'passwordauthentication');
    if (effective !== want) {
      throw sshdError(`sshd's effective PasswordAuthentication is ${effective ?? 'unset'}, wanted ${want}: an earlier setting wins over ${written.file}`, [
        ['path', written.file],
        ['expected', want],
        ['effective', effective ?? 'unset'],
      ]);
    }
    detail += '; verified with sshd -T';
  } catch (error) {
    // No sshd at all: there is no SSH login whose policy could differ. An sshd that cannot read its own
    // configuration will not start either, and the metadata asked for a value: unproven is a failure.
    if (!isCommandMissing(error)) {
      // The main file is sshd's own: an edit sshd did not take is undone, so sshd starts as the image had it.
      await written.restore().catch(() => undefined);
      if (error instanceof BootstateError && error.code === 'SSHD_CONFIG_FAILED') throw error;
      const why = firstLine(stderrOf(error));
      throw sshdError(`sshd -T failed (${why}): the effective PasswordAuthentication (wanted ${want}) cannot be confirmed`, [
        ['path', written.file],
        ['expected', want],
        ['sshd_error', why],
      ], error);
    }
    warnings.push('sshd is not installed; effective value not verified');
  }

  const backend = written.backend;
  if (!config.reload_sshd) return { backend, detail: `${detail}; reload disabled`, warnings };
  if (!(await systemdIsInit(context.root))) return { backend, detail: `${detail}; systemd is not PID 1, sshd not reloaded`, warnings };
  // A listening sshd writes its PidFile; without one there is no daemon holding an older configuration (on a first
  // boot sshd.service is ordered after this unit, and a socket-activated sshd reads its configuration when it starts),
  // so the systemctl round trip is left out. PidFile none tells nothing: then systemctl decides, as before.
  if (pidFile !== null && pidFile !== 'none' && !(await exists(under(context.root, pidFile)))) {
    return { backend, detail: `${detail}; sshd is not running (no ${pidFile}), nothing to reload`, warnings };
  }
  const reload = await context
    .run(['systemctl', 'try-reload-or-restart', 'ssh.service', 'sshd.service'], { signal, timeoutMs: 60_000, allowFailure: true })
    .catch((error: unknown) => ({ exitCode: -1, stderr: stderrOf(error) }));
  // One of the two names is usually absent, which makes systemctl exit non-zero after reloading the other.
  if (reload.exitCode !== 0 && !/not (found|loaded)/i.test(reload.stderr)) warnings.push(`sshd reload: ${firstLine(reload.stderr)}`);
  return { backend, detail: `${detail}; sshd reloaded if running`, warnings };
}

/** The file that now carries the setting, and how to take a change back. */
interface Written {
  backend: 'sshd_config.d' | 'sshd_config';
  file: string;
  /** What was written, to give back its SELinux label. */
  labelled: string[];
  detail: string;
  restore(): Promise<void>;
}

async function writeDropIn(want: string, config: SshConfig, context: OsContext): Promise<Written> {
  const dir = under(context.root, config.sshd_config_dir);
  const file = path.join(dir, SSHD_DROPIN_NAME);
  try {
    await mkdir(dir, { recursive: true, mode: 0o755 });
    await writeFileAtomic(file, sshdDropIn(want === 'yes'), { mode: 0o600, ...context.rootOwner });
  } catch (error) {
    throw sshdError(`cannot write ${file}: ${(error as Error).message}`, [['path', file]], error);
  }
  // The drop-in is ours alone: left in place, it changes nothing an earlier setting overrides.
  return { backend: 'sshd_config.d', file, labelled: [file], detail: `wrote ${file} (PasswordAuthentication ${want})`, restore: async () => undefined };
}

async function writeMainConfig(want: 'yes' | 'no', config: SshConfig, context: OsContext, signal: AbortSignal): Promise<Written> {
  let file = under(context.root, config.sshd_config_path);
  try {
    // A linked sshd_config is edited where it lives: replacing the link with a file would cut it off.
    file = resolveInRoot(context.root, config.sshd_config_path);
    const write = await setMainConfigPasswordAuthentication(file, want, signal);
    const what = write.changed
      ? `set PasswordAuthentication ${want} in ${file} (no Include of ${config.sshd_config_dir}; original kept as ${write.backup})`
      : `${file} already sets PasswordAuthentication ${want} first (no Include of ${config.sshd_config_dir})`;
    return { backend: 'sshd_config', file, labelled: write.changed ? [file, write.backup!] : [], detail: what, restore: write.restore };
  } catch (error) {
    throw sshdError(`cannot write ${file}: ${(error as Error).message}`, [['path', file]], error);
  }
}

/** Creates /run/sshd: sshd refuses to run (even `-T`) without it, and only its own unit normally creates it. */
export async function ensureSshdRuntimeDir(root: string): Promise<void> {
  await mkdir(under(root, '/run/sshd'), { recursive: true, mode: 0o755 }).catch(() => undefined);
}

/** Whether systemd is the init system (the documented check: /run/systemd/system exists). */
export async function systemdIsInit(root = '/'): Promise<boolean> {
  return exists(under(root, '/run/systemd/system'));
}

function sshdError(message: string, data: Array<[string, string]>, cause?: unknown): BootstateError {
  return new BootstateError('SSHD_CONFIG_FAILED', message, { data: [...data, ['error', message]], cause });
}
