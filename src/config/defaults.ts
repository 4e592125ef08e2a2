/**
 * The configuration bootstate runs with, and its defaults. Section and key names follow azure-init where the
 * setting exists there, so an azure-init TOML file carries over line for line; durations are seconds.
 */

export interface ImdsConfig {
  endpoint: string;
  connection_timeout_secs: number;
  request_timeout_secs: number;
  retry_interval_secs: number;
  total_retry_timeout_secs: number;
  max_body_bytes: number;
}

export interface WireserverConfig {
  address: string;
  health_endpoint: string;
  connection_timeout_secs: number;
  read_timeout_secs: number;
  retry_interval_secs: number;
  total_retry_timeout_secs: number;
  report_in_progress: boolean;
}

export interface SshConfig {
  authorized_keys_path: string;
  query_sshd_config: boolean;
  configure_sshd_password_authentication: boolean;
  sshd_config_dir: string;
  sshd_config_path: string;
  reload_sshd: boolean;
}

/** The VM's own SSH host keys, made on the first boot of a new VM id (src/os/host-keys.ts). */
export interface HostKeysConfig {
  /** Replace the image's host keys by new ones. */
  regenerate: boolean;
  /** Key types generated. */
  types: Array<'rsa' | 'ecdsa' | 'ed25519'>;
  /** Where sshd's host keys live (`ssh_host_<type>_key` and `.pub`). */
  dir: string;
  /**
   * Types of `types` that logins do not wait for, where sshd loads its host keys on each connection (OpenSSH before
   * 9.8): made after READY=1 at the lowest CPU priority, offered from the first connection after they exist. Where
   * sshd loads its keys once, at its start, they are made with the others.
   */
  background: Array<'rsa' | 'ecdsa' | 'ed25519'>;
}

/** Azure's Guest Proxy Agent, which guards IMDS and the wireserver on VMs that ask for it (src/os/proxy-agent.ts). */
export interface AzureProxyAgentConfig {
  /** Wait for it when the provisioning media's ProvisionGuestProxyAgent says so. */
  enable: boolean;
  /** Wait for it whatever the media says. */
  require: boolean;
  /** The `--wait` given to `azure-proxy-agent --status`; the step's own deadline is a little longer. */
  wait_secs: number;
}

/** The rules that let only root reach the wireserver, DNS excepted (src/os/firewall.ts), made on every boot. */
export interface FirewallConfig {
  enable: boolean;
}

/** Whether the machine is checked to be an Azure VM before anything is sent (src/os/platform.ts). */
export interface PlatformConfig {
  check: boolean;
}

export interface BackendsConfig {
  backends: string[];
}

/** The values of `[user_provisioners] sudo`. */
export const SUDO_POLICIES = ['auto', 'nopasswd', 'password', 'none'] as const;
export type SudoPolicy = (typeof SUDO_POLICIES)[number];

export interface UserProvisionersConfig extends BackendsConfig {
  shell: string;
  groups: string[];
  /** What to do with a configured group that does not exist: create it, or skip it with a warning. */
  missing_groups: 'create' | 'skip';
  /**
   * The admin's sudo rule: `auto` is `nopasswd` when no password was provisioned and `password` when one was;
   * `none` writes no rule (and removes none). The older `passwordless_sudo` is read as `nopasswd` / `none`.
   */
  sudo: SudoPolicy;
  sudoers_dir: string;
}

/** Making the DHCP client send the new hostname, which is how Azure's DNS learns it (docs/hostname-publishing.md). */
export interface HostnamePublishingConfig {
  enable: boolean;
  /** DHCP clients tried in order; the first that runs and manages the primary interface acts. */
  backends: string[];
  /** Longest publishing may take; past it the run goes on with a warning. */
  timeout_secs: number;
  /** Whether each monitor cycle publishes a hostname changed since the last one published. */
  monitor: boolean;
}

export interface CertificatesConfig {
  /**
   * Whether the goal state's certificates are written to /var/lib/waagent: `auto` when the goal state is fetched
   * anyway (the media names keys by fingerprint or key pairs) and WALinuxAgent is not installed; `true` also
   * fetches it for that alone; `false` never writes them.
   */
  place: 'auto' | boolean;
  /** Longest the goal state and Certificates requests may take, retries included. */
  total_retry_timeout_secs: number;
}

export interface OsConfig {
  /** Longest the metadata checks, and then the OS changes, may each take before the run fails. */
  timeout_secs: number;
}

