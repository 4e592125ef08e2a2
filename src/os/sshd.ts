/**
 * sshd PasswordAuthentication (docs/protocol.md#sshd-password-policy). sshd keeps the first value it reads and includes
 * `sshd_config.d/*.conf` in lexical order, so our drop-in is named to sort first (`00-bootstate.conf`); what
 * counts is the effective value, which `sshd -T` reports and we check. sshd is reloaded when it runs under
 * systemd; otherwise the unit's `Before=ssh.service` ordering means sshd starts after we wrote the file.
 */
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { SshConfig } from '../config/defaults.js';
import { BootstateError } from '../core/errors.js';
import { writeFileAtomic } from './atomic.js';
import type { OsContext } from './backends.js';
import { sshdDumpValue } from './authorized-keys-file.js';
import { firstLine, isCommandMissing, stderrOf } from './exec.js';
import { exists, under } from './paths.js';
import type { StepResult } from './provisioner.js';

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

/** Writes the drop-in, checks the effective value with `sshd -T`, and reloads sshd when systemd runs it. */
export async function configureSshd(passwordAuthentication: boolean, config: SshConfig, context: OsContext, signal: AbortSignal): Promise<StepResult> {
  if (!config.configure_sshd_password_authentication) {
    return { backend: 'none', detail: 'ssh.configure_sshd_password_authentication is false' };
  }
  const warnings: string[] = [];
  const dir = under(context.root, config.sshd_config_dir);
  const file = path.join(dir, SSHD_DROPIN_NAME);
  const mainPath = under(context.root, config.sshd_config_path);
  const want = passwordAuthentication ? 'yes' : 'no';
  try {
    await mkdir(dir, { recursive: true, mode: 0o755 });
    await writeFileAtomic(file, sshdDropIn(passwordAuthentication), { mode: 0o600, ...context.rootOwner });
  } catch (error) {
    throw sshdError(`cannot write ${file}: ${(error as Error).message}`, [['path', file]], error);
  }
  const main = await readFile(mainPath, 'utf8').catch(() => null);
  if (main !== null && !includesDropInDir(main, config.sshd_config_dir, config.sshd_config_path)) {
    warnings.push(`${config.sshd_config_path} has no Include for ${config.sshd_config_dir}; the drop-in may be ignored`);
  }

  await ensureSshdRuntimeDir(context.root);
  let detail = `wrote ${file} (PasswordAuthentication ${want})`;
  let pidFile: string | null = null;
  try {
    const dump = await context.run(['sshd', '-T', '-f', mainPath], { signal, timeoutMs: 30_000 });
    pidFile = sshdDumpValue(dump.stdout, 'pidfile');
    const effective = sshdDumpValue(dump.stdout, 'passwordauthentication');
    if (effective !== want) {
      throw sshdError(`sshd's effective PasswordAuthentication is ${effective ?? 'unset'}, wanted ${want}: an earlier setting wins over ${file}`, [
        ['path', file],
        ['expected', want],
        ['effective', effective ?? 'unset'],
      ]);
    }
    detail += '; verified with sshd -T';
  } catch (error) {
    if (error instanceof BootstateError && error.code === 'SSHD_CONFIG_FAILED') throw error;
    // No sshd at all: there is no SSH login whose policy could differ. An sshd that cannot read its own
    // configuration will not start either, and the metadata asked for a value: unproven is a failure.
    if (!isCommandMissing(error)) {
      const why = firstLine(stderrOf(error));
      throw sshdError(`sshd -T failed (${why}): the effective PasswordAuthentication (wanted ${want}) cannot be confirmed`, [
        ['path', file],
        ['expected', want],
        ['sshd_error', why],
      ], error);
    }
    warnings.push('sshd is not installed; effective value not verified');
  }

  if (!config.reload_sshd) return { backend: 'sshd_config.d', detail: `${detail}; reload disabled`, warnings };
  if (!(await systemdIsInit(context.root))) return { backend: 'sshd_config.d', detail: `${detail}; systemd is not PID 1, sshd not reloaded`, warnings };
  // A listening sshd writes its PidFile; without one there is no daemon holding an older configuration (on a first
  // boot sshd.service is ordered after this unit, and a socket-activated sshd reads its configuration when it starts),
  // so the systemctl round trip is left out. PidFile none tells nothing: then systemctl decides, as before.
  if (pidFile !== null && pidFile !== 'none' && !(await exists(under(context.root, pidFile)))) {
    return { backend: 'sshd_config.d', detail: `${detail}; sshd is not running (no ${pidFile}), nothing to reload`, warnings };
  }
  const reload = await context
    .run(['systemctl', 'try-reload-or-restart', 'ssh.service', 'sshd.service'], { signal, timeoutMs: 60_000, allowFailure: true })
    .catch((error: unknown) => ({ exitCode: -1, stderr: stderrOf(error) }));
  // One of the two names is usually absent, which makes systemctl exit non-zero after reloading the other.
  if (reload.exitCode !== 0 && !/not (found|loaded)/i.test(reload.stderr)) warnings.push(`sshd reload: ${firstLine(reload.stderr)}`);
  return { backend: 'sshd_config.d', detail: `${detail}; sshd reloaded if running`, warnings };
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
