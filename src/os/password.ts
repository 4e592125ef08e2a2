/**
 * The password step (spec §8.3): locked by default; when the provisioning media carried a password it is set
 * with chpasswd, the `user:password` line written to its stdin only and the buffer zeroed afterwards.
 */
import { BootstateError } from '../errors.js';
import type { PasswordBackendName } from '../config/defaults.js';
import type { SecretStore } from '../secrets.js';
import type { Backend, OsContext } from './backends.js';
import type { StepResult } from './provisioner.js';
import { MAX_PASSWORD_LENGTH } from './validate.js';

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

/** The password backends by configured name; both lock with their own tool and set through chpasswd. */
export const PASSWORD_BACKENDS: Record<string, Backend<PasswordArgs>> = {
  passwd: async (args, context, signal) => {
    if (args.secrets.hasPassword()) return setWithChpasswd(args, context, signal);
    await context.run(['passwd', '-l', args.username], { signal, timeoutMs: 30_000 });
    return { backend: 'passwd', detail: `password locked for ${args.username}` };
  },
  usermod: async (args, context: OsContext, signal) => {
    if (args.secrets.hasPassword()) return setWithChpasswd(args, context, signal);
    await context.run(['usermod', '--lock', args.username], { signal, timeoutMs: 30_000 });
    return { backend: 'usermod', detail: `password locked for ${args.username}` };
  },
} satisfies Record<PasswordBackendName, Backend<PasswordArgs>>;
