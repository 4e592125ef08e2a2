/**
 * The real Provisioner: validates its input, then runs each step through the configured backends in order
 * (backends.ts). Every path is resolved under `root` (default `/`); commands run as they are, so tests run it
 * inside the namespace sandbox (test/e2e/ns.ts) rather than pointing commands at a temp tree.
 */
import { access, readFile } from 'node:fs/promises';
import type { Config } from '../config/defaults.js';
import { BootstateError, escapeValue } from '../core/errors.js';
import type { SecretStore } from '../core/secrets.js';
import { resolveAuthorizedKeysFiles } from './ssh/authorized-keys-file.js';
import { sshdDumpFlags, sshdLoadsKeysPerConnection } from './ssh/sshd-capability.js';
import { tryBackends, type OsContext } from './backends.js';
import { run as defaultRun, type Runner } from '../system/exec.js';
import { saveCustomData } from './custom-data.js';
import { HOSTNAME_BACKENDS } from './hostname/hostname.js';
import { publishHostname } from './hostname/hostname-publish.js';
import { PASSWORD_BACKENDS } from './user/password.js';
import { under } from '../system/paths.js';
import type { CertificatesRequest, Provisioner, SshKeysRequest, StepResult, UserRequest } from './provisioner.js';
import { installKeyPair, keyPairPath, placeCertificates, WAAGENT_PROGRAMS } from './certificates/certificate-files.js';
import { keepKeysSshdAccepts } from './ssh/key-policy.js';
import { writeAuthorizedKeys } from './ssh/ssh-keys.js';
import { addHostKeys, completeHostKeys, regenerateHostKeys, type HostKeysResult, type HostKeyType } from './ssh/host-keys.js';
import { checkProxyAgent } from './proxy-agent.js';
import { labelSshHome, restoreContexts, sshHomePaths } from './selinux.js';
import { configureSshd, ensureSshdRuntimeDir } from './ssh/sshd.js';
import { sudoRuleFor, writeSudoers } from './user/sudoers.js';
import { USER_BACKENDS } from './user/user.js';
import { machineHostname, readPasswd, validateHostname, validateSshKey, validateUsername, type PasswdEntry } from './validate.js';

export interface RealProvisionerOptions {
  config: Config;
  /** Where the system's `/` is; default `/`. */
  root?: string;
  run?: Runner;
  /** Owner of system files written (default root:root). */
  rootOwner?: { uid: number; gid: number };
}

/** The Provisioner that changes the machine, e.g. `new RealProvisioner({ config: DEFAULT_CONFIG })`. */
export class RealProvisioner implements Provisioner {
  readonly name: string = 'real';
  protected readonly config: Config;
  protected readonly context: OsContext;

  constructor(options: RealProvisionerOptions) {
    this.config = options.config;
    this.context = { root: options.root ?? '/', run: options.run ?? defaultRun, rootOwner: options.rootOwner ?? { uid: 0, gid: 0 } };
  }

  /** Throws INVALID_USERNAME for a non-portable name or an existing system account (uid outside UID_MIN..UID_MAX). */
  async validateUsername(username: string): Promise<void> {
    const defs = await readLoginDefs(under(this.context.root, '/etc/login.defs'));
    await validateUsername(username, { passwdFile: under(this.context.root, '/etc/passwd'), uidMin: defs.UID_MIN, uidMax: defs.UID_MAX });
  }

  /** Validates the name (RFC 1123) and gives the machine its first label. */
  async setHostname(hostname: string, signal: AbortSignal): Promise<StepResult> {
    const name = machineHostname(validateHostname(hostname));
    const backends = this.config.hostname_provisioners.backends;
    return tryBackends('hostname', 'HOSTNAME_FAILED', backends, HOSTNAME_BACKENDS, name, this.context, signal);
  }

  /** Makes the DHCP client of the primary interface send the (validated) name; see hostname-publish.ts. */
  async publishHostname(hostname: string, signal: AbortSignal): Promise<StepResult> {
    return this.publish(hostname, signal, true);
  }

  protected async publish(hostname: string, signal: AbortSignal, observe: boolean): Promise<StepResult> {
    const cfg = this.config.hostname_publishing;
    if (!cfg.enable) return { backend: 'none', detail: 'hostname publishing disabled by config' };
    const name = machineHostname(validateHostname(hostname));
    // A tenth of the budget is left to the chart's own deadline, so publishing ends with its warning, not cut off.
    const deadline = Date.now() + cfg.timeout_secs * 900;
    return publishHostname(name, cfg.backends, this.context, { probeRoot: '/', deadline, observe }, signal);
  }

