/**
 * Which configuration-dump flags this machine's sshd has, read once per process from the usage text compiled into
 * the binary instead of running it: OpenSSH 9.8 added `-G` (dump without host keys), and its usage line lists it
 * (`usage: sshd [-46DdeGiqTtV]`). Older ones, like Debian 12's 9.2, answer `-G` with "unknown option", and asking
 * anyway costs a fork on every first boot. When the binary cannot be read or has no such line, both are tried.
 */
import { constants } from 'node:fs';
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';

export const BOTH_DUMP_FLAGS = ['-G', '-T'] as const;

/** `['-G', '-T']` or `['-T']` from the text of an sshd binary; both when the usage line is not found. */
export function dumpFlagsFromBinary(text: string): string[] {
  const flags = /usage: sshd \[-([0-9A-Za-z]+)\]/.exec(text)?.[1];
  if (!flags) return [...BOTH_DUMP_FLAGS];
  return flags.includes('G') ? [...BOTH_DUMP_FLAGS] : ['-T'];
}

async function findOnPath(command: string): Promise<string | null> {
  for (const dir of (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':')) {
    if (!dir) continue;
    const candidate = path.join(dir, command);
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

let memo: Promise<string[]> | undefined;

/** The flags to try, in order, for `sshd -G`/`-T` dumps; probed once per process. */
export function sshdDumpFlags(): Promise<string[]> {
  memo ??= (async () => {
    const binary = await findOnPath('sshd');
    if (!binary) return [...BOTH_DUMP_FLAGS];
    const text = await readFile(binary, 'latin1').catch(() => '');
    return dumpFlagsFromBinary(text);
  })();
  return memo;
}
