/**
 * The commented `/etc/bootstate/bootstate.toml` the .deb ships, rendered from DEFAULT_CONFIG so it cannot drift:
 * every key appears commented out with its default and one line saying what it does, and rendering fails if a
 * key has no explanation or an explanation names a key that no longer exists.
 *
 * @example
 *   writeFileSync('bootstate.toml', renderDefaultConfig());
 *   // [imds]
 *   // # Where the instance metadata (IMDS) document is fetched from.
 *   // #endpoint = "http://169.254.169.254/metadata/instance?api-version=2023-11-15&extended=true"
 *
 * It also renders `/usr/share/bootstate/firewall.nft`, the wireserver firewall's rules for that file as it ships
 * (`renderPackagedFirewall`): what bootstate-firewall.service loads with `nft -f` while the configuration is the
 * packaged one (packaging/libexec/firewall-load).
 */
import { createHash } from 'node:crypto';
import { DEFAULT_CONFIG, SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE } from '../src/config/defaults.js';
import { NFT_TABLE, nftRuleset } from '../src/firewall/firewall.js';

/** One line per key, `section.key` → what it does. */
export const KEY_EXPLANATIONS: Record<string, string> = {
  'imds.endpoint': 'Where the instance metadata (IMDS) document is fetched from.',
  'imds.connection_timeout_secs': 'Give up on one IMDS connection attempt after this many seconds.',
  'imds.request_timeout_secs': 'Give up on one IMDS request (headers and body) after this many seconds.',
  'imds.retry_interval_secs': 'Wait this long between IMDS attempts after a retryable failure.',
  'imds.total_retry_timeout_secs': 'Stop retrying IMDS and report ProvisioningFailed after this many seconds in all.',
  'imds.max_body_bytes': 'Refuse an IMDS answer larger than this many bytes.',
  'wireserver.address': 'The wireserver address (Azure\'s fixed virtual public IP).',
  'wireserver.health_endpoint': 'Where provisioning health (InProgress, Ready, ProvisioningFailed) is POSTed.',
  'wireserver.connection_timeout_secs': 'Give up on one wireserver connection attempt after this many seconds.',
  'wireserver.read_timeout_secs': 'Give up on one wireserver answer after this many seconds.',
  'wireserver.retry_interval_secs': 'Wait this long between health report attempts after a retryable failure.',
  'wireserver.total_retry_timeout_secs': 'Stop retrying a health report after this many seconds in all.',
  'wireserver.report_in_progress': 'Report NotReady/Provisioning while provisioning runs (off the critical path).',
  'ssh.authorized_keys_path': 'The admin user\'s authorized_keys file, relative to their home directory.',
  'ssh.query_sshd_config': 'Ask `sshd -G` where authorized keys are read from instead of assuming the path above.',
  'ssh.configure_sshd_password_authentication': 'Write an sshd drop-in that allows or forbids password logins as the VM owner chose.',
  'ssh.sshd_config_dir': 'The sshd drop-in directory the password-authentication drop-in is written to.',
  'ssh.sshd_config_path': 'The main sshd configuration file (checked to include the drop-in directory).',
  'ssh.reload_sshd': 'Reload sshd after writing the drop-in so it takes effect at once.',
  'hostname_provisioners.backends': 'Ways to set the hostname, tried in order until one works.',
  'hostname_publishing.enable': 'After setting the hostname, make the DHCP client send it, which is how Azure DNS learns it.',
  'hostname_publishing.backends': 'DHCP clients tried in order; the first that runs and manages the primary interface sends the name.',
  'hostname_publishing.timeout_secs': 'Give up publishing the hostname after this many seconds (a warning; provisioning goes on).',
  'hostname_publishing.monitor': 'Each monitor cycle publishes a hostname changed since the last one published, once (bootstate-monitor.timer).',
  'firewall.enable': 'On every boot, before the network comes up, let only root reach the wireserver (TCP to its DNS port excepted), as WALinuxAgent\'s OS.EnableFirewall does (bootstate-firewall.service).',
  'user_provisioners.backends': 'Ways to create the admin user, tried in order until one works.',
  'user_provisioners.shell': 'Login shell of the admin user.',
  'user_provisioners.groups': 'Supplementary groups the admin user joins (also --groups / BOOTSTATE_USER_GROUPS).',
  'user_provisioners.missing_groups': 'A listed group that does not exist: "create" it or "skip" it with a warning.',
  'user_provisioners.sudo': 'The admin\'s sudo rule: "auto" (NOPASSWD without a provisioned password, asking for it with one), "nopasswd", "password" or "none"; passwordless_sudo = true/false is the older "nopasswd"/"none".',
  'user_provisioners.sudoers_dir': 'Where that sudoers drop-in is written.',
  'password_provisioners.backends': 'Ways to set or lock the admin password, tried in order until one works.',
  'os.timeout_secs': 'Longest the metadata checks, and then the OS changes, may each take before the run fails (operation timed out).',
  'host_keys.regenerate': 'On the first boot of a new VM id, replace the image\'s SSH host keys by new ones and print their fingerprints to the console.',
  'host_keys.types': 'Host key types generated: rsa, ecdsa, ed25519.',
  'host_keys.dir': 'Where sshd\'s host keys live (ssh_host_<type>_key and .pub).',
  'host_keys.background': 'Of those types, the ones logins do not wait for where sshd loads its keys per connection (OpenSSH before 9.8): made after READY=1 at the lowest CPU priority; made with the others elsewhere.',
  'platform.check': 'Do nothing off Azure: without Azure\'s DMI chassis asset tag or a possible provisioning media, exit 0 at once, sending nothing (skipped when IMDS or the wireserver is configured elsewhere).',
  'azure_proxy_agent.enable': 'Wait for Azure\'s Guest Proxy Agent (azure-proxy-agent --status --wait) when the provisioning media\'s ProvisionGuestProxyAgent asks for it.',
  'azure_proxy_agent.require': 'Wait for the Guest Proxy Agent whatever the media says.',
  'azure_proxy_agent.wait_secs': 'How long azure-proxy-agent --status may wait for the agent to be ready; past it, ProvisioningFailed.',
  'provisioning_media.enable': 'Read ovf-env.xml from the provisioning media (the CD-ROM Azure attaches) if present.',
  'provisioning_media.timeout_secs': 'Longest the media read may take; the run always waits for it (it can carry pool flags and custom data), and past this it goes on without it, with a warning.',
  'telemetry.kvp': 'Write telemetry and the health report to Hyper-V KVP so the host can read them.',
  'telemetry.kvp_dir': 'Directory of the KVP pool files.',
  'telemetry.kvp_pool': 'KVP pool number written to (1 = guest to host, what the host reads).',
  'telemetry.kvp_level': 'Lowest log level copied to KVP: trace, debug, info, warn or error.',
  'telemetry.otlp_endpoint': 'OpenTelemetry collector (OTLP/HTTP) to send each run as one trace to, after READY=1; empty sends nothing (OTEL_EXPORTER_OTLP_* win).',
  'telemetry.otlp_protocol': 'Encoding of the trace export: "http/protobuf" or "http/json".',
  'telemetry.otlp_timeout_secs': 'Longest the trace export may take, loading included; past it the run ends with a warning.',
  'telemetry.otlp_monitor': 'Also send each monitor --once cycle as a trace when an endpoint is set.',
  'monitor.health_service_port': 'Port of the HealthService on the wireserver address (health observations are posted there).',
  'monitor.host_plugin_port': 'Port of the host GA plugin on the wireserver address.',
  'monitor.heartbeat_period_secs': 'How often the monitor checks the host plugin.',
  'monitor.heartbeat_rollup_secs': 'Window over which host plugin observations are rolled up into one report.',
  'monitor.imds_period_secs': 'How often the monitor checks IMDS.',
  'monitor.imds_rollup_secs': 'Window over which IMDS observations are rolled up into one report.',
  'monitor.versions_period_secs': 'How often the monitor asks the host plugin for its supported versions.',
  'monitor.request_timeout_secs': 'Give up on one monitor request after this many seconds.',
  'monitor.state_file': 'Where each `monitor --once` cycle leaves the roll-up state for the next; under /run, so a reboot resets it.',
  'journal.enable': 'Keep a JSONL journal of each run\'s states (no secrets) for `bootstate trace`.',
  'journal.keep': 'How many run journals to keep.',
  'boot_diagnostics.enable': 'Write the boot timeline, and on a failure the kernel log tail and the failing step (secrets scrubbed), to KVP.',
  'boot_diagnostics.on_ready': 'Write the kernel log tail on Ready too.',
  'boot_diagnostics.kernel_log': 'Where the kernel log is read (without blocking).',
  'boot_diagnostics.max_records': 'KVP records one run\'s diagnostics take at most.',
  'boot_diagnostics.leave_free': 'KVP records the diagnostics always leave free in the pool of 1,024.',
  'preprovisioning.poll_interval_secs': 'A pre-provisioned pool VM polls IMDS reprovisiondata this often while it waits to be claimed.',
  'preprovisioning.nic_detach_timeout_secs': 'A Savable pool VM fails (operation timed out) when the host has not detached its NIC this long after its Ready to the pool.',
  'preprovisioning.nic_attach_timeout_secs': 'A Savable pool VM fails (operation timed out) when no NIC attached after the detach reaches the fabric within this many seconds.',
  'custom_data.custom_data_path': 'Where OVF CustomData is saved, decoded, 0600 root; empty means <data_dir>/CustomData.',
  'custom_data.user_data_path': 'Where IMDS userData is saved, decoded, 0600 root; empty means <data_dir>/UserData.',
  'custom_data.waagent_compat': 'Also write CustomData to /var/lib/waagent/CustomData, where WALinuxAgent keeps it.',
  'custom_data.require': 'Fail provisioning (MissingCustomData) when IMDS says there was custom data and none arrived.',
  'network.enable': 'Configure secondary NICs and IP addresses from IMDS\'s network section, on every boot.',
  'network.stack': 'The network stack rendered for: "auto" (detected), "networkd", "netplan", "ifupdown" or "networkmanager".',
  'network.drivers': 'Drivers of the synthetic NICs; an interface with a planned MAC and another driver (an SR-IOV VF) is left alone.',
  'resource_disk.enable': 'Format the temporary disk when it holds only what Azure put there, and mount it (on every boot).',
  'resource_disk.mount_point': 'Where the temporary disk is mounted (WALinuxAgent uses /mnt/resource).',
  'resource_disk.label': 'ext4 label and GPT partition name by which bootstate knows the disk is already its own.',
  'resource_disk.mount_options': 'Options= of the temporary disk\'s mount unit.',
  'resource_disk.swap_size_mb': 'Size of the swap file <mount_point>/swapfile on the temporary disk; 0 makes none.',
  'resource_disk.local_nvme': 'Local NVMe disks (L-series, v6 sizes): "leave" them alone, one "raid0" array over all at mount_point, or "each" at mount_point/<index>; only when every one may be used (blank, or already bootstate\'s for "each").',
  'certificates.place': 'Write the goal state certificates to /var/lib/waagent/<THUMBPRINT>.crt/.prv: "auto" when they are fetched for keys and WALinuxAgent is absent, true always, false never.',
  'certificates.total_retry_timeout_secs': 'Longest the goal state and Certificates requests may take, retries included.',
  'steps.skip': 'OS steps to leave out: hostname, user, password, ssh-keys, sshd, custom-data, resource-disk (also --only / --skip).',
  'data_dir.path': 'Where the provisioned marker, journals and state live.',
  'log_path.path': 'Log file; an empty string writes no log file.',
};

