/**
 * The systemd units that mount the temporary disk and enable swap on it. They have no [Install] section: nothing
 * starts them at boot but bootstate-resource-disk.service, after it checked the disk on that boot and wrote the
 * device it found into them, so a missing, renamed or re-created disk never holds up a boot, and a fresh NTFS is
 * never mounted in place of the ext4. Every file carries UNIT_MARK, by which `deprovision` knows it is ours.
 */

export const UNIT_DIR = '/etc/systemd/system';
export const UNIT_MARK = '# Written by bootstate resource-disk';
export const SWAP_FILE_NAME = 'swapfile';

/** `systemd-escape --path`: `/mnt/resource` → `mnt-resource`, `/` → `-`. */
export function escapePath(p: string): string {
  const trimmed = p.split('/').filter(Boolean).join('/');
  if (trimmed === '') return '-';
  let out = '';
  for (const [i, ch] of [...Buffer.from(trimmed, 'utf8')].entries()) {
    const c = String.fromCharCode(ch);
    if (c === '/') out += '-';
    else if (/[A-Za-z0-9:_]/.test(c) || (c === '.' && i > 0)) out += c;
    else out += `\\x${ch.toString(16).padStart(2, '0')}`;
  }
  return out;
}

export const mountUnitName = (mountPoint: string) => `${escapePath(mountPoint)}.mount`;
export const swapUnitName = (swapFile: string) => `${escapePath(swapFile)}.swap`;

/** The mount unit for `partition` at `mountPoint`. */
export function mountUnit(partition: string, mountPoint: string, options: string): string {
  return `${UNIT_MARK}; bootstate-resource-disk.service rewrites and starts it on each boot.
[Unit]
Description=Azure temporary disk (resource disk)

[Mount]
What=${partition}
Where=${mountPoint}
Type=ext4
Options=${options}
`;
}

/** The swap unit for the swap file `file` on the mounted temporary disk. */
export function swapUnit(file: string, mountUnitName: string): string {
  return `${UNIT_MARK}; bootstate-resource-disk.service rewrites and starts it on each boot.
[Unit]
Description=Swap file on the Azure temporary disk
Requires=${mountUnitName}
After=${mountUnitName}

[Swap]
What=${file}
`;
}