export interface ProvisioningMediaConfig {
  enable: boolean;
  /** Longest the media read may take; past it the plan is made without the media, with a warning. */
  timeout_secs: number;
}

export interface TelemetryConfig {
  kvp: boolean;
  kvp_dir: string;
  kvp_pool: number;
  /** Lowest log level written to KVP as telemetry: trace, debug, info, warn, error. */
  kvp_level: 'trace' | 'debug' | 'info' | 'warn' | 'error';
}

export interface MonitorConfig {
  /** Port of the wireserver's HealthService (`http://<wireserver.address>:<port>/HealthService`). */
  health_service_port: number;
  host_plugin_port: number;
  heartbeat_period_secs: number;
  heartbeat_rollup_secs: number;
  imds_period_secs: number;
  imds_rollup_secs: number;
  versions_period_secs: number;
  request_timeout_secs: number;
  /** Where a `monitor --once` cycle keeps the roll-up state for the next (under /run: a reboot empties it). */
  state_file: string;
}

export interface PreprovisioningConfig {
  /** Pause between two polls of `reprovisiondata` while a pool VM waits to be claimed (cloud-init: 1 s). */
  poll_interval_secs: number;
}

export interface CustomDataConfig {
  /** Where OVF CustomData is saved, decoded; empty means `<data_dir>/CustomData`. */
  custom_data_path: string;
  /** Where IMDS `compute.userData` is saved, decoded; empty means `<data_dir>/UserData`. */
  user_data_path: string;
  /** Also write CustomData to WALinuxAgent's `/var/lib/waagent/CustomData`. */
  waagent_compat: boolean;
  /** Fail provisioning (MissingCustomData) when the platform had custom data and none arrived. */
  require: boolean;
}

/**
 * The backends each `backends` list may name, in the order of their tables in src/os/ (which are typed against these
 * lists, so a backend added there without its name here does not compile). Kept here, not imported from src/os/, so
 * validating a configuration loads no OS code.
 */
export const HOSTNAME_BACKEND_NAMES = ['hostnamectl', 'hostname'] as const;
export const HOSTNAME_PUBLISHING_BACKEND_NAMES = ['networkd', 'networkmanager', 'dhclient'] as const;
export const USER_BACKEND_NAMES = ['useradd'] as const;
export const PASSWORD_BACKEND_NAMES = ['passwd', 'usermod'] as const;
export type HostnameBackendName = (typeof HOSTNAME_BACKEND_NAMES)[number];
export type HostnamePublishingBackendName = (typeof HOSTNAME_PUBLISHING_BACKEND_NAMES)[number];
export type UserBackendName = (typeof USER_BACKEND_NAMES)[number];
export type PasswordBackendName = (typeof PASSWORD_BACKEND_NAMES)[number];

/**
 * The temporary (resource) disk, formatted when it holds only what Azure put there and mounted with a swap file on
 * it; its own unit runs `bootstate resource-disk` on every boot (docs/resource-disk.md).
 */
export interface ResourceDiskConfig {
  enable: boolean;
  mount_point: string;
  /** The ext4 label (and GPT partition name) by which bootstate knows the disk is already its own. */
  label: string;
  /** The mount options of its mount unit. */
  mount_options: string;
  /** Size of the swap file on the disk; 0 is no swap. */
  swap_size_mb: number;
  /**
   * What becomes of the VM's local NVMe disks (L-series, v6 sizes: one to ten): `leave` them alone (the default: they
   * are often used raw), one `raid0` array over all of them mounted at the mount point, or `each` disk on its own at
   * `<mount_point>/<index>`.
   */
  local_nvme: LocalNvmeMode;
}

export const LOCAL_NVME_MODES = ['leave', 'raid0', 'each'] as const;
export type LocalNvmeMode = (typeof LOCAL_NVME_MODES)[number];

/**
 * Names of the OS steps `--only` and `--skip` choose from. `resource-disk` is not a step of the first-boot chart: its
 * own unit runs it on every boot (`bootstate resource-disk`), which honours `[steps] skip`.
 */
export const STEP_NAMES = ['hostname', 'user', 'password', 'ssh-keys', 'sshd', 'host-keys', 'custom-data', 'resource-disk'] as const;
export type StepName = (typeof STEP_NAMES)[number];

export interface StepsConfig {
  /** OS steps left out of this run (they are reported as skipped, never run). */
  skip: StepName[];
}

export interface JournalConfig {
  enable: boolean;
  keep: number;
}

