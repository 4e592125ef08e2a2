/**
 * The password step (docs/protocol.md#password): locked by default; when the provisioning media carried a password it is set
 * with chpasswd, the `user:password` line written to its stdin only and the buffer zeroed afterwards.
 */
import { BootstateError } from '../../core/errors.js';
import type { PasswordBackendName } from '../../config/defaults.js';
import type { SecretStore } from '../../core/secrets.js';
import type { Backend, OsContext } from '../backends.js';
import { readRegularInRoot } from '../../system/paths.js';
import type { StepResult } from '../provisioner.js';
import { MAX_PASSWORD_LENGTH, shadowHash } from '../validate.js';

export interface PasswordArgs {
  username: string;
  secrets: SecretStore;
}

/** Sets the stored password with chpasswd (stdin only); rejects values chpasswd would split or mangle. */
export async function setWithChpasswd(args: PasswordArgs, context: OsContext, signal: AbortSignal): Promise<StepResult> {
  await args.secrets.withPassword(async (password) => {
    const text = password.toString('utf8');
    const length = [...text].length;
    if (length > MAX_PASSWORD_LENGTH) {
      throw new BootstateError('PASSWORD_TOO_LONG', `password is longer than ${MAX_PASSWORD_LENGTH} characters`, {
        data: [['length', String(length)], ['max_length', String(MAX_PASSWORD_LENGTH)]],
      });
    }
    if (/[\r\n\0]/.test(text)) {
      throw new BootstateError('PASSWORD_FAILED', 'password contains a line break or NUL', { data: [['problem', 'line break or NUL']] });
    }
    const line = Buffer.concat([Buffer.from(`${args.username}:`), password, Buffer.from('\n')]);
    try {
      await context.run(['chpasswd'], { stdin: line, signal, timeoutMs: 30_000 });
    } finally {
      line.fill(0);
    }
  });
  return { backend: 'chpasswd', detail: `password set for ${args.username}` };
}

/**
 * Whether the user's shadow(5) entry is already locked (its hash field starts with `!`), as useradd leaves every
 * account it creates without `-p`: locking it again changes nothing in the file, so the command is not run (one fork
 * less on a first boot's critical path). Anything unreadable or unexpected reads as not locked, and the tool runs.
 */
export async function lockedInShadow(username: string, context: OsContext): Promise<boolean> {
  return shadowHash(await readRegularInRoot(context.root, '/etc/shadow'), username)?.startsWith('!') ?? false;
}

/** Locks with `argv` unless the shadow entry already is. */
async function lock(backend: PasswordBackendName, argv: string[], args: PasswordArgs, context: OsContext, signal: AbortSignal): Promise<StepResult> {
  if (await lockedInShadow(args.username, context)) {
    return { backend, detail: `password of ${args.username} already locked in /etc/shadow; ${argv[0]} not needed` };
  }
  await context.run(argv, { signal, timeoutMs: 30_000 });
  return { backend, detail: `password locked for ${args.username}` };
}

/** The password backends by configured name; both lock with their own tool and set through chpasswd. */
export const PASSWORD_BACKENDS: Record<string, Backend<PasswordArgs>> = {
  passwd: async (args, context, signal) => {
    if (args.secrets.hasPassword()) return setWithChpasswd(args, context, signal);
    return lock('passwd', ['passwd', '-l', args.username], args, context, signal);
  },
  usermod: async (args, context: OsContext, signal) => {
    if (args.secrets.hasPassword()) return setWithChpasswd(args, context, signal);
    return lock('usermod', ['usermod', '--lock', args.username], args, context, signal);
  },
} satisfies Record<PasswordBackendName, Backend<PasswordArgs>>;
