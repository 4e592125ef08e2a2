/**
 * What a configuration file may contain: one valibot schema for the whole Config, from which the schema of a
 * single layer (every section and key optional, nothing unknown) is derived. Also the azure-init names that
 * are accepted so an azure-init file carries over unchanged.
 */
import * as v from 'valibot';

/** The values of `[user_provisioners] sudo`. */
export const SUDO_POLICIES = ['auto', 'nopasswd', 'password', 'none'] as const;
export type SudoPolicy = (typeof SUDO_POLICIES)[number];

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
 * What becomes of the VM's local NVMe disks (L-series, v6 sizes: one to ten): `leave` them alone (the default: they
 * are often used raw), one `raid0` array over all of them mounted at the mount point, or `each` disk on its own at
 * `<mount_point>/<index>`.
 */
export const LOCAL_NVME_MODES = ['leave', 'raid0', 'each'] as const;
export type LocalNvmeMode = (typeof LOCAL_NVME_MODES)[number];

/**
 * Names of the OS steps `--only` and `--skip` choose from. `resource-disk` is not a step of the first-boot chart: its
 * own unit runs it on every boot (`bootstate resource-disk`), which honours `[steps] skip`.
 */
export const STEP_NAMES = ['hostname', 'user', 'password', 'ssh-keys', 'sshd', 'host-keys', 'custom-data', 'resource-disk'] as const;
export type StepName = (typeof STEP_NAMES)[number];

/** The longest delay a Node timer honours (2^31−1 ms); a longer one fires after 1 ms instead. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
/** The longest duration a `*_secs` setting may hold: 2,147,483 s (24 days 20 h). */
export const MAX_DURATION_SECS = Math.floor(MAX_TIMER_MS / 1000);

/** Every duration is read through this, so none can exceed what the runtime's timers can wait. */
const positiveSecs = v.pipe(
  v.number(),
  v.check((n) => Number.isFinite(n) && n > 0, 'must be a number of seconds > 0'),
  v.check((n) => !Number.isFinite(n) || n <= MAX_DURATION_SECS, `must be at most ${MAX_DURATION_SECS} seconds (2^31-1 ms, the longest timer the runtime honours)`),
);
const count = (min: number, max: number) =>
  v.pipe(
    v.number(),
    v.check((n) => Number.isInteger(n) && n >= min && n <= max, `must be an integer from ${min} to ${max}`),
  );
const httpUrl = v.pipe(
  v.string(),
  v.check((s) => URL.canParse(s) && new URL(s).protocol === 'http:', 'must be an http:// URL'),
);
const nonEmpty = v.pipe(v.string(), v.check((s) => s.length > 0, 'must not be empty'));
const absolutePath = v.pipe(v.string(), v.check((s) => s.startsWith('/'), 'must be an absolute path'));
/** An OTLP/HTTP collector's base URL, or empty for none. */
const otlpEndpoint = v.pipe(
  v.string(),
  v.check((s) => s === '' || (URL.canParse(s) && ['http:', 'https:'].includes(new URL(s).protocol)), 'must be an http:// or https:// URL, or empty'),
);
/** Empty means "the default place", derived from another key. */
const absoluteOrEmpty = v.pipe(v.string(), v.check((s) => s === '' || s.startsWith('/'), 'must be an absolute path or empty'));
/**
 * A `backends` list: at least one name, each one of `names` (an unknown name would otherwise only be skipped with a
 * warning at first boot, and an empty list would fail the step with no backend tried).
 */
const backendList = (names: readonly [string, ...string[]], emptyHint = '') =>
  v.pipe(v.array(v.picklist(names)), v.minLength(1, `must name at least one backend (${names.join(', ')})${emptyHint}`));

