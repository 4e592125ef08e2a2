/** One file the packages install (packaging/installed-files.mjs). */
export interface InstalledFile {
  path: string;
  mode: number;
  from?: string;
  text?: string;
  made?: 'executable' | 'default-config' | 'changelog-gz';
  config?: boolean;
  only?: 'deb' | 'rpm';
}
export const INSTALLED_FILES: InstalledFile[];
export const ENABLED_UNITS: string[];
export const ENABLED_TIMERS: string[];
export const ALL_UNITS: string[];
export function filesFor(format: 'deb' | 'rpm'): InstalledFile[];
export const NODE_PROGRAM_DIR: string;
