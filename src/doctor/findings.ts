/**
 * What in an image would make two agents provision the same VM, make bootstate's work ineffective, or ship the
 * build VM's identity to every VM made from it (what `bootstate deprovision` removes). Each check
 * reads files under a root (the image, or `/`) and never runs anything, so it works on a mounted image as well
 * as on a live system. Every path is resolved inside the root as chroot would (resolveInRoot), so a link in the
 * image never leads a check to the host's files; only regular files are read, so a FIFO cannot block one. A
 * finding says what is wrong, where, and what to change.
 */
import path from 'node:path';
import type { Config } from '../config/defaults.js';
import { findAdminUsers } from '../os/user/admin-users.js';
import { HOST_KEY_FILE } from '../os/ssh/host-keys.js';
import { MAIN_CONFIG_BACKUP_SUFFIX } from '../os/ssh/sshd-main-config.js';
import type { Check, Finding } from './finding.js';
import { exists, listDir, read, unitEnabled } from '../system/image-files.js';
import { waagentGated, waagentProvisioning, waagentSetting } from './waagent.js';

export type { Finding } from './finding.js';

/**
 * Whether cloud-init is installed, not disabled, and with a datasource list that includes Azure (its default list
 * does): the list as configured, `default` for its default list, or null when it would not run on Azure.
 */
async function cloudInitOnAzure(root: string): Promise<string | null> {
  const main = await read(root, 'etc/cloud/cloud.cfg');
  if (main === null && !(await exists(root, 'usr/bin/cloud-init'))) return null;
  if (await exists(root, 'etc/cloud/cloud-init.disabled')) return null;
  const dropins = (await listDir(root, 'etc/cloud/cloud.cfg.d')).filter((n) => n.endsWith('.cfg')).sort();
  let list: string | null = datasourceList(main ?? '');
  for (const name of dropins) list = datasourceList((await read(root, `etc/cloud/cloud.cfg.d/${name}`)) ?? '') ?? list;
  if (list !== null && !/\bAzure\b/.test(list)) return null;
  return list ?? 'default';
}

const cloudInit: Check = async (root) => {
  const list = await cloudInitOnAzure(root);
  if (list === null) return null;
  return {
    id: 'cloud-init-azure',
    severity: 'breaks',
    problem: list === 'default'
      ? 'cloud-init is installed and enabled with its default datasource list, which includes Azure: it would provision this VM too'
      : `cloud-init is enabled with the Azure datasource (datasource_list: ${list.trim()}): it would provision this VM too`,
    fix: 'touch /etc/cloud/cloud-init.disabled (cloud-init then does not run at all), or, when the image needs cloud-init for something else, set "datasource_list: [ None ]" in a file of /etc/cloud/cloud.cfg.d/ such as 99-bootstate.cfg (docs/coexistence.md)',
  };
};

/** `[resource_disk]` is on: another agent formatting the temporary disk would race bootstate for it. */
const formatsTheDisk = (config: Config) => config.resource_disk.enable && !config.steps.skip.includes('resource-disk');

/**
 * The other agents that format the temporary disk: cloud-init's Azure datasource (ephemeral0, by its built-in
 * disk_setup, fs_setup and mounts), WALinuxAgent with ResourceDisk.Format=y, azure-vm-utils' ephemeral disk unit.
 * Two of them on one disk mount it twice or reformat each other's work.
 */
const otherResourceDiskAgents: Check = async (root, config) => {
  if (!formatsTheDisk(config)) return null;
  const others: string[] = [];
  if ((await cloudInitOnAzure(root)) !== null) others.push("cloud-init's Azure datasource (ephemeral0: disk_setup, fs_setup and mounts)");
  const waagentConf = await read(root, 'etc/waagent.conf');
  if (waagentConf !== null && waagentSetting(waagentConf, 'ResourceDisk.Format')?.toLowerCase() === 'y') others.push('WALinuxAgent (ResourceDisk.Format=y in /etc/waagent.conf)');
  const setup = await unitEnabled(root, 'azure-ephemeral-disk-setup.service');
  if (setup !== null) others.push(`azure-vm-utils' azure-ephemeral-disk-setup.service (${setup})`);
  if (others.length === 0) return null;
  return {
    id: 'resource-disk-other-agent',
    severity: 'warns',
    problem: `bootstate formats and mounts the temporary disk ([resource_disk] enable), and so would ${others.join(', and ')}: the disk would be mounted twice or reformatted under the other${setup === null ? '' : " (while azure-ephemeral-disk-setup.service is enabled, bootstate resource-disk itself touches no disk and says so)"}`,
    fix: 'let one of them do it: set ResourceDisk.Format=n and ResourceDisk.EnableSwap=n in /etc/waagent.conf, disable cloud-init (see cloud-init-azure) or azure-ephemeral-disk-setup.service; or set [resource_disk] enable = false',
  };
};