const sections = {
  imds: v.strictObject({
    endpoint: httpUrl,
    connection_timeout_secs: positiveSecs,
    request_timeout_secs: positiveSecs,
    retry_interval_secs: positiveSecs,
    total_retry_timeout_secs: positiveSecs,
    max_body_bytes: count(1024, 64 * 1024 * 1024),
  }),
  wireserver: v.strictObject({
    address: nonEmpty,
    health_endpoint: httpUrl,
    connection_timeout_secs: positiveSecs,
    read_timeout_secs: positiveSecs,
    retry_interval_secs: positiveSecs,
    total_retry_timeout_secs: positiveSecs,
    report_in_progress: v.boolean(),
  }),
  ssh: v.strictObject({
    authorized_keys_path: nonEmpty,
    query_sshd_config: v.boolean(),
    configure_sshd_password_authentication: v.boolean(),
    sshd_config_dir: absolutePath,
    sshd_config_path: absolutePath,
    reload_sshd: v.boolean(),
  }),
  /** The VM's own SSH host keys, made on the first boot of a new VM id (src/os/ssh/host-keys.ts). */
  host_keys: v.strictObject({
    /** Replace the image's host keys by new ones. */
    regenerate: v.boolean(),
    /** Key types generated. */
    types: v.pipe(v.array(v.picklist(['rsa', 'ecdsa', 'ed25519'])), v.minLength(1, 'must name at least one key type')),
    /** Where sshd's host keys live (`ssh_host_<type>_key` and `.pub`). */
    dir: absolutePath,
    /**
     * Types of `types` that logins do not wait for, where sshd loads its host keys on each connection (OpenSSH before
     * 9.8): made after READY=1 at the lowest CPU priority, offered from the first connection after they exist. Where
     * sshd loads its keys once, at its start, they are made with the others.
     */
    background: v.array(v.picklist(['rsa', 'ecdsa', 'ed25519'])),
  }),
  /** Whether the machine is checked to be an Azure VM before anything is sent (src/azure/platform.ts). */
  platform: v.strictObject({ check: v.boolean() }),
  /** Azure's Guest Proxy Agent, which guards IMDS and the wireserver on VMs that ask for it (src/os/proxy-agent.ts). */
  azure_proxy_agent: v.strictObject({
    /** Wait for it when the provisioning media's ProvisionGuestProxyAgent says so. */
    enable: v.boolean(),
    /** Wait for it whatever the media says. */
    require: v.boolean(),
    /** The `--wait` given to `azure-proxy-agent --status`; the step's own deadline is a little longer. */
    wait_secs: positiveSecs,
  }),
  hostname_provisioners: v.strictObject({ backends: backendList(HOSTNAME_BACKEND_NAMES) }),
  /** Making the DHCP client send the new hostname, which is how Azure's DNS learns it (docs/hostname-publishing.md). */
  hostname_publishing: v.strictObject({
    enable: v.boolean(),
    /** DHCP clients tried in order; the first that runs and manages the primary interface acts. */
    backends: backendList(HOSTNAME_PUBLISHING_BACKEND_NAMES, '; enable = false turns publishing off'),
    /** Longest publishing may take; past it the run goes on with a warning. */
    timeout_secs: positiveSecs,
    /** Whether each monitor cycle publishes a hostname changed since the last one published. */
    monitor: v.boolean(),
  }),
  /** The rules that let only root reach the wireserver, DNS excepted (src/firewall/firewall.ts), made on every boot. */
  firewall: v.strictObject({ enable: v.boolean() }),
  user_provisioners: v.strictObject({
    backends: backendList(USER_BACKEND_NAMES),
    shell: absolutePath,
    groups: v.array(nonEmpty),
    /** What to do with a configured group that does not exist: create it, or skip it with a warning. */
    missing_groups: v.picklist(['create', 'skip']),
    /**
     * The admin's sudo rule: `auto` is `nopasswd` when no password was provisioned and `password` when one was;
     * `none` writes no rule (and removes none). The older `passwordless_sudo` is read as `nopasswd` / `none`.
     */
    sudo: v.picklist(SUDO_POLICIES),
    sudoers_dir: absolutePath,
  }),
  password_provisioners: v.strictObject({ backends: backendList(PASSWORD_BACKEND_NAMES) }),
  /** Longest the metadata checks, and then the OS changes, may each take before the run fails. */
  os: v.strictObject({ timeout_secs: positiveSecs }),
  /** `timeout_secs`: longest the media read may take; past it the plan is made without the media, with a warning. */
  provisioning_media: v.strictObject({ enable: v.boolean(), timeout_secs: positiveSecs }),
  telemetry: v.strictObject({
    kvp: v.boolean(),
    kvp_dir: absolutePath,
    kvp_pool: count(0, 4),
    /** Lowest log level written to KVP as telemetry: trace, debug, info, warn, error. */
    kvp_level: v.picklist(['trace', 'debug', 'info', 'warn', 'error']),
    /** The OTLP/HTTP collector each run's trace is sent to (`/v1/traces` appended); empty: none (docs/telemetry.md). */
    otlp_endpoint: otlpEndpoint,
    /** OTLP/HTTP's encoding: `http/protobuf` or `http/json`. */
    otlp_protocol: v.picklist(['http/protobuf', 'http/json']),
    /** The export's own deadline: past it the trace is dropped with a warning. */
    otlp_timeout_secs: positiveSecs,
    /** Whether `bootstate monitor` sends its cycles too, when an endpoint is set. */
    otlp_monitor: v.boolean(),
  }),
  monitor: v.strictObject({
    /** Port of the wireserver's HealthService (`http://<wireserver.address>:<port>/HealthService`). */
    health_service_port: count(1, 65535),
    host_plugin_port: count(1, 65535),
    heartbeat_period_secs: positiveSecs,
    heartbeat_rollup_secs: positiveSecs,
    imds_period_secs: positiveSecs,
    imds_rollup_secs: positiveSecs,
    versions_period_secs: positiveSecs,
    request_timeout_secs: positiveSecs,
    /** Where a `monitor --once` cycle keeps the roll-up state for the next (under /run: a reboot empties it). */
    state_file: absolutePath,
  }),
  journal: v.strictObject({ enable: v.boolean(), keep: count(0, 10_000) }),
  /**
   * The boot timeline and, on a failure (and on Ready with `on_ready`), the kernel log's tail and the failing step's
   * diagnostics in the KVP pool: at most `max_records` records, never leaving the pool fewer than `leave_free` free.
   */
  boot_diagnostics: v.strictObject({
    enable: v.boolean(),
    on_ready: v.boolean(),
    kernel_log: absolutePath,
    max_records: count(1, 1024),
    leave_free: count(0, 1024),
  }),
  /** `poll_interval_secs`: pause between two polls of `reprovisiondata` while a pool VM waits to be claimed (cloud-init: 1 s). */
  /**
   * `nic_detach_timeout_secs`, `nic_attach_timeout_secs`: a Savable pool VM's deadlines for the host to detach its
   * NIC after the pool's Ready, and then to hot-attach the customer's (counted while the VM runs, docs/preprovisioned.md).
   */
  preprovisioning: v.strictObject({ poll_interval_secs: positiveSecs, nic_detach_timeout_secs: positiveSecs, nic_attach_timeout_secs: positiveSecs }),
  custom_data: v.strictObject({
    /** Where OVF CustomData is saved, decoded; empty means `<data_dir>/CustomData`. */
    custom_data_path: absoluteOrEmpty,
    /** Where IMDS `compute.userData` is saved, decoded; empty means `<data_dir>/UserData`. */
    user_data_path: absoluteOrEmpty,
    /** Also write CustomData to WALinuxAgent's `/var/lib/waagent/CustomData`. */
    waagent_compat: v.boolean(),
    /** Fail provisioning (MissingCustomData) when the platform had custom data and none arrived. */
    require: v.boolean(),
  }),
  /**
   * The temporary (resource) disk, formatted when it holds only what Azure put there and mounted with a swap file on
   * it; its own unit runs `bootstate resource-disk` on every boot (docs/resource-disk.md).
   */
  resource_disk: v.strictObject({
    enable: v.boolean(),
    mount_point: v.pipe(
      v.string(),
      v.check((s) => /^(\/[A-Za-z0-9_.-]+)+$/.test(s) && !s.split('/').some((part) => part === '.' || part === '..'), 'must be an absolute path of letters, digits, _ . - (and not /)'),
    ),
    /** The ext4 label (and GPT partition name) by which bootstate knows the disk is already its own. */
    label: v.pipe(v.string(), v.check((s) => /^[A-Za-z0-9_.-]{1,16}$/.test(s), 'must be 1 to 16 letters, digits, _ . - (an ext4 label)')),
    /** The mount options of its mount unit. */
    mount_options: v.pipe(v.string(), v.check((s) => /^[A-Za-z0-9_=,.:+-]+$/.test(s), 'must be a comma-separated list of mount options without spaces')),
    /** Size of the swap file on the disk; 0 is no swap. */
    swap_size_mb: count(0, 1024 * 1024),
    local_nvme: v.picklist(LOCAL_NVME_MODES),
  }),
  /**
   * The VM's network from IMDS's `network` section (secondary NICs, secondary IP addresses, IPv6), rendered for the
   * image's network stack and applied live by its own unit on every boot (docs/network.md). `stack`: `auto` detects
   * it; `drivers`: the synthetic NIC's drivers (an interface with a planned MAC and another driver is an SR-IOV
   * virtual function, never configured).
   */
  network: v.strictObject({
    enable: v.boolean(),
    stack: v.picklist(['auto', 'networkd', 'netplan', 'ifupdown', 'networkmanager'], 'must be "auto", "networkd", "netplan", "ifupdown" or "networkmanager"'),
    drivers: v.pipe(
      v.array(v.pipe(v.string(), v.check((s) => /^[A-Za-z0-9_-]{1,32}$/.test(s), 'must be a driver name (letters, digits, _ -)'))),
      v.minLength(1, 'must name at least one driver'),
    ),
  }),
  /**
   * `place`: whether the goal state's certificates are written to /var/lib/waagent: `auto` when the goal state is
   * fetched anyway (the media names keys by fingerprint or key pairs) and WALinuxAgent is not installed; `true` also
   * fetches it for that alone; `false` never writes them. `total_retry_timeout_secs`: longest the goal state and
   * Certificates requests may take, retries included.
   */
  certificates: v.strictObject({ place: v.union([v.literal('auto'), v.boolean()], 'must be "auto", true or false'), total_retry_timeout_secs: positiveSecs }),
  /** `skip`: OS steps left out of this run (they are reported as skipped, never run). */
  steps: v.strictObject({ skip: v.array(v.picklist(STEP_NAMES)) }),
  /** Where markers, journals and state live (azure-init: `azure_init_data_dir.path`). */
  data_dir: v.strictObject({ path: absolutePath }),
  /** Log file (azure-init: `azure_init_log_path.path`). Empty string disables the file. */
  log_path: v.strictObject({ path: v.string() }),
};

