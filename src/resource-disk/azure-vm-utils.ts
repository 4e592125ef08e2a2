/**
 * Whether azure-vm-utils' own temporary disk setup owns the disks here. Its `azure-ephemeral-disk-setup.service` is
 * opt-in (installed, not enabled); once enabled it formats the local NVMe disks (one md RAID0 over several), or the
 * SCSI resource disk when its configuration asks, and mounts the result through an /etc/fstab line whose options
 * carry `comment=azure-ephemeral-disk-setup`. Two agents formatting the same disks, or mounting at the same place,
 * undo each other's work: while either sign is there, bootstate touches no disk and says why.
 */
import { readdir, readFile, readlink } from 'node:fs/promises';
import path from 'node:path';

export const SETUP_UNIT = 'azure-ephemeral-disk-setup.service';
export const FSTAB_MARK = 'comment=azure-ephemeral-disk-setup';

export interface ClaimEnv {
  /** `/etc/systemd/system`: where `systemctl enable` links the unit (in `<target>.wants/` or `.requires/`). */
  unitDir: string;
  /** `/etc/fstab`. */
  fstab: string;
}

/** The `.wants`/`.requires` link that enables the setup unit, or null when none does or the unit is masked. */
async function enabledBy(unitDir: string): Promise<string | null> {
  const masked = await readlink(path.join(unitDir, SETUP_UNIT)).then((t) => t === '/dev/null', () => false);
  if (masked) return null;
  const dirs = (await readdir(unitDir).catch(absentIsEmpty)).filter((d) => /\.(wants|requires)$/.test(d)).sort();
  for (const dir of dirs) {
    const entries = await readdir(path.join(unitDir, dir)).catch(absentIsEmpty);
    if (entries.includes(SETUP_UNIT)) return path.join(unitDir, dir, SETUP_UNIT);
  }
  return null;
}

function absentIsEmpty(error: NodeJS.ErrnoException): string[] {
  if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return [];
  throw error;
}

/** fstab's `\040`-style escapes undone. */
const unescape = (field: string) => field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));

/** `a` is `b` or lies under it. */
const within = (a: string, b: string) => a === b || a.startsWith(b.endsWith('/') ? b : `${b}/`);

/** Its fstab line for a mount point that is, holds or lies under `mountPoint`, as the mount point it names; or null. */
async function fstabLine(fstab: string, mountPoint: string): Promise<string | null> {
  const text = await readFile(fstab, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return '';
    throw error;
  });
  for (const line of text.split('\n')) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 4 || fields[0]!.startsWith('#')) continue;
    const where = path.posix.normalize(unescape(fields[1]!));
    if (fields[3]!.split(',').includes(FSTAB_MARK) && (within(where, mountPoint) || within(mountPoint, where))) return where;
  }
  return null;
}

/**
 * Why azure-vm-utils' setup owns the temporary disks here, or null when nothing says so. A file that cannot be read
 * (other than absent) counts as a claim: a disk is never formatted on the absence of a proof.
 */
export async function azureVmUtilsClaim(env: ClaimEnv, mountPoint: string): Promise<string | null> {
  try {
    const link = await enabledBy(env.unitDir);
    if (link) return `azure-vm-utils' ${SETUP_UNIT} is enabled (${link})`;
    const where = await fstabLine(env.fstab, mountPoint);
    if (where) return `${env.fstab} mounts azure-vm-utils' disk (${FSTAB_MARK}) at ${where}`;
    return null;
  } catch (error) {
    return `whether azure-vm-utils' ${SETUP_UNIT} owns the disks could not be told: ${(error as Error).message}`;
  }
}
