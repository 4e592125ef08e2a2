/**
 * configureSshd's reload decision under systemd, against a real root directory (`/run/systemd/system` present, as
 * systemd as PID 1 leaves it) and a runner that answers `sshd -T` as OpenSSH does and records every command: a
 * running sshd (its PidFile exists) is reloaded; with no PidFile on disk there is no daemon to reload and systemctl
 * is not run; `PidFile none` tells nothing, so systemctl decides as before.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../../src/config/defaults.js';
import type { RunOptions, RunResult } from '../../../src/system/exec.js';
import { configureSshd } from '../../../src/os/ssh/sshd.js';

let root: string;
let commands: string[][];

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'bootstate-sshd-'));
  await mkdir(path.join(root, 'run/systemd/system'), { recursive: true });
  await mkdir(path.join(root, 'etc/ssh/sshd_config.d'), { recursive: true });
  await writeFile(path.join(root, 'etc/ssh/sshd_config'), 'Include /etc/ssh/sshd_config.d/*.conf\n');
  commands = [];
});
afterEach(() => rm(root, { recursive: true, force: true }));

/** `sshd -T` reads the drop-in we wrote and prints `pidFile`'s line (none: no pidfile line at all). */
function runner(pidFile: string | undefined) {
  return async (argv: string[], _options?: RunOptions): Promise<RunResult> => {
    commands.push(argv);
    let stdout = '';
    if (argv[0] === 'sshd') {
      const dropIn = await readFile(path.join(root, 'etc/ssh/sshd_config.d/00-bootstate.conf'), 'utf8');
      const value = /PasswordAuthentication (\w+)/.exec(dropIn)![1];
      stdout = `port 22\npasswordauthentication ${value}\n${pidFile === undefined ? '' : `pidfile ${pidFile}\n`}`;
    }
    return { argv, exitCode: 0, signal: null, stdout, stderr: '', endedBy: 'exit' };
  };
}

const configure = (pidFile: string | undefined) =>
  configureSshd(false, DEFAULT_CONFIG.ssh, { root, run: runner(pidFile), rootOwner: { uid: process.getuid!(), gid: process.getgid!() } }, new AbortController().signal);

describe('configureSshd under systemd', () => {
  it('does not run systemctl when the PidFile sshd names does not exist: no daemon holds an older configuration', async () => {
    const result = await configure('/run/sshd.pid');
    expect(result.detail).toMatch(/sshd is not running \(no \/run\/sshd\.pid\), nothing to reload$/);
    expect(commands.map((c) => c[0])).toEqual(['sshd']);
  });

  it('reloads a running sshd (its PidFile exists under the root) through systemctl', async () => {
    await writeFile(path.join(root, 'run/sshd.pid'), '4242\n');
    const result = await configure('/run/sshd.pid');
    expect(result.detail).toMatch(/sshd reloaded if running$/);
    expect(commands).toContainEqual(['systemctl', 'try-reload-or-restart', 'ssh.service', 'sshd.service']);
  });

  it('leaves the decision to systemctl when sshd writes no PidFile (none) or does not name one', async () => {
    for (const pidFile of ['none', undefined]) {
      commands = [];
      await configure(pidFile);
      expect(commands.map((c) => c[0])).toEqual(['sshd', 'systemctl']);
    }
  });
});