/** The schema of a complete, merged configuration. */
export const ConfigSchema = v.strictObject(sections);

/** The configuration bootstate runs with: what ConfigSchema accepts, so its shape is written once. */
export type Config = v.InferOutput<typeof ConfigSchema>;
export type ImdsConfig = Config['imds'];
export type WireserverConfig = Config['wireserver'];
export type SshConfig = Config['ssh'];
export type HostKeysConfig = Config['host_keys'];
export type AzureProxyAgentConfig = Config['azure_proxy_agent'];
export type FirewallConfig = Config['firewall'];
export type PlatformConfig = Config['platform'];
export type UserProvisionersConfig = Config['user_provisioners'];
export type HostnamePublishingConfig = Config['hostname_publishing'];
export type CertificatesConfig = Config['certificates'];
export type OsConfig = Config['os'];
export type ProvisioningMediaConfig = Config['provisioning_media'];
export type TelemetryConfig = Config['telemetry'];
export type MonitorConfig = Config['monitor'];
export type PreprovisioningConfig = Config['preprovisioning'];
export type CustomDataConfig = Config['custom_data'];
export type ResourceDiskConfig = Config['resource_disk'];
export type NetworkConfig = Config['network'];
export type StepsConfig = Config['steps'];
export type JournalConfig = Config['journal'];

