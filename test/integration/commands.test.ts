/**
 * The built CLI's other subcommands, as an image builder or a support engineer runs them: report, clean, kvp,
 * graph and trace; and the image builder's checks, config check and doctor.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeReport } from '../../src/azure/report.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { AGENT, cli, markers, runAgent, writeConfig } from './agent.js';
import { diff, prepareImage, REMOVED, REMOVED_WITH_USER, snapshot, under } from '../deprovision/image.js';

let fabric: FakeFabric;
beforeAll(async () => {
  fabric = await startFakeFabric();
});
afterAll(async () => {
  await fabric.close();
});


function root(): { dir: string; config: string } {
  const dir = mkdtempSync(join(tmpdir(), 'bootstate-cmd-'));
  return { dir, config: writeConfig(fabric, dir, {}) };
}

describe('bootstate report', () => {
  it('reports Ready on its own and exits 0', async () => {
    fabric.reports.length = 0;
    const { config } = root();
    const run = await cli(['report', 'ready', '--config', config, '--vm-id', 'd0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8']);
    expect(run.code).toBe(0);
    expect(fabric.reports).toEqual([{ state: 'Ready' }]);
  });

  it('reports a failure with the given reason in the encoded description, retrying a 503', async () => {
    fabric.reports.length = 0;
    fabric.setWireserver({ status: 503 }, 'ok');
    const { config } = root();
    const run = await cli(['report', 'failure', '--reason', 'image check failed', '--config', config, '--vm-id', 'd0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8']);
    fabric.setWireserver();
    expect(run.code).toBe(0);
    expect(fabric.reports).toHaveLength(2);
    const last = fabric.reports.at(-1) as { state: string; details: { subStatus: string; description: string } };
    expect(last.details.subStatus).toBe('ProvisioningFailed');
    const fields = new Map(decodeReport(last.details.description));
    expect(fields.get('reason')).toBe('image check failed');
    expect(fields.get('vm_id')).toBe('d0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8');
  });

  it('refuses a failure report without a reason, as a usage error', async () => {
    const { config } = root();
    expect((await cli(['report', 'failure', '--config', config])).code).toBe(2);
  });
});

describe('bootstate config check and doctor, as an image builder runs them', () => {
  it("config check prints azure-init's documented example merged with origins and exits 0, and exits 78 on a typo", async () => {
    const example = join(import.meta.dirname, '../config/azure-init/complete.toml');
    const ok = await cli(['config', 'check', '--config', example]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain(`connection_timeout_secs = 30  # ${example}`);
    const typo = join(mkdtempSync(join(tmpdir(), 'bootstate-cmd-')), 'typo.toml');
    writeFileSync(typo, '[ssh]\nquery_sshd_confg = true\n');
    const bad = await cli(['config', 'check', '--config', typo]);
    expect(bad.code).toBe(78);
    expect(bad.stderr).toContain(`${typo}: [ssh] query_sshd_confg: unknown key, ignored`);
  });

  it('doctor --root exits 1 on an image where WALinuxAgent would provision too, naming the fix', async () => {
    const image = mkdtempSync(join(tmpdir(), 'bootstate-image-'));
    mkdirSync(join(image, 'etc/ssh'), { recursive: true });
    writeFileSync(join(image, 'etc/ssh/sshd_config'), 'Include /etc/ssh/sshd_config.d/*.conf\n');
    writeFileSync(join(image, 'etc/waagent.conf'), 'Provisioning.Agent=auto\n');
    const result = await cli(['doctor', '--root', image]);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('BREAKS FIRST BOOT [waagent-provisioning]');
    expect(result.stdout).toContain('fix: set Provisioning.Agent=disabled');
  });

  it('doctor exits 2 on a --root that does not exist, and 1 (not blocked) on an image whose configuration is a FIFO', async () => {
    const image = mkdtempSync(join(tmpdir(), 'bootstate-image-'));
    const missing = await cli(['doctor', '--root', join(image, 'missing')]);
    expect([missing.code, missing.stdout]).toEqual([2, '']);
    expect(missing.stderr).toBe(`bootstate doctor: --root ${join(image, 'missing')}: no such directory (see 'bootstate doctor --help')\n`);
    mkdirSync(join(image, 'etc/bootstate'), { recursive: true });
    execFileSync('mkfifo', [join(image, 'etc/bootstate/bootstate.toml')]);
    const fifo = await cli(['doctor', '--root', image]);
    expect(fifo.code).toBe(1);
    expect(fifo.stdout).toContain(`BREAKS FIRST BOOT [config-unreadable]: ${image}/etc/bootstate/bootstate.toml: not a regular file (fifo)`);
  });
});

describe('bootstate deprovision --root, as an image builder runs it before capture', () => {
  it('without --force (stdin is not a terminal) exits 2 and changes nothing; with --force removes every listed path; doctor warns before, not after', async () => {
    const image = mkdtempSync(join(tmpdir(), 'bootstate-image-'));
    const outside = mkdtempSync(join(tmpdir(), 'bootstate-host-'));
    prepareImage(image, outside);
    const before = snapshot(image);
    const warned = await cli(['doctor', '--root', image]);
    expect(warned.code).toBe(0);
    for (const id of ['ssh-host-keys', 'machine-id', 'leftover-admin-user']) expect(warned.stdout).toContain(`warning [${id}]`);

    const refused = await cli(['deprovision', '--root', image]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('stdin is not a terminal');
    expect(diff(before, snapshot(image))).toEqual({ removed: [], added: [], changed: [] });

    const args = ['deprovision', '--root', image, '--force', ...(process.getuid?.() === 0 ? ['--user'] : [])];
    const done = await cli(args);
    expect(done.code, done.stderr).toBe(0);
    const changes = diff(before, snapshot(image));
    const promised = process.getuid?.() === 0 ? [...REMOVED, ...REMOVED_WITH_USER] : REMOVED;
    expect(changes.removed).toEqual(under(promised, before));
    // Each path is named once: what lies in a removed home goes with it.
    const named = promised.filter((p) => !REMOVED_WITH_USER.some((home) => p !== home && p.startsWith(`${home}/`)) || process.getuid?.() !== 0);
    for (const p of named) expect(done.stdout).toContain(`removed ${join(image, p)}\n`);
    expect(readFileSync(join(image, 'etc/machine-id'), 'utf8')).toBe('uninitialized\n');

    const after = await cli(['doctor', '--root', image]);
    for (const id of ['ssh-host-keys', 'machine-id']) expect(after.stdout).not.toContain(`[${id}]`);
    if (process.getuid?.() === 0) expect(after.stdout).toMatch(new RegExp(`^bootstate doctor: ${image}: no findings\n[^\n]+ rendered for networkd: [^\n]+\n$`));
  });
});

describe('bootstate deprovision on a terminal', () => {
  // script(1) (util-linux; Debian's bsdutils is essential) gives the CLI a real pseudo-terminal as stdin.
  it('asks [y/N]: "n" changes nothing (exit 1), "y" removes what it listed (exit 0)', async () => {
    const image = mkdtempSync(join(tmpdir(), 'bootstate-image-'));
    mkdirSync(join(image, 'etc/ssh'), { recursive: true });
    writeFileSync(join(image, 'etc/ssh/ssh_host_ed25519_key'), 'key\n');
    const answered = async (answer: string) => {
      const child = execFile('script', ['-qec', `'${process.execPath}' '${AGENT}' deprovision --root '${image}'`, '/dev/null'], { timeout: 30_000 });
      child.stdin!.end(`${answer}\n`);
      let stdout = '';
      child.stdout!.on('data', (chunk) => (stdout += chunk));
      const code = await new Promise<number>((resolve) => child.on('close', (c) => resolve(c ?? -1)));
      return { code, stdout };
    };
    const no = await answered('n');
    expect(no.stdout).toContain(`[y/N]`);
    expect([no.code, existsSync(join(image, 'etc/ssh/ssh_host_ed25519_key'))]).toEqual([1, true]);
    expect(no.stdout).toContain('not confirmed; nothing was changed');
    const yes = await answered('y');
    expect(yes.stdout).toContain(`removed ${join(image, 'etc/ssh/ssh_host_ed25519_key')}`);
    expect([yes.code, existsSync(join(image, 'etc/ssh/ssh_host_ed25519_key'))]).toEqual([0, false]);
  });
});

describe('bootstate clean, kvp, graph and trace after a provisioning run', () => {
  it('reads the pool, draws the chart and the run, and re-arms the image', async () => {
    const run = await runAgent(fabric);
    expect(run.code).toBe(0);
    const config = join(run.root, 'bootstate.toml');
    const pool = join(run.root, 'var/lib/hyperv/.kvp_pool_1');

    const report = await cli(['kvp', 'read', 'PROVISIONING_REPORT', '--file', pool]);
    expect(report.code).toBe(0);
    expect(report.stdout).toMatch(/^PROVISIONING_REPORT=result=success\|agent=bootstate\//);

    const written = await cli(['kvp', 'write', 'support-note', 'checked by hand', '--file', pool]);
    expect(written.code).toBe(0);
    const entries = JSON.parse((await cli(['kvp', 'entries', '--json', '--file', pool])).stdout);
    expect(JSON.stringify(entries)).toContain('checked by hand');

    const mermaid = await cli(['graph', '--format', 'mermaid']);
    expect(mermaid.code).toBe(0);
    expect(mermaid.stdout).toContain('stateDiagram-v2');
    expect(mermaid.stdout).toContain('reportingReady');

    const html = join(run.root, 'run.html');
    const trace = await cli(['trace', '-o', html, '--config', config]);
    expect(trace.code).toBe(0);
    expect(readFileSync(html, 'utf8')).toContain('data-outcome="ok"');

    expect(markers(run.root)).toHaveLength(1);
    const runs = join(run.root, 'var/lib/bootstate/runs');
    const journals = readdirSync(runs).filter((name) => name.endsWith('.jsonl'));
    expect(journals).toHaveLength(1);
    const records = JSON.parse((await cli(['kvp', 'info', '--json', '--file', pool])).stdout).records as number;
    expect(records).toBeGreaterThan(1);
    const clean = await cli(['clean', '--logs', '--config', config]);
    expect(clean.code).toBe(0);
    expect(markers(run.root)).toEqual([]);
    expect(existsSync(join(run.root, 'var/log/bootstate.log'))).toBe(false);
    expect(readdirSync(runs)).toEqual([]);
    expect(statSync(pool).size).toBe(0);
    const said = clean.stdout.split('\n').filter(Boolean);
    expect(said).toContain(`removed ${join(run.root, 'var/log/bootstate.log')}`);
    expect(said).toContain(`removed ${join(runs, journals[0]!)}`);
    expect(said).toContain(`emptied ${pool} (${records} KVP records)`);
    expect(said.filter((line) => line.includes('.provisioned'))).toHaveLength(1);
    expect((await cli(['clean', '--logs', '--config', config])).stdout).toBe('nothing to remove\n');
  });
});