  /**
   * Creates the user (or adds an existing one to its groups) and the sudo rule `[user_provisioners] sudo` gives: the
   * rule is written and checked by visudo beside useradd, and moved into place only once the user exists.
   */
  async createUser(request: UserRequest, signal: AbortSignal): Promise<StepResult> {
    await this.validateUsername(request.username);
    const cfg = this.config.user_provisioners;
    const created = tryBackends('user', 'USER_FAILED', cfg.backends, USER_BACKENDS, { ...request, config: cfg }, this.context, signal);
    const { rule, why } = sudoRuleFor(cfg.sudo, request.passwordProvided);
    const writing =
      rule === null ? null : writeSudoers(request.username, rule, cfg.sudoers_dir, this.context, signal, { withoutVisudo: cfg.sudo === 'auto' ? 'note' : 'warn', after: created });
    // Handled now: a rule visudo refuses rejects while useradd still runs, and is thrown once the user is made.
    writing?.catch(() => undefined);
    let result: StepResult;
    try {
      result = await created;
    } catch (error) {
      // The rule's temp file is gone before the failure is told; its own rejection is this one.
      await writing?.catch(() => undefined);
      throw error;
    }
    const prefix = result.detail ? `${result.detail}; ` : '';
    if (rule === null || writing === null) return { ...result, detail: `${prefix}no sudo rule written (${why})` };
    const sudo = await writing;
    const form = rule === 'nopasswd' ? 'ALL=(ALL) NOPASSWD: ALL' : 'ALL=(ALL) ALL';
    return {
      ...result,
      detail: `${prefix}${sudo.detail}: ${form} (${why})`,
      warnings: [...(result.warnings ?? []), ...(sudo.warnings ?? [])],
    };
  }

  async saveCustomData(secrets: SecretStore, signal: AbortSignal): Promise<StepResult> {
    return saveCustomData(this.config, secrets, this.context, signal);
  }

  /** Locks the password, or sets it from `secrets` through chpasswd's stdin. */
  async setPassword(username: string, secrets: SecretStore, signal: AbortSignal): Promise<StepResult> {
    await this.lookupUser(username);
    const backends = this.config.password_provisioners.backends;
    return tryBackends('password', 'PASSWORD_FAILED', backends, PASSWORD_BACKENDS, { username, secrets }, this.context, signal);
  }

  /** Validates every key, resolves AuthorizedKeysFile through sshd, and merges the keys into the file. */
  async writeSshKeys(request: SshKeysRequest, signal: AbortSignal): Promise<StepResult> {
    for (const key of request.keys) validateSshKey(key);
    if (request.keys.length === 0) return { backend: 'none', detail: 'no ssh keys provided' };
    const user = await this.lookupUser(request.username);
    try {
      if (this.config.ssh.query_sshd_config) await ensureSshdRuntimeDir(this.context.root);
      const resolved = await resolveAuthorizedKeysFiles({
        username: user.name,
        home: user.home,
        uid: user.uid,
        run: this.context.run,
        sshdConfigPath: under(this.context.root, this.config.ssh.sshd_config_path),
        fallback: this.config.ssh.authorized_keys_path,
        querySshd: this.config.ssh.query_sshd_config,
        dumpFlags: this.config.ssh.query_sshd_config ? await sshdDumpFlags() : undefined,
        signal,
      });
      const usable = resolved.acceptedAlgorithms
        ? keepKeysSshdAccepts(request.keys, resolved.acceptedAlgorithms, request.passwordAuthentication ?? true)
        : { keys: request.keys, skipped: [] };
      const skipped = usable.skipped.map((s) => `ssh key skipped: ${s.key} ${s.problem}`);
      if (usable.keys.length === 0) return { backend: resolved.source, detail: 'no ssh key this sshd accepts', warnings: [...resolved.warnings, ...skipped] };
      const written = await writeAuthorizedKeys(
        { username: user.name, uid: user.uid, gid: user.gid, home: user.home, paths: resolved.paths, root: this.context.root, rootOwner: this.context.rootOwner },
        usable.keys,
      );
      const label = sshHomePaths(written.path, user.home);
      const labels = [...(await labelSshHome(label.sshHome, this.context, signal)), ...(await restoreContexts(label.other, this.context, signal))];
      return {
        backend: resolved.source,
        detail: `${written.added} key(s) added to ${written.path} (${written.total} in total)`,
        warnings: [...resolved.warnings, ...skipped, ...written.warnings, ...labels],
      };
    } catch (error) {
      if (error instanceof BootstateError && (error.code === 'SSH_KEYS_FAILED' || error.code === 'INVALID_SSH_KEY')) throw error;
      const message = (error as Error).message;
      throw new BootstateError('SSH_KEYS_FAILED', `ssh keys: ${message}`, { data: [['error', message]], cause: error });
    }
  }

