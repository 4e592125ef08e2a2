/**
 * `bootstate doctor --root DIR` on prepared image trees: a clean image has no finding and exits 0; each
 * coexistence problem is one finding that says what to change, and those that would break a first boot exit 1.
 */
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { datasourceList, includesDir } from '../../src/doctor/findings.js';
import { runDoctor } from '../../src/doctor/run.js';

let root: string;

async function put(p: string, text = ''): Promise<void> {
  await mkdir(path.dirname(path.join(root, p)), { recursive: true });
  await writeFile(path.join(root, p), text);
}

/** An image on which bootstate is the only provisioning agent and everything it relies on is present. */
async function cleanImage(): Promise<void> {
  await put('etc/ssh/sshd_config', 'Include /etc/ssh/sshd_config.d/*.conf\nKbdInteractiveAuthentication no\n');
  await put('usr/sbin/hv_kvp_daemon');
}

async function doctor(): Promise<{ code: number; out: string; ids: string[] }> {
  let out = '';
  const code = await runDoctor({ root }, { stdout: (s) => (out += s), stderr: (s) => (out += s) });
  return { code, out, ids: [...out.matchAll(/\[([a-z-]+)\]:/g)].map((m) => m[1]!) };
}

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'bootstate-doctor-'));
  await cleanImage();
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('bootstate doctor --root', () => {
  it('finds nothing on a clean image and exits 0', async () => {
    expect(await doctor()).toEqual({ code: 0, out: `bootstate doctor: ${root}: no findings\n`, ids: [] });
  });

  it('breaks: cloud-init installed and enabled with its default datasource list (which includes Azure)', async () => {
    await put('etc/cloud/cloud.cfg', 'users:\n  - default\n');
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([1, ['cloud-init-azure']]);
    expect(result.out).toContain('fix: touch /etc/cloud/cloud-init.disabled');
  });

  it('breaks: cloud-init with Azure in a drop-in datasource_list; not when disabled or when a later drop-in says None', async () => {
    await put('etc/cloud/cloud.cfg', 'datasource_list: [ NoCloud ]\n');
    await put('etc/cloud/cloud.cfg.d/90_dpkg.cfg', 'datasource_list: [ Azure ]\n');
    expect((await doctor()).ids).toEqual(['cloud-init-azure']);
    await put('etc/cloud/cloud.cfg.d/99-bootstate.cfg', 'datasource_list: [ None ]\n');
    expect((await doctor()).ids).toEqual([]);
    await put('etc/cloud/cloud.cfg.d/99-bootstate.cfg', 'datasource_list:\n  - Azure\n');
    expect((await doctor()).ids).toEqual(['cloud-init-azure']);
    await put('etc/cloud/cloud-init.disabled');
    expect((await doctor()).code).toBe(0);
  });

  it('breaks: WALinuxAgent with provisioning on; not with Provisioning.Agent=disabled or the older Provisioning.Enabled=n', async () => {
    await put('etc/waagent.conf', 'Provisioning.Agent=auto\nLogs.Verbose=n\n');
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([1, ['waagent-provisioning']]);
    expect(result.out).toContain('Provisioning.Agent=disabled');
    await put('etc/waagent.conf', 'Provisioning.Agent=disabled\n');
    expect((await doctor()).ids).toEqual([]);
    await put('etc/waagent.conf', 'Provisioning.Enabled=n\n');
    expect((await doctor()).ids).toEqual([]);
    await put('etc/waagent.conf', 'Provisioning.Enabled=y\n');
    expect((await doctor()).ids).toEqual(['waagent-provisioning']);
  });

  it("breaks: azure-init's unit enabled", async () => {
    await mkdir(path.join(root, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
    await symlink('/usr/lib/systemd/system/azure-init.service', path.join(root, 'etc/systemd/system/multi-user.target.wants/azure-init.service'));
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([1, ['azure-init-enabled']]);
    expect(result.out).toContain('systemctl disable azure-init.service');
  });

  it('breaks: an sshd_config that never includes the drop-in directory', async () => {
    await put('etc/ssh/sshd_config', '# Include /etc/ssh/sshd_config.d/*.conf\nPasswordAuthentication yes\n');
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([1, ['sshd-no-include']]);
    expect(result.out).toContain('add "Include /etc/ssh/sshd_config.d/*.conf"');
  });

  it('warns only: no KVP daemon', async () => {
    await rm(path.join(root, 'usr/sbin/hv_kvp_daemon'));
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([0, ['no-kvp-daemon']]);
    expect(result.out).toMatch(/^warning \[no-kvp-daemon\]/);
  });

  it("reads the image's own bootstate configuration: a broken one breaks, an unknown key warns", async () => {
    await put('etc/bootstate/bootstate.toml', '[ssh]\nquery_sshd_config = "yes"\n');
    expect(await doctor()).toMatchObject({ code: 1, ids: ['config-invalid'] });
    await put('etc/bootstate/bootstate.toml', '[ssh]\nsshd_config_dir = "/etc/ssh/custom.d"\ntypo = 1\n');
    const result = await doctor();
    expect(result.ids).toEqual(['sshd-no-include', 'config-unknown-key']);
  });

  it('lists breaking findings before warnings', async () => {
    await rm(path.join(root, 'usr/sbin/hv_kvp_daemon'));
    await put('etc/waagent.conf', '');
    expect((await doctor()).ids).toEqual(['waagent-provisioning', 'no-kvp-daemon']);
  });
});

describe('parsers behind the checks', () => {
  it('datasourceList reads flow and block lists, the last one winning, and null when unset', () => {
    expect(datasourceList('datasource_list: [ Azure, None ]  # comment\n')).toBe('[ Azure, None ]');
    expect(datasourceList('datasource_list:\n  - NoCloud\n  - Azure\nother: 1\n')).toBe('[ NoCloud, Azure ]');
    expect(datasourceList('datasource_list: [Azure]\ndatasource_list: [None]\n')).toBe('[None]');
    expect(datasourceList('datasource:\n  Azure:\n    apply_network_config: true\n')).toBeNull();
  });

  it('includesDir accepts absolute and relative Include patterns in the directory, not elsewhere', () => {
    expect(includesDir('Include /etc/ssh/sshd_config.d/*.conf\n', '/etc/ssh/sshd_config.d')).toBe(true);
    expect(includesDir('include sshd_config.d/*.conf\n', '/etc/ssh/sshd_config.d/')).toBe(true);
    expect(includesDir('Include /etc/ssh/other.d/*.conf\n', '/etc/ssh/sshd_config.d')).toBe(false);
    expect(includesDir('#Include /etc/ssh/sshd_config.d/*.conf\n', '/etc/ssh/sshd_config.d')).toBe(false);
  });
});
