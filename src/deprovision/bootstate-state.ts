/**
 * bootstate's own state on the build VM, which deprovision removes: what `clean --logs` removes (markers, run
 * journals, log, KVP records), the custom data and user data it saved, its record of the certificates it placed,
 * the last hostname it published, the monitor's state, the firewall snapshot, the transport keys of a goal state
 * request cut short, the host keys and writes a killed run left under their temporary names, and the temporary
 * disk's units, and the network configuration rendered from the build VM's IMDS (its NICs' MACs and addresses).
 * Each is found by the name bootstate's own writer gives it.
 */
import path from 'node:path';
import type { Config } from '../config/defaults.js';
import { WAAGENT_CUSTOM_DATA_PATH } from '../config/defaults.js';
import { PUBLISHED_FILE } from '../monitor/published-hostname.js';
import { PLACED_RECORD } from '../os/certificates/certificate-files.js';
import { FIREWALL_SNAPSHOT } from '../firewall/firewall.js';
import { isMarkerName } from '../provision/marker.js';
import { readRegularInRoot } from '../system/paths.js';
import { UNIT_DIR, UNIT_MARK } from '../resource-disk/units.js';
import { HEADER } from '../os/network/common.js';
import { renderers } from '../os/network/renderers.js';
import type { Change } from './plan-types.js';
import { directoriesIn, entryAt, isRegular, namesIn, regularFilesIn, tempFilesOf } from './tree.js';

/** The KVP pools Hyper-V uses (`.kvp_pool_0` … `.kvp_pool_4`): the build VM's records in any of them must not ship. */
const KVP_POOLS = [0, 1, 2, 3, 4];
/** Where a goal state request keeps its transport key pair (src/os/certificates/certificate-bundle.ts, under /run). */
const TRANSPORT_PARENT = '/run';
const TRANSPORT_DIR = /^bootstate-transport-[A-Za-z0-9]{6}$/;
/** The temporary names src/os/ssh/host-keys.ts makes new host keys under before renaming them into place. */
const HOST_KEY_TEMP = /^\.bootstate-new-ssh_host_[A-Za-z0-9]+_key(?:\.pub)?$/;

/** bootstate's own state, as `clean --logs` removes it, and everything else of the build VM's it wrote. */
export async function bootstateState(root: string, config: Config): Promise<Change[]> {
  const changes: Change[] = [];
  const dataDir = config.data_dir.path;
  const remove = (p: string, what: string, recursive?: boolean) => changes.push({ kind: 'remove', path: p, what, ...(recursive ? { recursive } : {}) });
  for (const name of (await namesIn(root, dataDir)).filter(isMarkerName)) remove(path.posix.join(dataDir, name), 'provisioned marker');
  const runs = path.posix.join(dataDir, 'runs');
  for (const name of await namesIn(root, runs)) remove(path.posix.join(runs, name), 'run journal', true);
  // The build VM's name: a VM made from the image would otherwise publish its own name once more on its first cycle.
  const published = path.posix.join(dataDir, PUBLISHED_FILE);
  if (await isRegular(root, published)) remove(published, 'last hostname published');
  const record = path.posix.join(dataDir, PLACED_RECORD);
  if (await isRegular(root, record)) changes.push({ kind: 'remove', path: record, what: 'record of the certificates bootstate placed', proof: true });
  const saved = [config.custom_data.custom_data_path || path.posix.join(dataDir, 'CustomData'), config.custom_data.user_data_path || path.posix.join(dataDir, 'UserData')];
  if (config.custom_data.waagent_compat) saved.push(WAAGENT_CUSTOM_DATA_PATH);
  for (const file of saved) {
    if (await isRegular(root, file)) remove(file, 'saved custom data');
    for (const temp of await regularFilesIn(root, path.posix.dirname(file), tempFilesOf(path.posix.basename(file)))) remove(temp, 'unfinished write of saved custom data');
  }
  if (config.log_path.path && (await isRegular(root, config.log_path.path))) remove(config.log_path.path, 'bootstate log');
  for (const file of [config.monitor.state_file, FIREWALL_SNAPSHOT]) {
    if (await isRegular(root, file)) remove(file, file === FIREWALL_SNAPSHOT ? 'firewall snapshot' : 'monitor state');
  }
  for (const dir of await directoriesIn(root, TRANSPORT_PARENT, TRANSPORT_DIR)) remove(dir, 'transport key pair of a goal state request', true);
  for (const file of await regularFilesIn(root, config.host_keys.dir, HOST_KEY_TEMP)) remove(file, 'ssh host key left under its temporary name');
  for (const pool of KVP_POOLS) {
    const file = path.posix.join(config.telemetry.kvp_dir, `.kvp_pool_${pool}`);
    const info = await entryAt(root, file);
    if (info?.isFile() && info.size > 0) changes.push({ kind: 'empty-kvp', path: file });
  }
  return [...changes, ...(await resourceDiskUnits(root)), ...(await networkFiles(root))];
}

/**
 * The mount and swap units `bootstate resource-disk` wrote (they carry its mark): they name this VM's temporary disk,
 * and every boot of a VM made from the image writes its own.
 */
async function resourceDiskUnits(root: string): Promise<Change[]> {
  const changes: Change[] = [];
  for (const file of await regularFilesIn(root, UNIT_DIR, /\.(?:mount|swap)$/)) {
    if ((await readRegularInRoot(root, file))?.startsWith(UNIT_MARK)) changes.push({ kind: 'remove', path: file, what: 'temporary disk unit' });
  }
  return changes;
}

/**
 * The files `bootstate network` rendered, for every stack (the image may have changed stacks since): they name the
 * build VM's NICs, and every boot of a VM made from the image renders its own. Only files that carry the writer's
 * header, read safely inside the root, are bootstate's.
 */
async function networkFiles(root: string): Promise<Change[]> {
  const changes: Change[] = [];
  const seen = new Set<string>();
  for (const renderer of Object.values(renderers)) {
    for (const file of await renderer.ownedFiles(root)) {
      if (seen.has(file)) continue;
      seen.add(file);
      const text = await readRegularInRoot(root, file);
      if (text?.startsWith(HEADER[0]!)) changes.push({ kind: 'remove', path: file, what: 'network configuration rendered from IMDS' });
    }
  }
  return changes;
}