/** Renders the whole file; throws when DEFAULT_CONFIG and the explanations disagree. */
export function renderDefaultConfig(): string {
  const keys = new Set<string>();
  const lines = [
    '# bootstate configuration.',
    '#',
    '# Every setting below is commented out and shows its built-in default; uncomment a line to change it.',
    `# Files in ${SYSTEM_CONFIG_DROPIN_DIR}/*.toml override this one (in name order), and`,
    '# `bootstate --config FILE|DIR` (or BOOTSTATE_CONFIG) overrides them all. Durations are in seconds.',
    '# azure-init section names ([azure_init_data_dir], [azure_init_log_path]) are accepted too.',
  ];
  for (const [section, values] of Object.entries(DEFAULT_CONFIG) as [string, Record<string, unknown>][]) {
    lines.push('', `[${section}]`);
    for (const [key, value] of Object.entries(values)) {
      const name = `${section}.${key}`;
      const explanation = KEY_EXPLANATIONS[name];
      if (explanation === undefined) throw new Error(`${SYSTEM_CONFIG_FILE}: no explanation for ${name}; add one to packaging/default-config.ts`);
      keys.add(name);
      lines.push(`# ${explanation}`, `#${key} = ${tomlValue(value, name)}`);
    }
  }
  const stale = Object.keys(KEY_EXPLANATIONS).filter((name) => !keys.has(name));
  if (stale.length > 0) throw new Error(`explanations for keys that DEFAULT_CONFIG no longer has: ${stale.join(', ')}`);
  return `${lines.join('\n')}\n`;
}

