/**
 * PasswordAuthentication in the main `sshd_config`, for images whose sshd never reads `sshd_config.d` (Azure Linux,
 * older RHEL: no `Include`). sshd keeps the first value it reads for a keyword; a `Match` block ends the global
 * section, and what lies in one applies only to the connections it matches, so it is left alone. An `Include` before
 * a global setting may set the keyword first, so the setting is put ahead of it. The file is replaced atomically
 * with its own owner and mode, after a byte-for-byte copy of the original is kept beside it.
 */
import { readFile, stat } from 'node:fs/promises';
import { writeFileAtomic } from '../../system/atomic.js';
import { exists } from '../../system/paths.js';

/** The copy of the image's own sshd_config, next to it: written once, so it stays the original across boots. */
export const MAIN_CONFIG_BACKUP_SUFFIX = '.bootstate-orig';

const MARK = '# Set by bootstate from provisioning metadata. First, so it wins: sshd keeps the first value it reads.';

/** The lower-cased keyword of an sshd_config line (`Key value` or `Key=value`); null for blanks and comments. */
export function sshdKeyword(line: string): string | null {
  const m = /^\s*([A-Za-z][A-Za-z0-9]*)(?:\s*=|\s|$)/.exec(line);
  return m ? m[1]!.toLowerCase() : null;
}

/**
 * `text` with the global PasswordAuthentication set to `value`: the first global line is replaced when nothing that
 * could set it earlier (an `Include`) comes before it, otherwise a line is put at the top. Text that already says so
 * comes back unchanged.
 */
export function withPasswordAuthentication(text: string, value: 'yes' | 'no'): string {
  const setting = `PasswordAuthentication ${value}`;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const keyword = sshdKeyword(lines[i]!);
    if (keyword === 'match' || keyword === 'include') break;
    if (keyword === 'passwordauthentication') {
      if (lines[i] === setting) return text;
      lines[i] = setting;
      return lines.join('\n');
    }
  }
  return `${MARK}\n${setting}\n${text}`;
}

/** What writing the main configuration did, for the step's detail. */
export interface MainConfigWrite {
  changed: boolean;
  backup: string | null;
  /** Puts the text that was there before back (after a failed check); a no-op when nothing changed. */
  restore(): Promise<void>;
}

/**
 * Sets PasswordAuthentication in the sshd_config at `file` (a path on this system, links already resolved), keeping
 * its owner and mode; the first change keeps the original as `<file>.bootstate-orig` with the same owner and mode.
 */
export async function setMainConfigPasswordAuthentication(file: string, value: 'yes' | 'no', signal: AbortSignal): Promise<MainConfigWrite> {
  const info = await stat(file);
  if (!info.isFile()) throw new Error(`${file} is not a regular file`);
  // The file is bytes: Latin-1 maps each byte to one character and back, so a comment in another encoding (or
  // bytes that are no text at all) comes out as it went in, where UTF-8 would turn them into U+FFFD.
  const original = await readFile(file);
  const edited = withPasswordAuthentication(original.toString('latin1'), value);
  if (edited === original.toString('latin1')) return { changed: false, backup: null, restore: async () => undefined };
  const next = Buffer.from(edited, 'latin1');
  const owner = { mode: info.mode & 0o7777, uid: info.uid, gid: info.gid, signal };
  const backup = `${file}${MAIN_CONFIG_BACKUP_SUFFIX}`;
  const keptBefore = await exists(backup);
  if (!keptBefore) await writeFileAtomic(backup, original, owner);
  await writeFileAtomic(file, next, owner);
  return {
    changed: true,
    backup,
    restore: () => writeFileAtomic(file, original, { ...owner, signal: undefined }),
  };
}
