/**
 * The wireserver firewall, with the real nft and iptables, inside a network namespace this test creates: a fake
 * wireserver listens there on 168.63.129.16 (port 80, and TCP 53 for DNS), and clients run in the namespace as root
 * and as uid 65534 (nobody). Nothing here touches the host's own rules or addresses.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run, type Runner } from '../../src/system/exec.js';
import {
  applyFirewall,
  checkFirewall,
  iptablesChainRules,
  iptablesJump,
  iptablesRestoreInput,
  nftRuleset,
  removeFirewall,
} from '../../src/firewall/firewall.js';
import { renderDefaultConfig, renderPackagedFirewall } from '../../packaging/default-config.js';
import { stopProcess } from '../e2e/boot.js';
import { canSandbox, createNetns, type Netns } from '../e2e/ns.js';
import { AGENT } from '../integration/agent.js';

const WIRESERVER = '168.63.129.16';
const NOBODY = 65534;
const RECHECK = path.resolve('packaging/libexec/firewall-recheck');
const LOAD = path.resolve('packaging/libexec/firewall-load');
/** What bootstate-firewall-recheck.service runs every 30 s, with the script where this repository has it. */
const recheckUnitCommand = async (): Promise<string[]> => {
  const unit = await readFile(path.resolve('packaging/systemd/bootstate-firewall-recheck.service'), 'utf8');
  const argv = /^ExecStart=(.*)$/m.exec(unit)![1]!.split(' ');
  expect(argv[0]).toBe('/usr/libexec/bootstate/firewall-recheck');
  return [RECHECK, ...argv.slice(1)];
};

describe('the rules bootstate writes', () => {
  it('are one nft table of its own, replaced as a whole: TCP 53 for everyone, the rest for root, new and invalid TCP from others dropped', () => {
    expect(nftRuleset(WIRESERVER)).toBe(`table inet bootstate
delete table inet bootstate
table inet bootstate {
\tchain output {
\t\ttype filter hook output priority filter; policy accept;
\t\tip daddr 168.63.129.16 tcp dport 53 accept
\t\tip daddr 168.63.129.16 meta skuid 0 accept
\t\tip daddr 168.63.129.16 meta l4proto tcp ct state invalid,new drop
\t}
}
`);
  });

  it('are, for iptables, a chain of its own in the security table, replaced in one commit, and one jump from OUTPUT', () => {
    expect(iptablesRestoreInput()).toBe(`*security
:BOOTSTATE - [0:0]
-A BOOTSTATE -p tcp -m tcp --dport 53 -j ACCEPT
-A BOOTSTATE -m owner --uid-owner 0 -j ACCEPT
-A BOOTSTATE -m conntrack --ctstate INVALID,NEW -j DROP
COMMIT
`);
    expect(iptablesJump(WIRESERVER)).toEqual(['-d', '168.63.129.16/32', '-p', 'tcp', '-j', 'BOOTSTATE']);
  });

  it('name any IPv4 wireserver address, and refuse anything else with the address in the message', () => {
    fc.assert(
      fc.property(fc.ipV4(), (address) => {
        expect(nftRuleset(address).split(`ip daddr ${address} `)).toHaveLength(4);
        expect(iptablesJump(address)[1]).toBe(`${address}/32`);
      }),
    );
    fc.assert(
      fc.property(fc.oneof(fc.ipV6(), fc.domain(), fc.string()), (address) => {
        fc.pre(!/^\d+\.\d+\.\d+\.\d+$/.test(address));
        expect(() => nftRuleset(address)).toThrow(`not '${address}'`);
      }),
    );
  });
});

/** A TCP server in the namespace on the wireserver's address: it answers every connection with its port. */
const SERVER = `
const net = require('node:net');
let up = 0;
for (const port of [80, 53]) net.createServer((s) => s.end('wireserver:' + port)).listen(port, process.argv[1], () => { if (++up === 2) console.log('listening'); });
`;

