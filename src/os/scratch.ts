/**
 * A Provisioner that only writes under one directory and records the commands it would run, so the demo (and
 * tests) can show a whole provisioning run without root: `<dir>/etc/hostname`, `<dir>/etc/passwd`,
 * `<dir>/home/<user>/.ssh/authorized_keys`, `<dir>/etc/ssh/sshd_config.d/00-bootstate.conf`, …
 */
import { appendFile, chmod, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../config/defaults.js';
import { BootstateError } from '../core/errors.js';
import type { RunOptions, RunResult } from '../system/exec.js';
import type { HostKeysResult, HostKeyType } from './ssh/host-keys.js';
import { under } from '../system/paths.js';
import type { StepResult, UserRequest } from './provisioner.js';
import { RealProvisioner } from './real.js';
import { writeFileAtomic } from '../system/atomic.js';
import { machineHostname, readPasswd, usernameProblem, validateHostname } from './validate.js';

/** The comment field of passwd lines this backend writes. */
const SCRATCH_GECOS = 'bootstate scratch';

/** Commands the scratch backend treats as "not installed", so nothing pretends to have verified anything. */
const ABSENT = new Set(['sshd', 'systemctl', 'visudo']);

/** The scratch Provisioner over `dir`; `commands` lists every argv it would have run (never stdin). */
export class ScratchProvisioner extends RealProvisioner {
  override readonly name = 'scratch';
  readonly commands: string[][];

  constructor(readonly dir: string, config: Config) {
    const commands: string[][] = [];
    const uid = process.getuid?.() ?? 0;
    const gid = process.getgid?.() ?? 0;
    super({
      config,
      root: dir,
      rootOwner: { uid, gid },
      run: async (argv: string[], _options?: RunOptions): Promise<RunResult> => {
        commands.push(recorded(argv, dir));
        if (ABSENT.has(argv[0]!)) {
          throw new BootstateError('SUBPROCESS_FAILED', `${argv[0]}: not run in scratch mode`, {
            data: [['command', argv.join(' ')], ['spawn_error', 'ENOENT']],
          });
        }
        return { argv, exitCode: 0, signal: null, stdout: '', stderr: '', endedBy: 'exit' };
      },
    });
    this.commands = commands;
  }

  /** Records the configured backends' commands; `<dir>/etc/hostname` is written as hostnamectl would write it. */
  override async setHostname(hostname: string, signal: AbortSignal): Promise<StepResult> {
    await mkdir(under(this.dir, '/etc'), { recursive: true });
    const result = await super.setHostname(hostname, signal);
    if (result.backend === 'hostnamectl') {
      await writeFileAtomic(under(this.dir, '/etc/hostname'), `${machineHostname(validateHostname(hostname))}\n`, { mode: 0o644 });
    }
    return result;
  }

  /**
   * Probes the running system's DHCP client as the real backend does and records the commands it would run,
   * waiting for nothing (they did not run).
   */
  override async publishHostname(hostname: string, signal: AbortSignal): Promise<StepResult> {
    return this.publish(hostname, signal, false);
  }

  /**
   * As the real check, except for a user this backend created itself on an earlier (interrupted) run: that passwd
   * line carries the runner's uid so the files it owns match, which may be 0 — not a system account.
   */
  override async validateUsername(username: string): Promise<void> {
    const passwd = await readFile(under(this.dir, '/etc/passwd'), 'utf8').catch(() => '');
    const ours = passwd.split('\n').some((line) => line.startsWith(`${username}:`) && line.split(':')[4] === SCRATCH_GECOS);
    if (ours && usernameProblem(username) === null) return;
    await super.validateUsername(username);
  }

  /** Records useradd as the real backend would, then creates the home and a passwd line under `dir`. */
  override async createUser(request: UserRequest, signal: AbortSignal): Promise<StepResult> {
    const result = await super.createUser(request, signal);
    const passwd = under(this.dir, '/etc/passwd');
    const home = `/home/${request.username}`;
    if (!(await readPasswd(passwd)).some((e) => e.name === request.username)) {
      await mkdir(path.dirname(passwd), { recursive: true });
      const { uid, gid } = this.context.rootOwner;
      await appendFile(passwd, `${request.username}:x:${uid}:${gid}:${SCRATCH_GECOS}:${home}:${this.config.user_provisioners.shell}\n`);
    }
    try {
      await mkdir(under(this.dir, home), { recursive: true, mode: 0o750 });
      await chmod(under(this.dir, home), 0o750);
    } catch (error) {
      throw new BootstateError('USER_FAILED', `cannot create home ${home}: ${(error as Error).message}`, { cause: error, data: [['home', home]] });
    }
    // A scratch tree has no programs installed, so "the shell does not exist" says nothing about the image.
    const warnings = (result.warnings ?? []).filter((w) => !w.startsWith('shell '));
    return { ...result, backend: 'scratch', warnings };
  }

  /** Records the ssh-keygen runs the real backend would make; the scratch tree has no host keys to replace. */
  override async regenerateHostKeys(signal: AbortSignal): Promise<HostKeysResult> {
    const cfg = this.config.host_keys;
    if (!cfg.regenerate) return super.regenerateHostKeys(signal);
    await this.recordKeygen(cfg.types, signal);
    // No sshd runs on a scratch tree: every key is made before, none is left for later.
    return { backend: 'scratch', detail: `new ssh host keys would be made: ${[...new Set(cfg.types)].join(', ')}`, later: [] };
  }

  /** Never asked for (nothing is left for later above); records the ssh-keygen runs should it be. */
  override async addHostKeys(types: readonly HostKeyType[], signal: AbortSignal): Promise<StepResult> {
    await this.recordKeygen(types, signal);
    return { backend: 'scratch', detail: `ssh host keys would be added: ${[...new Set(types)].join(', ')}` };
  }

  /** The scratch tree has no host keys, and none was ever left for later: nothing can be missing. */
  override async completeHostKeys(): Promise<StepResult> {
    return { backend: 'scratch', detail: 'no ssh host keys in a scratch tree' };
  }

  /** One recorded `ssh-keygen` per type, as the real backend would run it. */
  private async recordKeygen(types: readonly HostKeyType[], signal: AbortSignal): Promise<void> {
    const dir = this.config.host_keys.dir;
    for (const type of new Set(types)) {
      await this.context.run(['ssh-keygen', '-q', '-t', type, '-N', '', '-C', '', '-f', path.posix.join(dir, `ssh_host_${type}_key`)], { signal });
    }
  }
}

/** Shows temp files of the real backend as paths under the scratch dir's own `/`. */
function recorded(argv: string[], dir: string): string[] {
  return argv.map((a) => (a.startsWith(dir) ? a.slice(dir.length) || '/' : a));
}
