/**
 * What deprovision removes under WALinuxAgent's paths. Without `--waagent-state` only the goal state's certificates
 * and keys bootstate placed in /var/lib/waagent, proven bootstate's by the record it writes before placing them
 * (src/os/certificates/certificate-files.ts); on an image provisioned before that record existed, by their names alone when
 * WALinuxAgent is not installed, because then nothing else writes those names. With `--waagent-state`, what
 * `waagent -deprovision` removes of its own: the contents of its state directory and of its extension log directory
 * (the directories stay), and its log. A directory that is a symlink is never entered.
 */
import path from 'node:path';
import type { Config } from '../config/defaults.js';
import { waagentSetting } from '../doctor/waagent.js';
import { PLACED_NAME, PLACED_RECORD, placedNames, WAAGENT_DIR, WAAGENT_PROGRAMS } from '../os/certificates/certificate-files.js';
import { readRegularInRoot } from '../system/paths.js';
import type { PlanPart } from './plan-types.js';
import { entryAt, namesIn, regularFilesIn, tempFilesOf } from './tree.js';

/** WALinuxAgent's extension log directory and its log (`Extension.LogDir`'s default; the log's path is fixed). */
export const WAAGENT_EXTENSION_LOGS = '/var/log/azure';
export const WAAGENT_LOG = /^waagent\.log(?:\.\d+)?(?:\.gz)?$/;

/** The changes under WALinuxAgent's paths, and what was found and left or refused. */
export async function waagentChanges(root: string, config: Config, options: { waagentState: boolean }): Promise<PlanPart> {
  if (options.waagentState) return waagentState(root);
  const part: PlanPart = { changes: [], notes: [], refused: [] };
  const record = await readRegularInRoot(root, path.posix.join(config.data_dir.path, PLACED_RECORD));
  const dir = await entryAt(root, WAAGENT_DIR);
  if (dir === null) return part;
  if (!dir.isDirectory()) {
    const what = `${WAAGENT_DIR} is ${dir.isSymbolicLink() ? 'a symlink' : 'not a directory'}`;
    if (record !== null && placedNames(record).length > 0) part.refused.push(`${what}: the certificates bootstate placed there were not removed (it is never followed)`);
    return part;
  }
  const legacy = record === null && !(await waagentInstalled(root));
  const ours = new Set(record !== null ? placedNames(record) : []);
  const others: string[] = [];
  for (const name of (await namesIn(root, WAAGENT_DIR)).filter((n) => PLACED_NAME.test(n))) {
    const file = path.posix.join(WAAGENT_DIR, name);
    const entry = await entryAt(root, file);
    if (!ours.has(name) && !(legacy && entry?.isFile() && entry.uid === 0)) {
      others.push(name);
    } else if (!entry?.isFile()) {
      part.refused.push(`${file}, which bootstate placed, is not a regular file now: not removed`);
    } else {
      const what = name.endsWith('.prv') ? 'private key of a goal state certificate' : 'goal state certificate';
      part.changes.push({ kind: 'remove', path: file, what: `${what} bootstate placed${legacy ? ' (by its name: no record, WALinuxAgent not installed)' : ''}` });
    }
  }
  for (const file of await regularFilesIn(root, WAAGENT_DIR, tempFilesOf(PLACED_NAME))) part.changes.push({ kind: 'remove', path: file, what: 'unfinished write of a goal state certificate or key' });
  if (others.length > 0) {
    const why = record !== null ? 'bootstate\'s record does not name them' : 'bootstate kept no record and WALinuxAgent is installed';
    part.notes.push(`${others.length} certificate or key file(s) in ${WAAGENT_DIR} left: ${why}, so they are WALinuxAgent's (${others.join(', ')}); --waagent-state removes WALinuxAgent's state as waagent -deprovision does`);
  }
  return part;
}

/** `--waagent-state`: what `waagent -deprovision` removes of WALinuxAgent's own (its directories' contents and log). */
async function waagentState(root: string): Promise<PlanPart> {
  const part: PlanPart = { changes: [], notes: [], refused: [] };
  for (const [dir, what] of [[WAAGENT_DIR, 'WALinuxAgent state'], [WAAGENT_EXTENSION_LOGS, 'WALinuxAgent extension log']] as const) {
    const entry = await entryAt(root, dir);
    if (entry === null) continue;
    if (!entry.isDirectory()) {
      part.refused.push(`${dir} is ${entry.isSymbolicLink() ? 'a symlink' : 'not a directory'}: its contents were not removed (it is never followed)`);
      continue;
    }
    for (const name of await namesIn(root, dir)) {
      const p = path.posix.join(dir, name);
      part.changes.push({ kind: 'remove', path: p, what, ...((await entryAt(root, p))?.isDirectory() ? { recursive: true } : {}) });
    }
  }
  for (const file of await regularFilesIn(root, '/var/log', WAAGENT_LOG)) part.changes.push({ kind: 'remove', path: file, what: 'WALinuxAgent log' });
  const conf = await readRegularInRoot(root, '/etc/waagent.conf');
  for (const [key, fallback] of [['Lib.Dir', WAAGENT_DIR], ['Extension.LogDir', WAAGENT_EXTENSION_LOGS]] as const) {
    const configured = conf === null ? null : waagentSetting(conf, key);
    if (configured !== null && path.posix.normalize(configured) !== fallback) {
      part.notes.push(`/etc/waagent.conf sets ${key}=${configured}: only ${fallback} was looked at; a configured directory is not emptied by deprovision`);
    }
  }
  return part;
}

async function waagentInstalled(root: string): Promise<boolean> {
  for (const program of WAAGENT_PROGRAMS) if ((await entryAt(root, program)) !== null) return true;
  return false;
}
