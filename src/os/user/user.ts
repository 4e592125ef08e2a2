/**
 * The admin user (docs/protocol.md#admin-user): `useradd` with a home directory, the configured shell and groups; an existing
 * user is fine and only gains the groups (`usermod -aG`). Missing groups are created or skipped as configured,
 * with a warning either way. The sudo rule lives in sudoers.ts.
 */
import { access, readFile } from 'node:fs/promises';
import type { UserBackendName, UserProvisionersConfig } from '../../config/defaults.js';
import { BOOTSTATE_USER_COMMENT } from './admin-users.js';
import type { Backend, OsContext } from '../backends.js';
import { under } from '../../system/paths.js';
import type { UserRequest } from '../provisioner.js';
import { readPasswd, usernameProblem } from '../validate.js';

export interface UserArgs extends UserRequest {
  config: UserProvisionersConfig;
}

const GROUP_NAME = /^[a-z_][a-z0-9_-]*\$?$/;

/** The user backends by configured name. */
export const USER_BACKENDS: Record<string, Backend<UserArgs>> = {
  useradd: async (args, context, signal) => {
    const warnings: string[] = [];
    const groups = await resolveGroups(unique([...args.config.groups, ...args.groups]), args.config.missing_groups, context, signal, warnings);
    const exists = (await readPasswd(under(context.root, '/etc/passwd'))).some((e) => e.name === args.username);
    if (exists) {
      if (groups.length) await context.run(['usermod', '-aG', groups.join(','), args.username], { signal, timeoutMs: 60_000 });
      return { backend: 'useradd', detail: `existing user ${args.username}${groups.length ? ` added to ${groups.join(',')}` : ''}`, warnings };
    }
    if (!(await access(under(context.root, args.config.shell)).then(() => true, () => false))) {
      warnings.push(`shell ${args.config.shell} does not exist on this image; logins will fail until it is installed`);
    }
    const argv = ['useradd', '--create-home', '--home-dir', `/home/${args.username}`, '--shell', args.config.shell];
    argv.push('--comment', BOOTSTATE_USER_COMMENT);
    if (groups.length) argv.push('--groups', groups.join(','));
    argv.push(args.username);
    await context.run(argv, { signal, timeoutMs: 60_000 });
    return { backend: 'useradd', detail: `created ${args.username}${groups.length ? ` in ${groups.join(',')}` : ''}`, warnings };
  },
} satisfies Record<UserBackendName, Backend<UserArgs>>;

/** Keeps the groups that exist, creating (`groupadd`) or skipping the others as configured, each with a warning. */
export async function resolveGroups(
  groups: string[],
  missing: 'create' | 'skip',
  context: OsContext,
  signal: AbortSignal,
  warnings: string[],
): Promise<string[]> {
  const known = await readGroupNames(under(context.root, '/etc/group'));
  const kept: string[] = [];
  for (const group of groups) {
    if (!GROUP_NAME.test(group) || group.length > 32) {
      warnings.push(`group ${JSON.stringify(group)} is not a valid group name; skipped`);
    } else if (known.has(group)) {
      kept.push(group);
    } else if (missing === 'create') {
      await context.run(['groupadd', group], { signal, timeoutMs: 60_000 });
      warnings.push(`group ${group} did not exist; created`);
      kept.push(group);
    } else {
      warnings.push(`group ${group} does not exist; skipped (user_provisioners.missing_groups = "skip")`);
    }
  }
  return kept;
}

/** Whether `name` is syntactically a user name (for backends that must not trust their caller). */
export function isPortableName(name: string): boolean {
  return usernameProblem(name) === null;
}

async function readGroupNames(file: string): Promise<Set<string>> {
  try {
    const text = await readFile(file, 'utf8');
    return new Set(text.split('\n').map((l) => l.split(':')[0]!).filter(Boolean));
  } catch {
    return new Set();
  }
}

function unique(items: string[]): string[] {
  return [...new Set(items)];
}
