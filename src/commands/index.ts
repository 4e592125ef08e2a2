/**
 * Every subcommand of `bootstate`, one entry each: its usage (summary, options, help text: plain strings) and a
 * `run` that imports the subcommand's own module, src/commands/<name>.ts, only when that subcommand is asked for.
 * `--help`, option parsing, usage errors and the README's CLI section all come from this table. It is part of the
 * CLI script every start reads (scripts/build/bundle.mjs), so it holds nothing but that data and the `import()`s.
 */
import type { SubcommandSpec } from '../cli/argv.js';
import { GATE_EXIT } from '../gate/gate-exit.js';

const LOG_FORMAT_OPTION = {
  value: 'FORMAT',
  choices: ['json', 'text'],
  help: 'form of the log on stderr: JSON lines, or one text line per event with syslog priority prefixes under systemd (default: text when stderr is the journal, else json; also BOOTSTATE_LOG_FORMAT). The log file is always JSON',
} as const;

const STDIO = { stdout: (s: string) => void process.stdout.write(s), stderr: (s: string) => void process.stderr.write(s) };

const CONFIG_OPTION = { value: 'FILE|DIR', help: 'configuration file, or directory of *.toml drop-ins, applied last (also BOOTSTATE_CONFIG)' };

/** The subcommands in the order `bootstate --help` lists them. `provision` runs when none is named. */
export const SUBCOMMANDS: Record<string, SubcommandSpec> = {
  provision: {
    summary: 'Provision this VM once (the first-boot unit runs this; it is also what runs when no subcommand is named).',
    options: {
      config: CONFIG_OPTION,
      groups: { value: 'a,b', short: 'g', multiple: true, help: 'supplementary groups for the admin user, added to the configured ones (also BOOTSTATE_USER_GROUPS)' },
      'dry-run': {
        value: 'DIR',
        help: 'read the metadata and show what would be done, changing nothing outside DIR: files, markers, log, KVP pool and journal land under DIR, commands and health reports are printed instead of run or sent',
      },
      scratch: {
        value: 'DIR',
        help: 'as --dry-run, but send the health reports and keep the configured data dir, log and KVP paths (to test the agent against a fake fabric)',
      },
      inspect: { value: 'ws://HOST:PORT', help: 'stream the run to an inspector (bootstate inspect-server)' },
      'log-format': LOG_FORMAT_OPTION,
      only: { value: 'STEP,…', multiple: true, help: 'run only these OS steps (hostname, user, password, ssh-keys, sshd, host-keys, custom-data, resource-disk); the run still reports' },
      skip: { value: 'STEP,…', multiple: true, help: 'leave out these OS steps; the run still reports' },
    },
    run: async ({ values }) => (await import('./provision.js')).provisionCommand(values),
  },
  clean: {
    summary: 'Re-arm an image for capture: remove the provisioned markers (with --logs also the run history).',
    options: {
      logs: { help: 'also remove the log file and the run journals, and empty the guest KVP pool' },
      config: CONFIG_OPTION,
    },
    run: async ({ values }) => (await import('./clean.js')).clean(values),
  },
  deprovision: {
    summary: 'Generalize this system or an image for capture: remove SSH host keys, DHCP leases, shell histories, root\'s password hash, the certificates bootstate placed and its own state, and reset the machine id and hostname (with --user also the admin account). Lists the changes and asks first.',
    options: {
      user: { help: 'also delete the admin account bootstate created (userdel -r: its home) and its sudoers drop-in' },
      'waagent-state': { help: 'also remove WALinuxAgent\'s state as waagent -deprovision does: the contents of /var/lib/waagent and /var/log/azure, and /var/log/waagent.log' },
      root: { value: 'DIR', help: 'act on the image mounted under DIR instead of this system, its paths and symlinks resolved inside DIR as chroot would' },
      force: { help: 'make the changes without asking (needed when stdin is not a terminal)' },
    },
    notes: 'Exit 0 when every change was made or none was needed, 1 when one failed, something was refused (a symlink where a file of bootstate\'s was) or the answer was not y, 2 when stdin is not a terminal and --force was not given (nothing is changed).',
    run: async ({ values }) => {
      const { runDeprovision, terminalIo } = await import('./deprovision.js');
      const { root, user, force } = values as { root?: string; user?: boolean; force?: boolean };
      return runDeprovision({ root, user, force, waagentState: values['waagent-state'] === true }, terminalIo(STDIO));
    },
  },
  firewall: {
    summary: 'Let only root reach the wireserver, TCP port 53 excepted (WALinuxAgent\'s OS.EnableFirewall): apply the rules (bootstate-firewall.service does on every boot), check them, or remove them.',
    args: 'apply|check|remove',
    positionals: { min: 1, max: 1, choices: ['apply', 'check', 'remove'] },
    options: {
      config: CONFIG_OPTION,
      snapshot: { value: 'FILE', help: 'apply: save nft\'s listing of the table as applied to FILE, which the monitor\'s re-check compares with the kernel\'s (remove, or no nft: FILE is deleted)' },
    },
    notes: 'The rules are nft\'s table `inet bootstate`, or where nft is absent the chain BOOTSTATE of iptables\' security table. apply replaces them when they differ (with [firewall] enable = false it removes them); check exits 1 naming each missing rule; remove touches nothing but them.',
    run: async ({ values, positionals }) => (await import('./firewall.js')).runFirewall(values, positionals[0]!, STDIO),
  },
  report: {
    summary: 'Send one health report to the wireserver, with the same retries and deadline as a first boot.',
    args: 'ready|in-progress|failure',
    positionals: { min: 1, max: 1, choices: ['ready', 'in-progress', 'failure'] },
    options: {
      reason: { value: 'TEXT', help: 'why provisioning failed (required with failure)' },
      'vm-id': { value: 'ID', help: 'VM id to report (default: read from /sys/class/dmi/id/product_uuid)' },
      config: CONFIG_OPTION,
      'log-format': LOG_FORMAT_OPTION,
    },
    run: async ({ values, positionals }) => (await import('./report.js')).report(values, positionals),
  },
  monitor: {
    summary: 'Report HealthService observations (host plugin and IMDS heartbeats) until stopped.',
    options: {
      once: { help: 'measure every signal once, post the observations and exit' },
      config: CONFIG_OPTION,
      inspect: { value: 'ws://HOST:PORT', help: 'stream the run to an inspector (bootstate inspect-server)' },
      'log-format': LOG_FORMAT_OPTION,
    },
    run: async ({ values }) => (await import('./monitor.js')).monitor(values),
  },
  'resource-disk': {
    summary: 'Format the temporary (resource) disk if it holds only what Azure put there, mount it and make its swap file (its own unit runs this on every boot).',
    options: {
      config: CONFIG_OPTION,
      sysfs: { value: 'DIR', help: 'read the devices from DIR instead of /sys' },
      'log-format': LOG_FORMAT_OPTION,
    },
    notes: 'Exit 0 when the disk was mounted, left alone (with a warning saying why) or absent, 1 when partitioning, formatting or mounting failed.',
    run: async ({ values }) => (await import('./resource-disk.js')).resourceDisk(values),
  },
  network: {
    summary: 'Configure the VM\'s NICs, secondary IP addresses and IPv6 from IMDS for the image\'s network stack, and apply them live (its own unit runs this on every boot).',
    options: {
      config: CONFIG_OPTION,
      root: { value: 'DIR', help: 'write the network stack\'s configuration under DIR (an image mounted there) instead of /; nothing is applied live' },
      'sys-class-net': { value: 'DIR', help: 'read the interfaces from DIR instead of /sys/class/net' },
      'log-format': LOG_FORMAT_OPTION,
    },
    notes: 'Exit 0 when the network was configured (a secondary NIC that did not come up is a warning) or the image\'s own configuration was kept (no network section in IMDS, no network stack found: a warning says why), 1 when writing or applying failed.',
    run: async ({ values }) => (await import('./network.js')).network(values),
  },
  kvp: {
    summary: 'Read and edit a Hyper-V KVP pool file under flock(2), as the agent does.',
    args: 'COMMAND [ARGS]',
    ownArgv: true,
    options: {
      pool: { value: 'N', help: 'pool number 0..4 (default 1, guest to host)' },
      dir: { value: 'DIR', help: 'pool directory (default /var/lib/hyperv)' },
      file: { value: 'PATH', help: 'any pool file (overrides --pool and --dir)' },
      json: { help: 'print JSON' },
      append: { help: 'with write: add a record instead of replacing the key' },
      'if-stale': { help: 'with clear: only if the pool predates this boot' },
      repair: { help: 'drop a torn tail instead of refusing a corrupt file' },
      unsafe: { help: 'allow keys up to 511 and values up to 2,047 bytes (the host may truncate them)' },
      lossy: { help: 'show invalid UTF-8 as U+FFFD instead of failing' },
    },
    notes: `Commands:
  info                pool path, size, record and key counts, stale/corrupt flags
  dump                every record in file order
  entries             every key with its last value
  read KEY            the last value of KEY (exit 1 if absent)
  write KEY VALUE     set KEY (replacing earlier records)
  delete KEY          remove every record of KEY
  clear               empty the pool
  is-stale            exit 0 if the pool predates this boot, else 1
  diag                the boot diagnostics: each run's timeline, failing step and kernel log, reassembled
                      and decompressed (exit 1 if there are none, or a part is missing or corrupt)`,
    run: async ({ argv }) =>
      (await import('./kvp.js')).runKvpCommand(argv, {
        stdout: (s) => process.stdout.write(s),
        stderr: (s) => process.stderr.write(s),
      }),
  },
  graph: {
    summary: 'Draw a statechart.',
    options: {
      machine: { value: 'NAME', choices: ['provisioning', 'monitor'], default: 'provisioning', help: 'which chart' },
      format: { value: 'FORMAT', choices: ['dot', 'mermaid', 'svg', 'html'], default: 'svg', help: 'output format' },
      overview: { help: 'retry loops and simple parallel regions as single states (the README picture; html always has both)' },
      output: { value: 'FILE', short: 'o', help: 'write to FILE instead of stdout' },
    },
    run: async ({ values }) => (await import('./graph.js')).graph(values),
  },
  trace: {
    summary: 'Print how a run ended and why, and write one self-contained HTML page of it: the chart with its path, a timeline, timings and the journal in words.',
    args: '[JOURNAL]',
    positionals: { min: 0, max: 1 },
    options: {
      output: { value: 'FILE', short: 'o', help: 'where to write the page (default: next to the journal)' },
      config: CONFIG_OPTION,
    },
    notes: 'Without JOURNAL, the latest run journal under <data_dir>/runs/ is drawn.',
    run: async ({ values, positionals }) => (await import('./trace.js')).trace(values, positionals),
  },
  fleet: {
    summary: 'Read many runs\' journals (or OpenTelemetry file exports) as one fleet and print what an operator needs: outcomes and failure reasons by count, time to READY=1 and to Ready accepted by percentile, the slowest step; with --output also one self-contained HTML page.',
    args: 'PATH…',
    positionals: { min: 1, max: Number.MAX_SAFE_INTEGER },
    options: {
      output: { value: 'FILE', short: 'o', help: 'also write the fleet view as one HTML page to FILE' },
      json: { help: 'print the summary as JSON instead of text' },
    },
    notes: 'PATH is a journal, an OTLP/JSON file export (JSON lines of ExportTraceServiceRequest: a run per provision trace), a directory (every *.jsonl under it, at any depth) or a quoted glob (*, ?, […], ** for any depth). A journal that cannot be read is named and not counted; one whose last line is torn is counted and named as truncated. Times are from each run\'s first journal line. Exit 0 when at least one run was read, 1 when none was.',
    run: async ({ values, positionals }) => (await import('./fleet.js')).fleet(values, positionals),
  },
  'inspect-server': {
    summary: 'Relay live runs (--inspect) to a browser viewer; listens on loopback only unless told otherwise.',
    options: {
      host: { value: 'ADDRESS', default: '127.0.0.1', help: 'address to listen on' },
      port: { value: 'PORT', kind: 'port', default: '8787', help: 'port to listen on' },
      'allow-remote': { help: 'allow a --host that is not a loopback address (anyone who can reach it sees the runs)' },
    },
    run: async ({ values }) => (await import('./inspect-server.js')).inspectServer(values),
  },
  config: {
    summary: 'For image builders: print the merged configuration with the origin of each value; exit 78 on unknown keys or backends, wrong types, TOML errors or a configuration file that is not a regular file.',
    args: 'check',
    positionals: { min: 1, max: 1, choices: ['check'] },
    options: { config: CONFIG_OPTION },
    run: async ({ values }) => (await import('./config.js')).runConfigCheck(values as { config?: string }, STDIO),
  },
  doctor: {
    summary: 'Check an image for what would make two agents provision the same VM, make bootstate ineffective or ship the build VM\'s identity (host keys, machine id, admin account); exit 1 if a first boot would break.',
    options: { root: { value: 'DIR', help: 'inspect the image mounted under DIR instead of this system, its paths and symlinks resolved inside DIR as chroot would (default /)' } },
    run: async ({ values }) => (await import('./doctor.js')).runDoctor(values as { root?: string }, STDIO),
  },
  gate: {
    summary: 'For another agent\'s unit (WALinuxAgent\'s ExecCondition=): wait while a provisioning run holds the instance lock, then exit 0 only when this VM is provisioned (or is not an Azure VM).',
    options: {
      timeout: { value: 'SECS', kind: 'count', help: 'wait at most SECS for a provisioning run to end (default: the IMDS and Ready budgets plus 300 s)' },
      config: CONFIG_OPTION,
    },
    notes: 'Exit 0: provisioned, or not an Azure VM. 1: not provisioned (provisioning failed or has not run for this VM id). 3: provisioned, Ready not yet accepted. 4: a pool VM waiting to be claimed. 5: a provisioning run still holds the lock after --timeout. 6: undecided: the configuration does not load, the instance lock cannot be read, or the gate\'s own output failed. 2: usage error.',
    // An exit 0 would open the gate: its output failing proves nothing.
    outputErrorExit: GATE_EXIT.undecided,
    run: async ({ values }) =>
      (await import('../gate/gate.js')).gate({ config: values.config as string | undefined, timeoutSecs: values.timeout === undefined ? undefined : Number(values.timeout), ...STDIO }),
  },
  demo: {
    summary: 'A whole first boot against an embedded fake Azure fabric, changing nothing on this machine.',
    options: {
      dir: { value: 'DIR', help: 'provision into DIR (default: a new temporary directory)' },
      monitor: { help: 'then run monitor --once against the same embedded fabric and print what it measured and posted' },
      pps: { help: 'play a pre-provisioned pool VM: Ready to the pool, polls of reprovisiondata, the claim, the customer\'s provisioning' },
    },
    run: async ({ values }) => (await import('./demo.js')).runDemo(values),
  },
};
