/**
 * The VM owner's custom data (OVF `CustomData`) and user data (IMDS `compute.userData`): decoded once, held in the
 * SecretStore, and saved for the owner as files readable by root only. Never executed, never logged: only sizes
 * and paths leave this module.
 */
import { chmod, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { WAAGENT_CUSTOM_DATA_PATH, type Config } from '../config/defaults.js';
import { BootstateError } from '../core/errors.js';
import type { SecretName, SecretStore } from '../core/secrets.js';
import { writeFileAtomic } from '../system/atomic.js';
import type { OsContext } from './backends.js';
import { under } from '../system/paths.js';
import type { StepResult } from './provisioner.js';

/**
 * Decodes base64 after removing all whitespace (both sources wrap lines); null when the text is not base64.
 *
 * @example
 *   decodeBase64Data('I2Nsb3Vk\n LWNvbmZpZwo=')?.toString() // '#cloud-config\n'
 */
export function decodeBase64Data(text: string): Buffer | null {
  const compact = text.replace(/\s+/g, '');
  if (compact.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(compact)) return null;
  return Buffer.from(compact, 'base64');
}

export interface CustomDataTarget {
  name: SecretName;
  path: string;
  /** A system path (WALinuxAgent's): resolved under the provisioner's root, so a dry run writes into its tree. */
  system: boolean;
}

/**
 * Where each piece is saved: the configured path, else its name in the data directory. Like the markers and the
 * journal, these paths are used as configured; only WALinuxAgent's fixed path belongs to the system tree.
 */
export function customDataTargets(config: Config): CustomDataTarget[] {
  const { custom_data: cd, data_dir } = config;
  const targets: CustomDataTarget[] = [
    { name: 'customData', path: cd.custom_data_path || path.join(data_dir.path, 'CustomData'), system: false },
    { name: 'userData', path: cd.user_data_path || path.join(data_dir.path, 'UserData'), system: false },
  ];
  if (cd.waagent_compat) targets.push({ name: 'customData', path: WAAGENT_CUSTOM_DATA_PATH, system: true });
  return targets;
}

/**
 * Saves what the store holds, 0600 root in 0700 directories created as needed; nothing held, nothing written.
 * Aborting `signal` (the step abandoned: a SIGTERM, a deadline) stops at the next file, leaving no temp file.
 */
export async function saveCustomData(
  config: Config,
  secrets: SecretStore,
  context: Pick<OsContext, 'root' | 'rootOwner'>,
  signal?: AbortSignal,
): Promise<StepResult> {
  const saved: string[] = [];
  for (const target of customDataTargets(config)) {
    if (!secrets.has(target.name)) continue;
    signal?.throwIfAborted();
    const file = target.system ? under(context.root, target.path) : target.path;
    try {
      const dir = path.dirname(file);
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await secrets.with(target.name, (bytes) =>
        writeFileAtomic(file, bytes, { mode: 0o600, uid: context.rootOwner.uid, gid: context.rootOwner.gid, signal }),
      );
      await chmod(file, 0o600);
      saved.push(`${target.path} (${secrets.with(target.name, (b) => b.length)} bytes)`);
    } catch (error) {
      if (signal?.aborted) throw error;
      throw new BootstateError('CUSTOM_DATA_FAILED', `cannot save ${target.name} to ${target.path}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`, {
        data: [['path', target.path], ['error', (error as NodeJS.ErrnoException).code ?? 'write failed']],
        cause: error,
      });
    }
  }
  return { backend: 'file', detail: saved.length ? `saved ${saved.join(', ')}` : 'no custom data or user data to save' };
}