/** The schema of one file: any subset of sections and keys, nothing unknown. */
export const LayerSchema = v.strictObject(
  Object.fromEntries(
    Object.entries(sections).map(([name, schema]) => [name, v.optional(v.partial(schema))]),
  ) as { [K in keyof typeof sections]: v.OptionalSchema<v.SchemaWithPartial<(typeof sections)[K], undefined>, undefined> },
);

export type Layer = v.InferOutput<typeof LayerSchema>;

const KVP_LEVELS: readonly string[] = ['trace', 'debug', 'info', 'warn', 'error'];

/** azure-init section names that mean one of ours. */
const SECTION_ALIASES: Record<string, string> = {
  azure_init_data_dir: 'data_dir',
  azure_init_log_path: 'log_path',
};

/**
 * Rewrites bootstate's own older names in a parsed file (in place): `[user_provisioners] passwordless_sudo`, which
 * meant NOPASSWD sudo or none, becomes `sudo = "nopasswd"` or `sudo = "none"` unless the file also sets `sudo`.
 * Returns warnings, and the problem with a value of the wrong type (the file is then invalid).
 */
export function normalizeOlderNames(doc: Record<string, unknown>): { warnings: string[]; problem: string | null } {
  const users = doc.user_provisioners;
  if (!isTable(users) || !('passwordless_sudo' in users)) return { warnings: [], problem: null };
  const older = users.passwordless_sudo;
  if (typeof older !== 'boolean') return { warnings: [], problem: `[user_provisioners] passwordless_sudo: expected boolean, got ${typeName(older)}` };
  delete users.passwordless_sudo;
  if ('sudo' in users) return { warnings: ['[user_provisioners] passwordless_sudo is ignored because sudo is also set'], problem: null };
  users.sudo = older ? 'nopasswd' : 'none';
  return { warnings: [], problem: null };
}