export interface Config {
  imds: ImdsConfig;
  wireserver: WireserverConfig;
  ssh: SshConfig;
  host_keys: HostKeysConfig;
  platform: PlatformConfig;
  azure_proxy_agent: AzureProxyAgentConfig;
  hostname_provisioners: BackendsConfig;
  hostname_publishing: HostnamePublishingConfig;
  firewall: FirewallConfig;
  user_provisioners: UserProvisionersConfig;
  password_provisioners: BackendsConfig;
  os: OsConfig;
  provisioning_media: ProvisioningMediaConfig;
  telemetry: TelemetryConfig;
  monitor: MonitorConfig;
  journal: JournalConfig;
  preprovisioning: PreprovisioningConfig;
  custom_data: CustomDataConfig;
  resource_disk: ResourceDiskConfig;
  certificates: CertificatesConfig;
  steps: StepsConfig;
  /** Where markers, journals and state live (azure-init: `azure_init_data_dir.path`). */
  data_dir: { path: string };
  /** Log file (azure-init: `azure_init_log_path.path`). Empty string disables the file. */
  log_path: { path: string };
}

export const DEFAULT_CONFIG: Config = {
  imds: {
    endpoint: 'http://169.254.169.254/metadata/instance?api-version=2023-11-15&extended=true',
    connection_timeout_secs: 30,
    request_timeout_secs: 60,
    retry_interval_secs: 2,
    total_retry_timeout_secs: 300,
    max_body_bytes: 1024 * 1024,
  },
  wireserver: {
    address: '168.63.129.16',
    health_endpoint: 'http://168.63.129.16/provisioning/health',
    connection_timeout_secs: 60,
    read_timeout_secs: 60,
    retry_interval_secs: 2,
    total_retry_timeout_secs: 1200,
    report_in_progress: true,
  },
  ssh: {
    authorized_keys_path: '.ssh/authorized_keys',
    query_sshd_config: true,
    configure_sshd_password_authentication: true,
    sshd_config_dir: '/etc/ssh/sshd_config.d',
    sshd_config_path: '/etc/ssh/sshd_config',
    reload_sshd: true,
  },
  host_keys: { regenerate: true, types: ['rsa', 'ecdsa', 'ed25519'], dir: '/etc/ssh', background: ['rsa'] },
  platform: { check: true },
  azure_proxy_agent: { enable: true, require: false, wait_secs: 120 },
  hostname_provisioners: { backends: ['hostnamectl', 'hostname'] },
  hostname_publishing: { enable: true, backends: ['networkd', 'networkmanager', 'dhclient'], timeout_secs: 30, monitor: true },
  firewall: { enable: true },
  user_provisioners: {
    backends: ['useradd'],
    shell: '/bin/bash',
    groups: [],
    missing_groups: 'skip',
    sudo: 'auto',
    sudoers_dir: '/etc/sudoers.d',
  },
  password_provisioners: { backends: ['passwd'] },
  os: { timeout_secs: 300 },
  provisioning_media: { enable: true, timeout_secs: 30 },
  telemetry: { kvp: true, kvp_dir: '/var/lib/hyperv', kvp_pool: 1, kvp_level: 'info' },
  monitor: {
    health_service_port: 80,
    host_plugin_port: 32526,
    heartbeat_period_secs: 60,
    heartbeat_rollup_secs: 300,
    imds_period_secs: 60,
    imds_rollup_secs: 180,
    versions_period_secs: 60,
    request_timeout_secs: 10,
    state_file: '/run/bootstate/monitor-state.json',
  },
  journal: { enable: true, keep: 20 },
  preprovisioning: { poll_interval_secs: 1 },
  custom_data: { custom_data_path: '', user_data_path: '', waagent_compat: false, require: false },
  resource_disk: { enable: true, mount_point: '/mnt', label: 'azure-resource', mount_options: 'defaults', swap_size_mb: 0, local_nvme: 'leave' },
  certificates: { place: 'auto', total_retry_timeout_secs: 120 },
  steps: { skip: [] },
  data_dir: { path: '/var/lib/bootstate' },
  log_path: { path: '/var/log/bootstate.log' },
};

/** WALinuxAgent's copy of the custom data (`[custom_data] waagent_compat`). */
export const WAAGENT_CUSTOM_DATA_PATH = '/var/lib/waagent/CustomData';

export const SYSTEM_CONFIG_FILE = '/etc/bootstate/bootstate.toml';
export const SYSTEM_CONFIG_DROPIN_DIR = '/etc/bootstate/bootstate.toml.d';