/** The TOML spelling of a default: strings and arrays of strings, integers, booleans. */
function tomlValue(value: unknown, name: string): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'boolean') return String(value);
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  if (Array.isArray(value)) return `[${value.map((item) => tomlValue(item, name)).join(', ')}]`;
  throw new Error(`${name}: no TOML spelling for default ${JSON.stringify(value)}`);
}

/**
 * The nft ruleset `bootstate firewall apply` loads for the packaged configuration (its defaults: on, for the default
 * wireserver address; off, a ruleset that only removes the table), headed by the SHA-256 of the configuration file
 * it was made for: packaging/libexec/firewall-load loads it only while /etc/bootstate/bootstate.toml has that hash.
 */
export function renderPackagedFirewall(): string {
  const sha256 = createHash('sha256').update(renderDefaultConfig()).digest('hex');
  const rules = DEFAULT_CONFIG.firewall.enable ? nftRuleset(DEFAULT_CONFIG.wireserver.address) : `table inet ${NFT_TABLE}\ndelete table inet ${NFT_TABLE}\n`;
  return [
    `# bootstate's wireserver firewall for ${SYSTEM_CONFIG_FILE} as the package installs it (made by the build with the`,
    '# code of `bootstate firewall apply`); bootstate-firewall.service loads it with nft -f while that file is unchanged',
    `# and ${SYSTEM_CONFIG_DROPIN_DIR} is empty. Do not edit: change the configuration instead.`,
    `# default-config-sha256 ${sha256}`,
    rules,
  ].join('\n');
}
