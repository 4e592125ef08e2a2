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

/** What the sshd binary on PATH says of itself, read once per process (about 1 MB, never run). */
interface SshdBinary {
  dumpFlags: string[];
  keysPerConnection: boolean;
}

let memo: Promise<SshdBinary> | undefined;

function sshdBinary(): Promise<SshdBinary> {
  memo ??= (async () => {
    const binary = await findOnPath('sshd');
    const text = binary ? await readFile(binary, 'latin1').catch(() => '') : '';
    return { dumpFlags: dumpFlagsFromBinary(text), keysPerConnection: keysPerConnectionFromBinary(text) };
  })();
  return memo;
}

/** The flags to try, in order, for `sshd -G`/`-T` dumps. */
export async function sshdDumpFlags(): Promise<string[]> {
  return [...(await sshdBinary()).dumpFlags];
}

/**
 * Whether the sshd binary in `text` reads its host keys again for every connection. Before OpenSSH 9.8 the listener
 * re-executes itself for each connection (`sshd -R`), and that process loads the keys from disk: a key file added
 * while sshd runs is offered from the next connection on. From 9.8 the per-connection work is `sshd-session`, which
 * gets the keys the listener loaded at its start; the binary then names that program. A binary without sshd's usage
 * line is not recognised: false, the safe answer (keys made before logins start).
 */
export function keysPerConnectionFromBinary(text: string): boolean {
  return /usage: sshd \[-[0-9A-Za-z]+\]/.test(text) && !text.includes('sshd-session');
}

/** Whether this machine's sshd loads its host keys per connection (see above). */
export async function sshdLoadsKeysPerConnection(): Promise<boolean> {
  return (await sshdBinary()).keysPerConnection;
}