/** A client: prints what the server sent, or `timeout` when no connection opened within the bound. */
const CLIENT = `
const s = require('node:net').connect(Number(process.argv[2]), process.argv[1]);
s.setTimeout(Number(process.argv[3]), () => { console.log('timeout'); process.exit(0); });
let got = '';
s.on('data', (d) => (got += d)).on('end', () => { console.log(got); process.exit(0); });
s.on('error', (e) => { console.log('error ' + e.code); process.exit(0); });
`;

describe.skipIf(!canSandbox)('the firewall in a network namespace, with the real nft and iptables', () => {
  let netns: Netns;
  let server: ChildProcess;
  let dir: string;
  const inNs: Runner = (argv, options) => run(['ip', 'netns', 'exec', netns.name, ...argv], options);

  /**
   * Connects from the namespace to `port` on the wireserver as `uid`. A dropped SYN is retried by the kernel and
   * never answered, so the client gives up after `waitMs`: long enough for a loaded machine when the connection is
   * allowed (the answer comes from a process in the same namespace), and the control below shows the same client
   * gets in as nobody when no rule is in place.
   */
  async function reach(port: number, uid: number, waitMs = 5_000): Promise<string> {
    const as = uid === 0 ? [] : ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups'];
    const result = await inNs([...as, process.execPath, '-e', CLIENT, WIRESERVER, String(port), String(waitMs)], { timeoutMs: waitMs + 60_000 });
    return result.stdout.trim();
  }

  async function bootstate(args: string[], config = path.join(dir, 'bootstate.toml')) {
    return inNs([process.execPath, AGENT, 'firewall', ...args, '--config', config], { allowFailure: true, timeoutMs: 60_000 });
  }

  const nftTables = async () => (await inNs(['nft', 'list', 'tables'])).stdout.trim().split('\n').filter(Boolean).sort();

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'bootstate-firewall-'));
    await writeFile(path.join(dir, 'bootstate.toml'), '[firewall]\nenable = true\n');
    await writeFile(path.join(dir, 'off.toml'), '[firewall]\nenable = false\n');
    netns = await createNetns(`bsfw${process.pid}`);
    server = spawn('ip', ['netns', 'exec', netns.name, process.execPath, '-e', SERVER, WIRESERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      server.stdout!.on('data', (d: Buffer) => String(d).includes('listening') && resolve());
      server.once('exit', (code) => reject(new Error(`the fake wireserver exited (${code})`)));
    });
  }, 60_000);

  afterAll(async () => {
    if (server) await stopProcess(server);
    await netns?.delete();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('without rules, nobody reaches the fake wireserver (the control)', async () => {
    expect(await reach(80, NOBODY, 30_000)).toBe('wireserver:80');
  }, 120_000);

  it('bootstate firewall apply: root reaches the wireserver, nobody does not, nobody still reaches TCP 53', async () => {
    const applied = await bootstate(['apply']);
    expect(applied.exitCode, applied.stderr).toBe(0);
    expect(applied.stdout).toBe('firewall: applied (nft): only root reaches 168.63.129.16, TCP port 53 excepted\n');
    expect(await reach(80, 0, 30_000)).toBe('wireserver:80');
    expect(await reach(80, NOBODY)).toBe('timeout');
    expect(await reach(53, NOBODY, 30_000)).toBe('wireserver:53');
  }, 180_000);

  it('apply again changes nothing; check exits 0, and 1 naming the rule once one is deleted; apply puts it back', async () => {
    const again = await bootstate(['apply']);
    expect(again.stdout).toMatch(/^firewall: already in place \(nft\)/);
    expect(await nftTables()).toEqual(['table inet bootstate']);
    expect((await bootstate(['check'])).exitCode).toBe(0);

    const listed = (await inNs(['nft', '-a', 'list', 'chain', 'inet', 'bootstate', 'output'])).stdout;
    const handle = /meta skuid 0 accept # handle (\d+)/.exec(listed)![1]!;
    await inNs(['nft', 'delete', 'rule', 'inet', 'bootstate', 'output', 'handle', handle]);
    const check = await bootstate(['check']);
    expect(check.exitCode).toBe(1);
    expect(check.stdout).toContain('nft rule missing: ip daddr 168.63.129.16 meta skuid 0 accept');
    expect(await reach(80, 0)).toBe('timeout');

    expect((await bootstate(['apply'])).stdout).toMatch(/^firewall: applied \(nft\)/);
    expect((await bootstate(['check'])).exitCode).toBe(0);
    expect(await reach(80, 0, 30_000)).toBe('wireserver:80');
  }, 180_000);

  it('check finds the rules in place where nft lists protocols by number (no /etc/protocols, as in a minimal root)', async () => {
    const check = await inNs([
      'unshare', '--mount', '--propagation', 'private', 'sh', '-c', 'mount --bind /dev/null /etc/protocols && exec "$@"', 'hide-protocols',
      process.execPath, AGENT, 'firewall', 'check', '--config', path.join(dir, 'bootstate.toml'),
    ], { allowFailure: true, timeoutMs: 60_000 });
    expect([check.exitCode, check.stdout]).toEqual([0, 'firewall: in place (nft): only root reaches 168.63.129.16, TCP port 53 excepted\n']);
  }, 120_000);

  it('check says the table is missing when it is; remove takes bootstate\'s table and leaves another one', async () => {
    await inNs(['nft', 'add', 'table', 'inet', 'someone_else']);
    const removed = await bootstate(['remove']);
    expect(removed.exitCode, removed.stderr).toBe(0);
    expect(removed.stdout).toBe('removed nft table inet bootstate\n');
    expect(await nftTables()).toEqual(['table inet someone_else']);
    expect(await reach(80, NOBODY, 30_000)).toBe('wireserver:80');
    const check = await bootstate(['check']);
    expect(check.exitCode).toBe(1);
    expect(check.stdout).toContain('nft table inet bootstate does not exist');
    expect((await bootstate(['remove'])).stdout).toBe('firewall: no bootstate rules to remove\n');
    await inNs(['nft', 'delete', 'table', 'inet', 'someone_else']);
  }, 180_000);

  it('[firewall] enable = false: apply removes the rules instead, and check has nothing to check', async () => {
    expect((await bootstate(['apply'])).exitCode).toBe(0);
    const off = await bootstate(['apply'], path.join(dir, 'off.toml'));
    expect(off.exitCode).toBe(0);
    expect(off.stdout).toBe('removed nft table inet bootstate\nfirewall: off ([firewall] enable = false)\n');
    expect(await nftTables()).toEqual([]);
    const check = await bootstate(['check'], path.join(dir, 'off.toml'));
    expect([check.exitCode, check.stdout]).toEqual([0, 'firewall: off ([firewall] enable = false), nothing to check\n']);
  }, 180_000);

  it('fails closed on a broken configuration: an error in another key is a warning, and broken own keys mean the defaults (on, 168.63.129.16)', async () => {
    const cases = [
      { file: 'unrelated.toml', text: '[firewall]\nenable = true\n[resource_disk]\nswap_size_mb = "2048"\n', warning: '[resource_disk] swap_size_mb: expected number, got string; the firewall reads only [firewall] enable and [wireserver] address' },
      { file: 'own-type.toml', text: '[firewall]\nenable = "no"\n', warning: '[firewall] enable: expected boolean, got string; using the defaults, [firewall] enable = true and [wireserver] address = "168.63.129.16"' },
      { file: 'syntax.toml', text: '[firewall]\nenable = false\n[resource_disk\n', warning: 'not valid TOML' },
      { file: 'hostname.toml', text: '[wireserver]\naddress = "wireserver.example"\n', warning: '[wireserver] address "wireserver.example" is not an IPv4 address; using the defaults' },
    ];
    for (const { file, text, warning } of cases) {
      await writeFile(path.join(dir, file), text);
      await inNs(['nft', 'delete', 'table', 'inet', 'bootstate'], { allowFailure: true });
      const applied = await bootstate(['apply'], path.join(dir, file));
      expect(applied.exitCode, `${file}: ${applied.stderr}`).toBe(0);
      expect(applied.stderr, file).toContain(warning);
      expect(applied.stdout, file).toBe('firewall: applied (nft): only root reaches 168.63.129.16, TCP port 53 excepted\n');
      expect(await reach(80, NOBODY), file).toBe('timeout');
      const check = await bootstate(['check'], path.join(dir, file));
      expect([file, check.exitCode]).toEqual([file, 0]);
    }
    // remove reads no configuration: a broken one never keeps the rules in place.
    const removed = await bootstate(['remove'], path.join(dir, 'syntax.toml'));
    expect([removed.exitCode, removed.stdout]).toEqual([0, 'removed nft table inet bootstate\n']);
  }, 300_000);

  it('the re-check (packaging/libexec/firewall-recheck) leaves the rules as applied alone, and applies them again once they changed', async () => {
    const snapshot = path.join(dir, 'run/firewall.nft');
    const bin = path.join(dir, 'bin');
    await mkdir(bin, { recursive: true });
    // What PATH finds as `bootstate` on a VM: here the built program with this test's configuration.
    await writeFile(path.join(bin, 'bootstate'), `#!/bin/sh\nexec ${process.execPath} ${AGENT} "$@" --config ${path.join(dir, 'bootstate.toml')}\n`, { mode: 0o755 });
    const recheck = () => inNs(['env', `PATH=${bin}:${process.env.PATH}`, RECHECK, snapshot], { allowFailure: true, timeoutMs: 60_000 });

    expect((await recheck()).stdout).toBe('');
    expect(await nftTables()).toEqual([]);

    expect((await bootstate(['apply', '--snapshot', snapshot])).exitCode).toBe(0);
    expect(await readFile(snapshot, 'utf8')).toBe((await inNs(['nft', 'list', 'table', 'inet', 'bootstate'])).stdout);
    expect((await stat(snapshot)).mode & 0o777).toBe(0o600);
    const quiet = await recheck();
    expect([quiet.exitCode, quiet.stdout, quiet.stderr]).toEqual([0, '', '']);

    const listed = (await inNs(['nft', '-a', 'list', 'chain', 'inet', 'bootstate', 'output'])).stdout;
    const handle = /meta skuid 0 accept # handle (\d+)/.exec(listed)![1]!;
    await inNs(['nft', 'delete', 'rule', 'inet', 'bootstate', 'output', 'handle', handle]);
    const again = await recheck();
    expect(again.exitCode, again.stderr).toBe(0);
    expect(again.stderr).toContain("<4>bootstate: the wireserver firewall's rules changed since they were applied; applying them again");
    expect(again.stdout).toMatch(/^firewall: applied \(nft\)/);
    expect((await bootstate(['check'])).exitCode).toBe(0);
    expect(await reach(80, 0, 30_000)).toBe('wireserver:80');

    await inNs(['nft', 'delete', 'table', 'inet', 'bootstate']);
    expect((await recheck()).stdout).toMatch(/^firewall: applied \(nft\)/);
    expect(await nftTables()).toEqual(['table inet bootstate']);

    const removed = await bootstate(['remove', '--snapshot', snapshot]);
    expect(removed.stdout).toBe('removed nft table inet bootstate\n');
    expect(existsSync(snapshot)).toBe(false);
    expect((await recheck()).stdout).toBe('');
    expect(await nftTables()).toEqual([]);
  }, 240_000);

  it('after `nft flush ruleset` (Debian\'s nftables.conf, so `systemctl reload nftables`), one run of the re-check unit\'s command keeps nobody out again', async () => {
    const bin = path.join(dir, 'bin');
    await mkdir(bin, { recursive: true });
    await writeFile(path.join(bin, 'bootstate'), `#!/bin/sh\nexec ${process.execPath} ${AGENT} "$@" --config ${path.join(dir, 'bootstate.toml')}\n`, { mode: 0o755 });
    // The unit's snapshot, /run/bootstate/firewall.nft, in a directory of the test's bound over /run for each command.
    const runDir = path.join(dir, 'run-flush');
    await mkdir(runDir, { recursive: true });
    const withRun = (argv: string[]) => ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', 'mount --bind "$0" /run && exec "$@"', runDir, ...argv];
    const applied = await inNs(withRun(['env', `PATH=${bin}:${process.env.PATH}`, 'bootstate', 'firewall', 'apply', '--snapshot', '/run/bootstate/firewall.nft']), { allowFailure: true, timeoutMs: 60_000 });
    expect(applied.exitCode, applied.stderr).toBe(0);
    expect(existsSync(path.join(runDir, 'bootstate/firewall.nft'))).toBe(true);
    expect(await reach(80, NOBODY)).toBe('timeout');

    await inNs(['nft', 'flush', 'ruleset']);
    expect(await nftTables()).toEqual([]);
    // The control: with the ruleset flushed, nobody gets in.
    expect(await reach(80, NOBODY, 30_000)).toBe('wireserver:80');

    const recheck = await inNs(withRun(['env', `PATH=${bin}:${process.env.PATH}`, ...(await recheckUnitCommand())]), { allowFailure: true, timeoutMs: 60_000 });
    expect(recheck.exitCode, recheck.stderr).toBe(0);
    expect(recheck.stderr).toContain("the wireserver firewall's rules changed since they were applied; applying them again");
    expect(await reach(80, NOBODY)).toBe('timeout');
    expect(await reach(80, 0, 30_000)).toBe('wireserver:80');
    await inNs(['nft', 'delete', 'table', 'inet', 'bootstate']);
  }, 240_000);

  /**
   * bootstate-firewall.service's loader (packaging/libexec/firewall-load) with its three paths in this test's
   * directory: the snapshot, the packaged ruleset and the configuration directory. `bootstate` on its PATH is the
   * built program reading that directory's bootstate.toml, and records each start, so a test sees whether Node ran.
   */
  describe('the boot loader: nft -f of the packaged rules while the configuration is the packaged one', () => {
    let etc: string;
    let share: string;
    let bin: string;
    let snapshot: string;
    const started = () => readFile(path.join(dir, 'loader-started'), 'utf8').then((t) => t.split('\n').filter(Boolean).length, () => 0);
    const env = (extra: string[] = []) => ['env', `PATH=${bin}:${process.env.PATH}`, ...extra];
    const load = (extra: string[] = []) =>
      inNs([...env(extra), LOAD, snapshot, path.join(share, 'firewall.nft'), etc], { allowFailure: true, timeoutMs: 60_000 });
    const recheck = () => inNs([...env(), RECHECK, snapshot], { allowFailure: true, timeoutMs: 60_000 });
    const unverified = () => existsSync(path.join(dir, 'loader-run/firewall.unverified'));

    beforeAll(async () => {
      etc = path.join(dir, 'loader-etc');
      share = path.join(dir, 'loader-share');
      bin = path.join(dir, 'loader-bin');
      snapshot = path.join(dir, 'loader-run/firewall.nft');
      for (const d of [etc, share, bin]) await mkdir(d, { recursive: true });
      await writeFile(
        path.join(bin, 'bootstate'),
        `#!/bin/sh\necho "$*" >> ${path.join(dir, 'loader-started')}\nexec ${process.execPath} ${AGENT} "$@" --config ${path.join(etc, 'bootstate.toml')}\n`,
        { mode: 0o755 },
      );
    });

    /** The packaged configuration and ruleset, no drop-in, no rules, no snapshot, nothing started yet. */
    async function packaged(ruleset = renderPackagedFirewall()) {
      await writeFile(path.join(etc, 'bootstate.toml'), renderDefaultConfig());
      await rm(path.join(etc, 'bootstate.toml.d'), { recursive: true, force: true });
      await writeFile(path.join(share, 'firewall.nft'), ruleset);
      await rm(path.join(dir, 'loader-run'), { recursive: true, force: true });
      await rm(path.join(dir, 'loader-started'), { force: true });
      await inNs(['nft', 'delete', 'table', 'inet', 'bootstate'], { allowFailure: true });
    }

    it('loads the packaged rules with nft alone, saves the snapshot, and the first re-check has bootstate verify them, quietly when they are the configured ones', async () => {
      await packaged();
      const loaded = await load();
      expect([loaded.exitCode, loaded.stderr]).toEqual([0, '']);
      expect(loaded.stdout).toMatch(/^firewall: applied the packaged rules \(nft -f /);
      expect(await started()).toBe(0);
      expect(await readFile(snapshot, 'utf8')).toBe((await inNs(['nft', 'list', 'table', 'inet', 'bootstate'])).stdout);
      expect((await stat(snapshot)).mode & 0o777).toBe(0o600);
      expect(unverified()).toBe(true);
      expect((await bootstate(['check'], path.join(etc, 'bootstate.toml'))).exitCode).toBe(0);
      expect(await reach(80, NOBODY)).toBe('timeout');
      expect(await reach(80, 0, 30_000)).toBe('wireserver:80');

      const verified = await recheck();
      expect([verified.exitCode, verified.stdout, verified.stderr]).toEqual([0, '', '']);
      expect(await started()).toBe(1);
      expect(unverified()).toBe(false);
      const quiet = await recheck();
      expect([quiet.exitCode, quiet.stdout, quiet.stderr]).toEqual([0, '', '']);
      expect(await started()).toBe(1);
    }, 240_000);

    it('fails closed on a packaged ruleset that is not what the configuration makes: the first re-check says so as an error and puts the configured rules in place', async () => {
      // A ruleset that lets everyone in, under the right hash: what a damaged or edited file would load.
      await packaged(renderPackagedFirewall().replace('meta skuid 0 accept', 'meta skuid 65534 accept'));
      expect((await load()).exitCode).toBe(0);
      expect(await started()).toBe(0);
      expect(await reach(80, NOBODY, 30_000)).toBe('wireserver:80');
      const verified = await recheck();
      expect(verified.exitCode, verified.stderr).toBe(0);
      expect(verified.stderr).toContain("<3>bootstate: the wireserver firewall's rules loaded at boot were not the configured ones; bootstate put the configured ones in place: firewall: applied (nft)");
      expect(unverified()).toBe(false);
      expect((await bootstate(['check'], path.join(etc, 'bootstate.toml'))).exitCode).toBe(0);
      expect(await reach(80, NOBODY)).toBe('timeout');
      expect(await readFile(snapshot, 'utf8')).toBe((await inNs(['nft', 'list', 'table', 'inet', 'bootstate'])).stdout);
    }, 240_000);

    it('a flush before the first re-check is the usual warning and re-apply, which verifies too', async () => {
      await packaged();
      expect((await load()).exitCode).toBe(0);
      await inNs(['nft', 'flush', 'ruleset']);
      const again = await recheck();
      expect(again.exitCode, again.stderr).toBe(0);
      expect(again.stderr).toContain("the wireserver firewall's rules changed since they were applied; applying them again");
      expect(unverified()).toBe(false);
      expect(await reach(80, NOBODY)).toBe('timeout');
    }, 240_000);

    const otherwise: Array<[string, () => Promise<string[]>, RegExp]> = [
      ['a drop-in in bootstate.toml.d', async () => (await mkdir(path.join(etc, 'bootstate.toml.d')), await writeFile(path.join(etc, 'bootstate.toml.d/50-x.toml'), '# nothing\n'), []), /^$/],
      ['a bootstate.toml.d that is not a directory', async () => (await writeFile(path.join(etc, 'bootstate.toml.d'), ''), []), /^$/],
      ['bootstate.toml changed by one byte', async () => (await writeFile(path.join(etc, 'bootstate.toml'), `${renderDefaultConfig()}\n`), []), /^$/],
      ['no bootstate.toml', async () => (await rm(path.join(etc, 'bootstate.toml')), []), /^$/],
      ['BOOTSTATE_CONFIG set', async () => ['BOOTSTATE_CONFIG=/nonexistent.toml'], /^$/],
      ['a ruleset nft rejects', async () => (await writeFile(path.join(share, 'firewall.nft'), renderPackagedFirewall().replace('chain output', 'chain output output')), []), /nft -f .* failed; bootstate applies the rules instead/],
    ];
    it.each(otherwise)('leaves the rules to bootstate, which reads the configuration, with %s', async (_what, arrange, stderr) => {
      await packaged();
      const extra = await arrange();
      const loaded = await load(extra);
      expect(loaded.exitCode, loaded.stderr).toBe(0);
      expect(loaded.stdout).toBe('firewall: applied (nft): only root reaches 168.63.129.16, TCP port 53 excepted\n');
      expect(loaded.stderr.split('\n').filter((l) => !l.includes('warning')).join('\n').trim()).toMatch(stderr);
      expect(await started()).toBe(1);
      expect(unverified()).toBe(false);
      expect(await readFile(snapshot, 'utf8')).toBe((await inNs(['nft', 'list', 'table', 'inet', 'bootstate'])).stdout);
      expect(await reach(80, NOBODY)).toBe('timeout');
    }, 240_000);

    afterAll(async () => {
      await inNs(['nft', 'delete', 'table', 'inet', 'bootstate'], { allowFailure: true });
    });
  });

  // Where nft is absent: the iptables of Debian's package, through both of its backends.
  describe.each(['nft', 'legacy'])('iptables-%s', (variant) => {
    const iptables: Runner = (argv, options) => inNs([argv[0]!.replace(/^iptables/, `iptables-${variant}`), ...argv.slice(1)], options);
    const securityRules = async () => (await iptables(['iptables', '-w', '-t', 'security', '-S'])).stdout;

    it('lets root in, keeps nobody out but for TCP 53, is idempotent, and remove leaves the rest of the table', async () => {
      await iptables(['iptables', '-w', '-t', 'security', '-A', 'OUTPUT', '-d', '192.0.2.1/32', '-j', 'ACCEPT']);
      expect((await checkFirewall(iptables, 'iptables', WIRESERVER)).missing).toEqual(['iptables chain BOOTSTATE does not exist in the security table']);
      expect(await applyFirewall(iptables, 'iptables', WIRESERVER)).toBe(true);
      expect(await applyFirewall(iptables, 'iptables', WIRESERVER)).toBe(false);
      expect((await checkFirewall(iptables, 'iptables', WIRESERVER)).missing).toEqual([]);
      const rules = await securityRules();
      expect(rules.split('\n').filter((l) => l.startsWith('-A BOOTSTATE '))).toEqual(iptablesChainRules().map((r) => `-A BOOTSTATE ${r.join(' ')}`));
      expect(rules.split('\n').filter((l) => l.endsWith('-j BOOTSTATE'))).toEqual(['-A OUTPUT -d 168.63.129.16/32 -p tcp -j BOOTSTATE']);

      expect(await reach(80, 0, 30_000)).toBe('wireserver:80');
      expect(await reach(80, NOBODY)).toBe('timeout');
      expect(await reach(53, NOBODY, 30_000)).toBe('wireserver:53');

      await iptables(['iptables', '-w', '-t', 'security', '-D', 'BOOTSTATE', '-m', 'owner', '--uid-owner', '0', '-j', 'ACCEPT']);
      expect((await checkFirewall(iptables, 'iptables', WIRESERVER)).missing).toEqual([
        'iptables rule missing: -t security -A BOOTSTATE -m owner --uid-owner 0 -j ACCEPT',
      ]);
      expect(await applyFirewall(iptables, 'iptables', WIRESERVER)).toBe(true);
      expect((await checkFirewall(iptables, 'iptables', WIRESERVER)).missing).toEqual([]);

      const removed = await removeFirewall(iptables);
      expect(removed.filter((line) => line.startsWith('iptables'))).toEqual([
        'iptables -t security rule: OUTPUT -d 168.63.129.16/32 -p tcp -j BOOTSTATE',
        'iptables -t security chain BOOTSTATE',
      ]);
      expect(await securityRules()).not.toContain('BOOTSTATE');
      expect(await securityRules()).toContain('-A OUTPUT -d 192.0.2.1/32 -j ACCEPT');
      expect(await reach(80, NOBODY, 30_000)).toBe('wireserver:80');
      await iptables(['iptables', '-w', '-t', 'security', '-D', 'OUTPUT', '-d', '192.0.2.1/32', '-j', 'ACCEPT']);
    }, 240_000);
  });
});
