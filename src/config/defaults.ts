/**
 * The configuration bootstate runs with, and its defaults. Section and key names follow azure-init where the
 * setting exists there, so an azure-init TOML file carries over line for line; durations are seconds. The shape
 * (`Config` and its sections) is the schema's (schema.ts), re-exported here for the modules that read a setting.
 */
import type { Config } from './schema.js';

export {
  HOSTNAME_BACKEND_NAMES,
  HOSTNAME_PUBLISHING_BACKEND_NAMES,
  LOCAL_NVME_MODES,
  PASSWORD_BACKEND_NAMES,
  STEP_NAMES,
  SUDO_POLICIES,
  USER_BACKEND_NAMES,
} from './schema.js';
export type * from './schema.js';

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
  telemetry: { kvp: true, kvp_dir: '/var/lib/hyperv', kvp_pool: 1, kvp_level: 'info', otlp_endpoint: '', otlp_protocol: 'http/protobuf', otlp_timeout_secs: 2, otlp_monitor: true },
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
  boot_diagnostics: { enable: true, on_ready: true, kernel_log: '/dev/kmsg', max_records: 64, leave_free: 64 },
  preprovisioning: { poll_interval_secs: 1, nic_detach_timeout_secs: 1200, nic_attach_timeout_secs: 86400 },
  custom_data: { custom_data_path: '', user_data_path: '', waagent_compat: false, require: false },
  resource_disk: { enable: true, mount_point: '/mnt', label: 'azure-resource', mount_options: 'defaults', swap_size_mb: 0, local_nvme: 'leave' },
  network: { enable: true, stack: 'auto', drivers: ['hv_netvsc'] },
  certificates: { place: 'auto', total_retry_timeout_secs: 120 },
  steps: { skip: [] },
  data_dir: { path: '/var/lib/bootstate' },
  log_path: { path: '/var/log/bootstate.log' },
};

/** WALinuxAgent's copy of the custom data (`[custom_data] waagent_compat`). */
export const WAAGENT_CUSTOM_DATA_PATH = '/var/lib/waagent/CustomData';

export const SYSTEM_CONFIG_FILE = '/etc/bootstate/bootstate.toml';
export const SYSTEM_CONFIG_DROPIN_DIR = '/etc/bootstate/bootstate.toml.d';
