/**
 * `bootstate provision --dry-run DIR` as root on a simulated VM (the e2e sandbox and a namespace where the fake
 * fabric owns the real link-local addresses, no endpoint overrides): it reads the metadata and changes nothing
 * outside DIR — the VM's tree is byte for byte, mode for mode the same afterwards — and the fabric receives no
 * POST. What it would have done is printed: states, the exact commands, shell-quoted, the reports and the files.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVm, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox, runInSandbox } from './ns.js';

const DIR = '/run/bootstate-dry-run';
/** What the harness itself writes into the sandbox; everything else must be untouched by a dry run. */
const HARNESS = new Set(['fabric-requests.jsonl', 'argv.log', 'e2e-bin', 'run/.e2e-uts-hostname', DIR.slice(1)]);

/** Every entry under `root` (but the harness's own files): type, mode, owner, and content hash or link target. */
async function tree(root: string, dir = root): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const name of (await readdir(dir)).sort()) {
    const full = path.join(dir, name);
    const rel = path.relative(root, full);
    if (HARNESS.has(rel)) continue;
    const st = await lstat(full);
    const owner = `${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid}`;
    if (st.isDirectory()) {
      out.set(`${rel}/`, owner);
      for (const [k, v] of await tree(root, full)) out.set(k, v);
    } else if (st.isSymbolicLink()) out.set(rel, `-> ${await readlink(full)}`);
    else out.set(rel, `${owner} ${createHash('sha256').update(await readFile(full)).digest('hex')}`);
  }
  return out;
}

let vm: Vm;
let before: Map<string, string>;
let after: Map<string, string>;
let boot: BootResult;

beforeAll(async () => {
  if (!canSandbox) return;
  vm = await createVm(`bs-dry-${process.pid}`, { productUuid: 'D0DF4C54-4ECB-4A4B-9954-5BDF3ED5C3B8', generation: 2 });
  // Entering the sandbox mounts over its /run, where libmount keeps its own state: enter once before the snapshot.
  await runInSandbox(vm.sandbox, ['true']);
  before = await tree(vm.sandbox.root);
  boot = await vm.boot(['provision', '--dry-run', DIR]);
  after = await tree(vm.sandbox.root);
}, 180_000);

afterAll(async () => {
  await vm?.shutdown();
  await vm?.sandbox.cleanup();
});

describe('provision --dry-run DIR as root', () => {
  it('runs where namespaces are available (root on Linux)', () => {
    assertNamespaces();
    expect(boot.exitCode, boot.stderr).toBe(0);
  });

  it('changes nothing outside DIR: same files, contents, modes and owners; same kernel hostname', () => {
    expect(after).toEqual(before);
    expect(boot.utsHostname).toBe('sandbox');
  });

  it('reads the metadata and tells the fabric nothing', async () => {
    const requests = await vm.requests();
    expect(requests.some((r) => r.route === 'imds')).toBe(true);
    expect(requests.filter((r) => r.method !== 'GET')).toEqual([]);
  });

  it('runs none of the commands that change the system', async () => {
    const changing = ['useradd', 'usermod', 'groupadd', 'passwd', 'chpasswd', 'hostname', 'hostnamectl', 'visudo', 'systemctl', 'sshd'];
    expect((await vm.commands()).filter(([command]) => changing.includes(command!))).toEqual([]);
  });

  it('keeps the markers, lock, journal, log and KVP pool under DIR', async () => {
    const at = (p: string) => vm.sandbox.hostPath(path.join(DIR, p));
    expect(existsSync(at('var/lib/bootstate/d0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8.provisioned'))).toBe(true);
    expect((await readdir(at('var/lib/bootstate/runs'))).filter((n) => n.endsWith('.jsonl'))).toHaveLength(1);
    expect(await readFile(at('var/log/bootstate.log'), 'utf8')).toContain('provisioning finished');
    expect((await readFile(at('var/lib/hyperv/.kvp_pool_1'))).includes('PROVISIONING_REPORT')).toBe(true);
    expect(await readFile(at('etc/hostname'), 'utf8')).not.toBe('sandbox\n');
  });

  it('prints the states, the reports it did not send, the exact commands shell-quoted, and the files', () => {
    const out = boot.stdout;
    expect(out).toMatch(/ms {2}provisioning\.\S+/);
    expect(out).toContain('would report NotReady/Provisioning to http://168.63.129.16/provisioning/health (not sent: dry run)');
    expect(out).toContain('would report Ready to http://168.63.129.16/provisioning/health');
    const commands = out.slice(out.indexOf('commands the real backend would run:'), out.indexOf('files written under'));
    expect(commands).toMatch(/^ {2}hostnamectl set-hostname \S+$/m);
    expect(commands).toMatch(/^ {2}useradd .*azureuser$/m);
    expect(commands).toMatch(/^ {2}sshd -G -f \/etc\/ssh\/sshd_config -C user=azureuser,/m);
    expect(commands).toMatch(/^ {2}passwd -l azureuser$/m);
    expect(out).toMatch(/^ {2}0600 {2}var\/lib\/bootstate\/d0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8\.provisioned$/m);
    expect(out).toMatch(/^ {2}0600 {2}home\/azureuser\/\.ssh\/authorized_keys$/m);
  });
});