  /** Places the certificates (unless WALinuxAgent, installed, does with `auto`) and installs the key pairs. */
  async installCertificates(request: CertificatesRequest, signal: AbortSignal): Promise<StepResult> {
    const warnings: string[] = [];
    const done: string[] = [];
    try {
      const waagent = request.place === 'auto' ? await this.waagentInstalled() : null;
      if (request.place === true || (request.place === 'auto' && waagent === null)) {
        const written = await placeCertificates(this.context.root, this.context.rootOwner, request.certificates, { signal, record: this.config.data_dir.path });
        done.push(`${written.length} file(s) in /var/lib/waagent`);
      } else if (waagent) {
        done.push(`certificates left to WALinuxAgent (${waagent})`);
      }
    } catch (error) {
      if (error instanceof BootstateError) throw error;
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      throw new BootstateError('CERTIFICATES_FAILED', `cannot write /var/lib/waagent: ${code}`, { data: [['path', '/var/lib/waagent'], ['error', code]], cause: error });
    }
    if (request.keyPairs.length > 0) {
      const user = await this.lookupUser(request.username);
      for (const pair of request.keyPairs) {
        try {
          const file = keyPairPath(pair.path, user.home);
          await installKeyPair({ uid: user.uid, gid: user.gid, home: user.home, root: this.context.root }, file, pair.privateKeyPem, pair.publicKeyLine);
          done.push(`key pair ${pair.fingerprint} at ${file}`);
        } catch (error) {
          warnings.push(`key pair ${pair.fingerprint} not installed: ${(error as Error).message}`);
        }
      }
    }
    return { backend: 'file', detail: done.length > 0 ? done.join('; ') : 'nothing to install', warnings };
  }

  /** WALinuxAgent's program, when it is installed. */
  protected async waagentInstalled(): Promise<string | null> {
    for (const program of WAAGENT_PROGRAMS) {
      if (await access(under(this.context.root, program)).then(() => true, () => false)) return program;
    }
    return null;
  }

  /** Writes the sshd drop-in for PasswordAuthentication and checks the effective value. */
  async configureSshd(passwordAuthentication: boolean, signal: AbortSignal): Promise<StepResult> {
    return configureSshd(passwordAuthentication, this.config.ssh, this.context, signal);
  }

  async checkProxyAgent(signal: AbortSignal): Promise<StepResult> {
    const { detail } = await checkProxyAgent(this.config.azure_proxy_agent.wait_secs, this.context.run, signal);
    return { backend: 'azure-proxy-agent', detail };
  }

  async regenerateHostKeys(signal: AbortSignal): Promise<HostKeysResult> {
    const cfg = this.config.host_keys;
    if (!cfg.regenerate) return { backend: 'none', detail: 'host key regeneration disabled by config', later: [] };
    // Only an sshd that reads its keys per connection offers a key made after it started.
    const later = cfg.background.length && (await sshdLoadsKeysPerConnection()) ? cfg.background : [];
    return regenerateHostKeys({ dir: cfg.dir, types: cfg.types, later }, this.context, signal);
  }

  async addHostKeys(types: readonly HostKeyType[], signal: AbortSignal): Promise<StepResult> {
    const cfg = this.config.host_keys;
    return addHostKeys({ dir: cfg.dir, types, all: cfg.types }, this.context, signal);
  }

  async completeHostKeys(signal: AbortSignal): Promise<StepResult> {
    const cfg = this.config.host_keys;
    if (!cfg.regenerate) return { backend: 'none', detail: 'host key regeneration disabled by config' };
    return completeHostKeys({ dir: cfg.dir, types: cfg.types }, this.context, signal);
  }

  /** The user's passwd entry, or USER_MISSING. */
  protected async lookupUser(username: string): Promise<PasswdEntry> {
    const entry = (await readPasswd(under(this.context.root, '/etc/passwd'))).find((e) => e.name === username);
    if (!entry) {
      throw new BootstateError('USER_MISSING', `user ${escapeValue(username)} does not exist`, { data: [['username', escapeValue(username)]] });
    }
    return entry;
  }
}

/** Numeric settings from login.defs(5) (UID_MIN, UID_MAX, …); a missing file reads as empty. */
export async function readLoginDefs(file: string): Promise<Record<string, number>> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^\s*([A-Z_]+)\s+(\d+)\s*$/.exec(line);
    if (m) out[m[1]!] = Number(m[2]);
  }
  return out;
}
