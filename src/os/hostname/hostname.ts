/**
 * Hostname backends (docs/protocol.md#hostname): `hostnamectl set-hostname` when systemd-hostnamed answers; `hostname` writes
 * /etc/hostname atomically and sets the running name with hostname(1).
 */
import { writeFileAtomic } from '../../system/atomic.js';
import type { HostnameBackendName } from '../../config/defaults.js';
import type { Backend } from '../backends.js';
import { under } from '../../system/paths.js';

/**
 * How long `hostnamectl` may take. Activating systemd-hostnamed takes well under a second even on a busy first
 * boot; when it cannot start, D-Bus answers only after its 25 s activation timeout and logins would wait with it.
 * Past this bound the process group is killed and the `hostname` backend sets the same name.
 */
export const HOSTNAMECTL_TIMEOUT_MS = 5_000;

/** The hostname backends by configured name. */
export const HOSTNAME_BACKENDS: Record<string, Backend<string>> = {
  hostnamectl: async (name, context, signal) => {
    await context.run(['hostnamectl', 'set-hostname', name], { signal, timeoutMs: HOSTNAMECTL_TIMEOUT_MS });
    return { backend: 'hostnamectl', detail: `hostname set to ${name}` };
  },
  hostname: async (name, context, signal) => {
    await writeFileAtomic(under(context.root, '/etc/hostname'), `${name}\n`, { mode: 0o644 });
    await context.run(['hostname', name], { signal, timeoutMs: 30_000 });
    return { backend: 'hostname', detail: `hostname set to ${name} (/etc/hostname written)` };
  },
} satisfies Record<HostnameBackendName, Backend<string>>;