/** `local_nvme = "raid0"` makes the array with mdadm, which bootstate does not depend on: without it the pass fails every boot. */
const raid0WithoutMdadm: Check = async (root, config) => {
  if (!formatsTheDisk(config) || config.resource_disk.local_nvme !== 'raid0') return null;
  if ((await exists(root, 'usr/sbin/mdadm')) || (await exists(root, 'sbin/mdadm'))) return null;
  return {
    id: 'local-nvme-array-without-mdadm',
    severity: 'warns',
    problem: '[resource_disk] local_nvme = "raid0" makes an md RAID0 array over the local NVMe disks with mdadm, which is not installed: on a VM with several local disks the pass fails on every boot and the disks stay unused',
    fix: 'install mdadm (Debian: apt-get install mdadm), or set local_nvme = "each" or "leave"',
  };
};

/** The last `datasource_list` value in a cloud-init YAML file (flow or block form), or null when it sets none. */
export function datasourceList(yaml: string): string | null {
  const lines = yaml.split('\n');
  let found: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const m = /^datasource_list\s*:\s*(.*)$/.exec(lines[i]!);
    if (!m) continue;
    let value = m[1]!.replace(/#.*$/, '').trim();
    if (value === '') {
      const items: string[] = [];
      while (i + 1 < lines.length && /^\s*-\s*/.test(lines[i + 1]!)) items.push(lines[++i]!.replace(/^\s*-\s*/, '').trim());
      value = `[ ${items.join(', ')} ]`;
    }
    found = value;
  }
  return found;
}

/** WALinuxAgent's own wireserver firewall on beside bootstate's: the same rules twice, one of them is enough. */
const waagentFirewall: Check = async (root, config) => {
  if (!config.firewall.enable) return null;
  const conf = await read(root, 'etc/waagent.conf');
  if (conf === null || waagentSetting(conf, 'OS.EnableFirewall')?.toLowerCase() !== 'y') return null;
  return {
    id: 'two-firewalls',
    severity: 'warns',
    problem: 'WALinuxAgent\'s firewall is on (OS.EnableFirewall=y) and so is bootstate\'s ([firewall] enable = true): both guard the wireserver',
    fix: 'keep one: set OS.EnableFirewall=n in /etc/waagent.conf, or [firewall] enable = false in bootstate\'s configuration',
  };
};

const azureInit: Check = async (root) => {
  const link = await unitEnabled(root, 'azure-init.service');
  if (link === null) return null;
  return {
    id: 'azure-init-enabled',
    severity: 'breaks',
    problem: `azure-init.service is enabled (${link}): it would provision this VM too`,
    fix: 'systemctl disable azure-init.service (bootstate honours its <vm_id>.provisioned markers)',
  };
};

/** Without an Include of the drop-in directory, bootstate sets PasswordAuthentication in sshd_config itself. */
const sshdInclude: Check = async (root, config) => {
  const main = await read(root, config.ssh.sshd_config_path);
  if (main === null) {
    return {
      id: 'sshd-config-missing',
      severity: 'warns',
      problem: `${config.ssh.sshd_config_path} does not exist or is not a regular file: is openssh-server installed?`,
      fix: 'install openssh-server, or VMs will not be reachable over SSH',
    };
  }
  if (!config.ssh.configure_sshd_password_authentication) return null;
  if (includesDir(main, config.ssh.sshd_config_dir)) return null;
  return {
    id: 'sshd-no-include',
    severity: 'handled',
    problem: `${config.ssh.sshd_config_path} never includes ${config.ssh.sshd_config_dir}: a first boot sets PasswordAuthentication in ${config.ssh.sshd_config_path} itself, first in the file, keeping the original as ${config.ssh.sshd_config_path}${MAIN_CONFIG_BACKUP_SUFFIX}`,
    fix: `nothing needed; to have the drop-in used instead, add "Include ${config.ssh.sshd_config_dir}/*.conf" as the first line of ${config.ssh.sshd_config_path}`,
  };
};