/** Sections and keys only azure-init's files have: a file using one was written for azure-init. */
function usesAzureInitOnlyNames(doc: Record<string, unknown>): boolean {
  const has = (section: string, key: string) => isTable(doc[section]) && key in (doc[section] as Record<string, unknown>);
  return (
    Object.keys(SECTION_ALIASES).some((name) => name in doc) ||
    has('imds', 'read_timeout_secs') ||
    has('telemetry', 'kvp_diagnostics') ||
    has('telemetry', 'kvp_filter')
  );
}

/**
 * Rewrites azure-init names to ours in a parsed file (in place) and returns warnings for what is accepted but
 * ignored. `names` maps our section names back to the ones written, for error messages. A file written for
 * azure-init (one of its own names is in it) that does not set `[user_provisioners] sudo` gets `sudo = "nopasswd"`,
 * the rule azure-init always writes, so an image migrated from it keeps its admin's sudo.
 */
export function normalizeAzureInitNames(doc: Record<string, unknown>, names: Map<string, string>): string[] {
  const warnings: string[] = [];
  if (usesAzureInitOnlyNames(doc)) {
    if (!('user_provisioners' in doc)) doc.user_provisioners = {};
    const users = doc.user_provisioners;
    if (isTable(users) && !('sudo' in users)) users.sudo = 'nopasswd';
  }
  for (const [alias, ours] of Object.entries(SECTION_ALIASES)) {
    if (!(alias in doc)) continue;
    if (ours in doc) warnings.push(`[${alias}] is ignored because [${ours}] is also set`);
    else {
      doc[ours] = doc[alias];
      names.set(ours, alias);
    }
    delete doc[alias];
  }
  // azure-init's own documented examples set it, and azure-init does not read it either.
  const imds = doc.imds;
  if (isTable(imds) && 'read_timeout_secs' in imds) {
    warnings.push('[imds] read_timeout_secs is accepted for azure-init compatibility and has no effect (use request_timeout_secs)');
    delete imds.read_timeout_secs;
  }
  const telemetry = doc.telemetry;
  if (isTable(telemetry)) {
    if ('kvp_diagnostics' in telemetry) {
      if (!('kvp' in telemetry)) telemetry.kvp = telemetry.kvp_diagnostics;
      else warnings.push('[telemetry] kvp_diagnostics is ignored because kvp is also set');
      delete telemetry.kvp_diagnostics;
    }
    if ('kvp_filter' in telemetry) {
      const level = typeof telemetry.kvp_filter === 'string' ? telemetry.kvp_filter.trim().toLowerCase() : null;
      if (level !== null && KVP_LEVELS.includes(level) && !('kvp_level' in telemetry)) telemetry.kvp_level = level;
      else warnings.push('[telemetry] kvp_filter is accepted for azure-init compatibility and has no effect unless it is a bare level (use kvp_level)');
      delete telemetry.kvp_filter;
    }
  }
  return warnings;
}

/** Describes one validation issue as `[section] key: problem`. */
export function describeIssue(issue: v.BaseIssue<unknown>, names: Map<string, string>): string {
  const path = issue.path ?? [];
  const keys = path.map((item) => item.key as string | number);
  const section = keys.length > 0 ? `[${names.get(String(keys[0])) ?? keys[0]}]` : '(file)';
  const rest = keys
    .slice(1)
    .map((k, i) => (typeof k === 'number' ? `[${k}]` : i === 0 ? ` ${k}` : `.${k}`))
    .join('');
  const where = `${section}${rest}`;
  if (issue.kind === 'validation') return `${where}: ${issue.message}`;
  if (issue.type === 'strict_object' && issue.expected === 'never') {
    return keys.length === 1 ? `${where}: unknown section` : `${where}: unknown key`;
  }
  if (issue.type === 'picklist') {
    return `${where}: expected one of ${issue.expected?.replace(/^\((.*)\)$/, '$1')}, got ${JSON.stringify(issue.input)}`;
  }
  return `${where}: expected ${expectedName(issue.expected)}, got ${typeName(issue.input)}`;
}

function expectedName(expected: string | null): string {
  if (expected === 'Object') return 'a table';
  if (expected === 'Array') return 'an array';
  return expected ?? 'something else';
}

/** Names a TOML value's type the way a person editing the file would. */
function typeName(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (value instanceof Date) return 'datetime';
  if (isTable(value)) return 'table';
  if (typeof value === 'string') return 'string';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'float';
  return typeof value;
}

/** True for a plain TOML table. */
export function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
}