/** Whether an sshd_config has an `Include` whose pattern lies in `dir` (relative patterns are under /etc/ssh). */
export function includesDir(sshdConfig: string, dir: string): boolean {
  const want = path.posix.normalize(dir).replace(/\/$/, '');
  return sshdConfig.split('\n').some((line) => {
    const m = /^\s*Include\s+(.+?)\s*$/i.exec(line.replace(/#.*$/, ''));
    if (!m) return false;
    return m[1]!.split(/\s+/).some((pattern) => {
      const absolute = pattern.startsWith('/') ? pattern : `/etc/ssh/${pattern}`;
      return path.posix.dirname(path.posix.normalize(absolute)) === want;
    });
  });
}

const KVP_DAEMONS = ['usr/sbin/hv_kvp_daemon', 'usr/libexec/hypervkvpd', 'usr/sbin/hypervkvpd'];

/** Without the Hyper-V KVP daemon the host never reads the pool: reports still go over HTTP, KVP telemetry is lost. */
const kvpDaemon: Check = async (root) => {
  for (const daemon of KVP_DAEMONS) if (await exists(root, daemon)) return null;
  return {
    id: 'no-kvp-daemon',
    severity: 'warns',
    problem: 'no Hyper-V KVP daemon (hv_kvp_daemon) is installed: the host cannot read reports and telemetry from the KVP pool',
    fix: 'install hyperv-daemons (Debian, Ubuntu: linux-cloud-tools) and enable hv-kvp-daemon.service',
  };
};

/** Host keys in the image: every VM cloned from it would share one SSH identity until its first boot replaces them. */
const hostKeys: Check = async (root, config) => {
  const keys = (await listDir(root, config.host_keys.dir)).filter((n) => HOST_KEY_FILE.test(n) && !n.endsWith('.pub')).sort();
  if (keys.length === 0) return null;
  return {
    id: 'ssh-host-keys',
    severity: 'warns',
    problem: `the image carries SSH host keys (${keys.map((k) => path.posix.join(config.host_keys.dir, k)).join(', ')}): they are the build VM's identity${config.host_keys.regenerate ? '' : ', and host_keys.regenerate = false keeps them on every VM made from it'}`,
    fix: 'bootstate deprovision before capture (it removes them; each VM then makes its own)',
  };
};

/** A machine id other than empty or `uninitialized`: clones would share it (journald, DHCP client ids, D-Bus). */
const machineId: Check = async (root) => {
  const id = await read(root, 'etc/machine-id');
  if (id === null || ['', 'uninitialized'].includes(id.trim())) return null;
  return {
    id: 'machine-id',
    severity: 'warns',
    problem: `/etc/machine-id holds the build VM's id (${id.trim().slice(0, 32)}): every VM made from the image would share it`,
    fix: 'bootstate deprovision before capture (it writes "uninitialized", so each VM makes its own on first boot)',
  };
};

/** An admin account bootstate made on the build VM (its useradd comment, or a 90-bootstate-* sudoers drop-in). */
const leftoverAdmin: Check = async (root, config) => {
  const users = await findAdminUsers(root, config.user_provisioners.sudoers_dir);
  if (users.length === 0) return null;
  const what = users.map((u) => `${u.username} (${[u.created ? 'created by bootstate' : '', ...u.sudoers].filter(Boolean).join(', ')})`);
  return {
    id: 'leftover-admin-user',
    severity: 'warns',
    problem: `the image carries the admin account${users.length === 1 ? '' : 's'} bootstate provisioned on the build VM: ${what.join('; ')}; every VM made from it would have ${users.length === 1 ? 'it' : 'them'} and ${users.length === 1 ? 'its' : 'their'} keys`,
    fix: 'bootstate deprovision --user before capture',
  };
};

export const CHECKS: Check[] = [cloudInit, waagentProvisioning, waagentGated, waagentFirewall, azureInit, otherResourceDiskAgents, raid0WithoutMdadm, sshdInclude, kvpDaemon, hostKeys, machineId, leftoverAdmin];

const RANK: Record<Finding['severity'], number> = { breaks: 0, warns: 1, handled: 2 };

/** Orders findings breaking ones first, handled ones last. */
export const bySeverity = (a: Finding, b: Finding): number => RANK[a.severity] - RANK[b.severity];

/** Runs every check against `root` and returns the findings, breaking ones first. */
export async function inspectImage(root: string, config: Config): Promise<Finding[]> {
  const found: Finding[] = [];
  for (const check of CHECKS) {
    const finding = await check(root, config);
    if (finding) found.push(finding);
  }
  return found.sort(bySeverity);
}
