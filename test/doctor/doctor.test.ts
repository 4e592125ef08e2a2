/**
 * `bootstate doctor --root DIR` on prepared image trees: a clean image has no finding and exits 0; each
 * coexistence problem is one finding that says what to change, and those that would break a first boot exit 1.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli.js';
import { UsageError } from '../../src/cli/argv.js';
import { datasourceList, includesDir } from '../../src/doctor/findings.js';
import { waagentSetting } from '../../src/doctor/waagent.js';
import { runDoctor } from '../../src/commands/doctor.js';

let root: string;

async function put(p: string, text = ''): Promise<void> {
  await mkdir(path.dirname(path.join(root, p)), { recursive: true });
  await writeFile(path.join(root, p), text);
}

/** An image on which bootstate is the only provisioning agent and everything it relies on is present. */
async function cleanImage(): Promise<void> {
  await put('etc/ssh/sshd_config', 'Include /etc/ssh/sshd_config.d/*.conf\nKbdInteractiveAuthentication no\n');
  await put('usr/sbin/hv_kvp_daemon');
  await link('etc/systemd/system/multi-user.target.wants/systemd-networkd.service', '/lib/systemd/system/systemd-networkd.service');
}

const STACK_LINE = () =>
  `bootstate doctor: ${root}: the network from IMDS is rendered for networkd: systemd-networkd.service is enabled (/etc/systemd/system/multi-user.target.wants/systemd-networkd.service)\n`;

async function link(p: string, target: string): Promise<void> {
  await mkdir(path.dirname(path.join(root, p)), { recursive: true });
  await symlink(target, path.join(root, p));
}

async function fifo(p: string): Promise<void> {
  await mkdir(path.dirname(path.join(root, p)), { recursive: true });
  execFileSync('mkfifo', [path.join(root, p)]);
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
    expect(await doctor()).toEqual({ code: 0, out: `bootstate doctor: ${root}: no findings\n${STACK_LINE()}`, ids: [] });
  });

  it('warns when the image has no network stack to render IMDS\'s NICs for, and says nothing of it with [network] enable = false', async () => {
    await rm(path.join(root, 'etc/systemd/system'), { recursive: true });
    const found = await doctor();
    expect(found.code).toBe(0);
    expect(found.ids).toEqual(['network-stack']);
    expect(found.out).toContain('primary NIC\'s DHCP address only');
    await put('etc/bootstate/bootstate.toml', '[network]\nenable = false\n');
    expect(await doctor()).toEqual({ code: 0, out: `bootstate doctor: ${root}: no findings\n`, ids: [] });
  });

  it('names the stack ifupdown, and an interface the image configures statically as left to the image', async () => {
    await rm(path.join(root, 'etc/systemd/system'), { recursive: true });
    await put('sbin/ifup');
    await put('etc/network/interfaces', 'auto lo\niface lo inet loopback\nallow-hotplug eth0\niface eth0 inet dhcp\nauto eth1\niface eth1 inet static\n    address 192.0.2.9/24\n');
    const found = await doctor();
    expect(found.code).toBe(0);
    expect(found.out).toMatch(/rendered for ifupdown/);
    expect(found.ids).toEqual(['network-image-config']);
    expect(found.out).toContain('eth1 is configured by the image in /etc/network/interfaces');
  });

  it('breaks: cloud-init installed and enabled with its default datasource list (which includes Azure)', async () => {
    await put('etc/cloud/cloud.cfg', 'users:\n  - default\n');
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([1, ['cloud-init-azure', 'resource-disk-other-agent']]);
    expect(result.out).toContain('fix: touch /etc/cloud/cloud-init.disabled');
  });

  it('breaks: cloud-init with Azure in a drop-in datasource_list; not when disabled or when a later drop-in says None', async () => {
    await put('etc/cloud/cloud.cfg', 'datasource_list: [ NoCloud ]\n');
    await put('etc/cloud/cloud.cfg.d/90_dpkg.cfg', 'datasource_list: [ Azure ]\n');
    expect((await doctor()).ids).toEqual(['cloud-init-azure', 'resource-disk-other-agent']);
    await put('etc/cloud/cloud.cfg.d/99-bootstate.cfg', 'datasource_list: [ None ]\n');
    expect((await doctor()).ids).toEqual([]);
    await put('etc/cloud/cloud.cfg.d/99-bootstate.cfg', 'datasource_list:\n  - Azure\n');
    expect((await doctor()).ids).toEqual(['cloud-init-azure', 'resource-disk-other-agent']);
    await put('etc/cloud/cloud-init.disabled');
    expect((await doctor()).code).toBe(0);
  });

  it('breaks: WALinuxAgent with provisioning on; not with Provisioning.Agent=disabled, and not with the ignored Provisioning.Enabled=n alone', async () => {
    await put('etc/waagent.conf', 'Provisioning.Agent=auto\nLogs.Verbose=n\n');
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([1, ['waagent-provisioning']]);
    expect(result.out).toContain('fix: set Provisioning.Agent=disabled in /etc/waagent.conf');
    await put('etc/waagent.conf', 'Provisioning.Agent=disabled\n');
    expect((await doctor()).ids).toEqual([]);
    // Ignored since WALinuxAgent 2.2.45: Provisioning.Agent stays auto, which provisions.
    await put('etc/waagent.conf', 'Provisioning.Enabled=n\n');
    const legacy = await doctor();
    expect([legacy.code, legacy.ids]).toEqual([1, ['waagent-provisioning']]);
    expect(legacy.out).toContain('Provisioning.Agent=auto (the default); Provisioning.Enabled=n has no effect since WALinuxAgent 2.2.45');
    await put('etc/waagent.conf', 'Provisioning.Enabled=n\nProvisioning.Agent=disabled\n');
    expect((await doctor()).ids).toEqual([]);
  });

  it('reads waagent.conf as WALinuxAgent does: the last line wins, # starts a comment, quotes and blanks go, None is unset', async () => {
    const ids = async (conf: string) => {
      await put('etc/waagent.conf', conf);
      return (await doctor()).ids;
    };
    expect(await ids('Provisioning.Agent=disabled\nProvisioning.Agent=auto\n')).toEqual(['waagent-provisioning']);
    expect(await ids('Provisioning.Agent=auto\nProvisioning.Agent=disabled\n')).toEqual([]);
    expect(await ids('#Provisioning.Agent=auto\n Provisioning.Agent = "disabled" # bootstate provisions\r\n')).toEqual([]);
    expect(await ids('Provisioning.Agent=disabled\n# Provisioning.Agent=auto\n')).toEqual([]);
    expect(await ids('Provisioning.Agent=None\n')).toEqual(['waagent-provisioning']);
    expect(waagentSetting('A=1\n#A=2\nA = "3" # x\n', 'A')).toBe('3');
    expect(waagentSetting('AB=1\n', 'A')).toBeNull();
  });

  it('breaks with Provisioning.Agent=cloud-init or waagent; warns on a value WALinuxAgent does not document', async () => {
    await put('etc/waagent.conf', 'Provisioning.Agent=cloud-init\n');
    const cloudInit = await doctor();
    expect([cloudInit.code, cloudInit.ids]).toEqual([1, ['waagent-provisioning']]);
    expect(cloudInit.out).toContain('wait for cloud-init to provision this VM and report Ready for it');
    await put('etc/waagent.conf', 'Provisioning.Agent=waagent\n');
    expect((await doctor()).code).toBe(1);
    await put('etc/waagent.conf', 'Provisioning.Agent=Disabled\n');
    const odd = await doctor();
    expect([odd.code, odd.ids]).toEqual([0, ['waagent-provisioning']]);
    expect(odd.out).toMatch(/^warning \[waagent-provisioning\]: Provisioning.Agent=Disabled/m);
  });

  describe('WALinuxAgent\'s unit, as systemd would load it with its drop-ins', () => {
    const SHIPPED = readFileSync(path.join(import.meta.dirname, '../../packaging/systemd/waagent-gate.conf'), 'utf8');
    const UNIT = '[Unit]\nDescription=Azure Linux Agent\nAfter=network-online.target\n\n[Service]\nExecStart=/usr/sbin/waagent -daemon\nRestart=always\n';
    beforeEach(async () => {
      await put('etc/waagent.conf', 'Provisioning.Agent=disabled\n');
      await link('etc/systemd/system/multi-user.target.wants/bootstate.service', '/usr/lib/systemd/system/bootstate.service');
    });

    it('warns when WALinuxAgent is gated but bootstate.service is not enabled: it would never start', async () => {
      await put('usr/lib/systemd/system/walinuxagent.service', UNIT);
      await put('usr/lib/systemd/system/walinuxagent.service.d/50-bootstate.conf', SHIPPED);
      await rm(path.join(root, 'etc/systemd/system/multi-user.target.wants/bootstate.service'));
      const result = await doctor();
      expect([result.code, result.ids]).toEqual([0, ['waagent-gated-bootstate-off']]);
      expect(result.out).toContain('bootstate.service is not enabled, while walinuxagent.service waits for bootstate gate');
      expect(result.out).toContain('fix: systemctl enable bootstate.service');
    });

    for (const unit of ['walinuxagent.service', 'waagent.service']) {
      it(`breaks: ${unit} installed without the package's drop-in; not with it`, async () => {
        await put(`usr/lib/systemd/system/${unit}`, UNIT);
        const result = await doctor();
        expect([result.code, result.ids]).toEqual([1, ['waagent-not-gated']]);
        expect(result.out).toContain(`${unit} would start without waiting for bootstate: no /usr/lib/systemd/system/${unit}.d/50-bootstate.conf`);
        expect(result.out).toContain(`fix: reinstall bootstate: it ships /usr/lib/systemd/system/${unit}.d/50-bootstate.conf`);
        await put(`usr/lib/systemd/system/${unit}.d/50-bootstate.conf`, SHIPPED);
        expect(await doctor()).toMatchObject({ code: 0, ids: [] });
      });
    }

    it('breaks when the drop-in is masked or replaced from /etc, or a later drop-in resets ExecCondition=', async () => {
      await put('lib/systemd/system/walinuxagent.service', UNIT);
      await put('usr/lib/systemd/system/walinuxagent.service.d/50-bootstate.conf', SHIPPED);
      expect((await doctor()).ids).toEqual([]);

      await link('etc/systemd/system/walinuxagent.service.d/50-bootstate.conf', '/dev/null');
      let result = await doctor();
      expect(result.ids).toEqual(['waagent-not-gated']);
      expect(result.out).toContain('/etc/systemd/system/walinuxagent.service.d/50-bootstate.conf masks /usr/lib/systemd/system/walinuxagent.service.d/50-bootstate.conf');
      expect(result.out).toContain('fix: remove /etc/systemd/system/walinuxagent.service.d/50-bootstate.conf');
      await rm(path.join(root, 'etc/systemd/system/walinuxagent.service.d/50-bootstate.conf'));

      await put('etc/systemd/system/walinuxagent.service.d/50-bootstate.conf', '[Unit]\nAfter=bootstate.service\n');
      expect((await doctor()).out).toContain('/etc/systemd/system/walinuxagent.service.d/50-bootstate.conf replaces');
      await rm(path.join(root, 'etc/systemd/system/walinuxagent.service.d/50-bootstate.conf'));

      await put('etc/systemd/system/walinuxagent.service.d/60-local.conf', '[Service]\nExecCondition=\nExecCondition=/bin/true\n');
      result = await doctor();
      expect(result.ids).toEqual(['waagent-not-gated']);
      expect(result.out).toContain('/etc/systemd/system/walinuxagent.service.d/60-local.conf resets its ExecCondition=');
      // Reset before ours, it takes nothing away.
      await rm(path.join(root, 'etc/systemd/system/walinuxagent.service.d/60-local.conf'));
      await put('etc/systemd/system/walinuxagent.service.d/10-local.conf', '[Service]\nExecCondition=\n');
      expect((await doctor()).ids).toEqual([]);
    });

    it('finds nothing for a masked WALinuxAgent unit, and reads a full copy of the unit in /etc with the drop-in still applied', async () => {
      await put('usr/lib/systemd/system/waagent.service', UNIT);
      await link('etc/systemd/system/waagent.service', '/dev/null');
      expect((await doctor()).ids).toEqual([]);
      await rm(path.join(root, 'etc/systemd/system/waagent.service'));
      await put('etc/systemd/system/waagent.service', UNIT);
      await put('usr/lib/systemd/system/waagent.service.d/50-bootstate.conf', SHIPPED);
      expect((await doctor()).ids).toEqual([]);
    });
  });

  it('warns: another agent also formats the temporary disk (WALinuxAgent ResourceDisk.Format=y, cloud-init on Azure, azure-ephemeral-disk-setup); not when [resource_disk] is off', async () => {
    await put('etc/waagent.conf', 'Provisioning.Agent=disabled\nResourceDisk.Format=y\nResourceDisk.EnableSwap=y\n');
    let result = await doctor();
    expect([result.code, result.ids]).toEqual([0, ['resource-disk-other-agent']]);
    expect(result.out).toContain('WALinuxAgent (ResourceDisk.Format=y in /etc/waagent.conf)');
    expect(result.out).toContain('fix: let one of them do it: set ResourceDisk.Format=n');
    await put('etc/waagent.conf', 'Provisioning.Agent=disabled\nResourceDisk.Format=n\n');
    expect((await doctor()).ids).toEqual([]);
    await link('etc/systemd/system/multi-user.target.wants/azure-ephemeral-disk-setup.service', '/usr/lib/systemd/system/azure-ephemeral-disk-setup.service');
    result = await doctor();
    expect(result.ids).toEqual(['resource-disk-other-agent']);
    expect(result.out).toContain("azure-vm-utils' azure-ephemeral-disk-setup.service");
    expect(result.out).toContain('bootstate resource-disk itself touches no disk');
    await put('etc/bootstate/bootstate.toml', '[resource_disk]\nenable = false\n');
    expect((await doctor()).ids).toEqual([]);
    await put('etc/bootstate/bootstate.toml', '[steps]\nskip = ["resource-disk"]\n');
    expect((await doctor()).ids).toEqual([]);
  });

  it('warns: local_nvme = "raid0" without mdadm in the image; not with mdadm, with another local_nvme, or with [resource_disk] off', async () => {
    await put('etc/bootstate/bootstate.toml', '[resource_disk]\nlocal_nvme = "raid0"\n');
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([0, ['local-nvme-array-without-mdadm']]);
    expect(result.out).toContain('fix: install mdadm');
    await put('usr/sbin/mdadm', '#!/bin/sh\n');
    expect((await doctor()).ids).toEqual([]);
    await rm(path.join(root, 'usr/sbin/mdadm'));
    await put('etc/bootstate/bootstate.toml', '[resource_disk]\nlocal_nvme = "each"\n');
    expect((await doctor()).ids).toEqual([]);
    await put('etc/bootstate/bootstate.toml', '[resource_disk]\nlocal_nvme = "raid0"\nenable = false\n');
    expect((await doctor()).ids).toEqual([]);
  });

  it("warns: WALinuxAgent's firewall on beside bootstate's; not when either is off", async () => {
    await put('etc/waagent.conf', 'Provisioning.Agent=disabled\nOS.EnableFirewall=y\n');
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([0, ['two-firewalls']]);
    expect(result.out).toContain('OS.EnableFirewall=n');
    await put('etc/waagent.conf', 'Provisioning.Agent=disabled\nOS.EnableFirewall=n\n');
    expect((await doctor()).ids).toEqual([]);
    await put('etc/waagent.conf', 'Provisioning.Agent=disabled\nOS.EnableFirewall=y\n');
    await put('etc/bootstate/bootstate.toml', '[firewall]\nenable = false\n');
    expect((await doctor()).ids).toEqual([]);
  });

  it("breaks: azure-init's unit enabled", async () => {
    await mkdir(path.join(root, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
    await symlink('/usr/lib/systemd/system/azure-init.service', path.join(root, 'etc/systemd/system/multi-user.target.wants/azure-init.service'));
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([1, ['azure-init-enabled']]);
    expect(result.out).toContain('systemctl disable azure-init.service');
  });

  it('handled: an sshd_config that never includes the drop-in directory gets the setting itself, exit 0', async () => {
    await put('etc/ssh/sshd_config', '# Include /etc/ssh/sshd_config.d/*.conf\nPasswordAuthentication yes\n');
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([0, ['sshd-no-include']]);
    expect(result.out).toMatch(/^handled \[sshd-no-include\]: .*sets PasswordAuthentication in \/etc\/ssh\/sshd_config itself.*sshd_config\.bootstate-orig/m);
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
    expect(result.ids).toEqual(['config-unknown-key', 'sshd-no-include']);
  });

  it('lists breaking findings before warnings', async () => {
    await rm(path.join(root, 'usr/sbin/hv_kvp_daemon'));
    await put('etc/waagent.conf', '');
    expect((await doctor()).ids).toEqual(['waagent-provisioning', 'no-kvp-daemon']);
  });
});

describe('doctor --root reads the image, never the host', () => {
  let outside: string;
  beforeEach(async () => {
    outside = await mkdtemp(path.join(tmpdir(), 'bootstate-host-'));
  });
  afterEach(async () => {
    await rm(outside, { recursive: true, force: true });
  });

  it('resolves an absolute symlink inside the root: config.toml -> /etc/passwd reads the image\'s /etc/passwd', async () => {
    await put('etc/passwd', '[ssh]\nsshd_config_path = "/etc/ssh/from-image-passwd"\n');
    await link('etc/bootstate/bootstate.toml', '/etc/passwd');
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([0, ['sshd-config-missing']]);
    expect(result.out).toContain('/etc/ssh/from-image-passwd does not exist');
  });

  it('never lets `..` in a link climb above the root', async () => {
    await put('etc/passwd', '[ssh]\nsshd_config_path = "/etc/ssh/from-image-passwd"\n');
    await link('etc/bootstate/bootstate.toml', '../../../../../../../../../../../etc/passwd');
    expect((await doctor()).out).toContain('/etc/ssh/from-image-passwd does not exist');
  });

  it('does not follow a link in the image to a host path: what is only on the host is not there', async () => {
    // On the host these files exist and would be findings; inside the root their targets do not.
    await writeFile(path.join(outside, 'waagent.conf'), 'Provisioning.Agent=auto\n');
    await link('etc/waagent.conf', path.join(outside, 'waagent.conf'));
    await writeFile(path.join(outside, 'sshd_config'), 'PasswordAuthentication yes\n');
    await rm(path.join(root, 'etc/ssh/sshd_config'));
    await link('etc/ssh/sshd_config', path.join(outside, 'sshd_config'));
    const result = await doctor();
    expect(result.ids).toEqual(['sshd-config-missing']);
  });

  it('follows absolute links that stay in the image, in the middle of a path too', async () => {
    await rm(path.join(root, 'etc/ssh'), { recursive: true });
    await put('usr/share/openssh/sshd_config', 'Include /etc/ssh/sshd_config.d/*.conf\n');
    await link('etc/ssh', '/usr/share/openssh');
    await rm(path.join(root, 'usr/sbin/hv_kvp_daemon'));
    await put('usr/libexec/hv_kvp_daemon.real');
    await link('usr/sbin/hv_kvp_daemon', '/usr/libexec/hv_kvp_daemon.real');
    expect(await doctor()).toMatchObject({ code: 0, ids: [] });
  });
});

describe('doctor --root DIR that is not a directory', () => {
  it('is a usage error naming the root: missing, or a file', async () => {
    await expect(runDoctor({ root: path.join(root, 'missing') }, { stdout: () => {}, stderr: () => {} })).rejects.toThrow(
      new UsageError(`--root ${path.join(root, 'missing')}: no such directory`),
    );
    await expect(runDoctor({ root: path.join(root, 'usr/sbin/hv_kvp_daemon') }, { stdout: () => {}, stderr: () => {} })).rejects.toThrow(
      new UsageError(`--root ${path.join(root, 'usr/sbin/hv_kvp_daemon')}: not a directory`),
    );
  });

  it('exits 2 from the CLI with one line on stderr and nothing on stdout', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const stdout = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await main(['doctor', '--root', path.join(root, 'missing')])).toBe(2);
      expect(await main(['doctor', '--root', path.join(root, 'etc/ssh/sshd_config')])).toBe(2);
      expect(stderr.mock.calls.map((c) => String(c[0]))).toEqual([
        `bootstate doctor: --root ${path.join(root, 'missing')}: no such directory (see 'bootstate doctor --help')\n`,
        `bootstate doctor: --root ${path.join(root, 'etc/ssh/sshd_config')}: not a directory (see 'bootstate doctor --help')\n`,
      ]);
      expect(stdout).not.toHaveBeenCalled();
    } finally {
      stderr.mockRestore();
      stdout.mockRestore();
    }
  });
});

describe('a bootstate configuration that is not a regular file', () => {
  const CONFIG = 'etc/bootstate/bootstate.toml';

  it.each([
    ['a FIFO (never opened, so never waited on)', () => fifo(CONFIG), 'not a regular file (fifo)'],
    ['a directory', () => mkdir(path.join(root, CONFIG), { recursive: true }), 'not a regular file (directory)'],
    ['a dangling symlink', () => link(CONFIG, '/etc/bootstate/gone.toml'), 'dangling symlink (to /etc/bootstate/gone.toml)'],
    ['a link to /dev/zero, which the image does not have', () => link(CONFIG, '/dev/zero'), 'dangling symlink (to /dev/zero)'],
    ['a drop-in that is a FIFO', () => fifo('etc/bootstate/bootstate.toml.d/50.toml'), 'not a regular file (fifo)'],
  ])('breaks: %s, naming it; exit 1', async (_, make, why) => {
    await make();
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([1, ['config-unreadable']]);
    expect(result.out).toContain(`]: ${root}/etc/bootstate/bootstate.toml`);
    expect(result.out).toContain(`: ${why}: a first boot would skip it`);
  });

  it('breaks: a link that loops inside the image cannot be read (ELOOP), naming it', async () => {
    await link(CONFIG, '/etc/bootstate/again.toml');
    await link('etc/bootstate/again.toml', 'bootstate.toml');
    const result = await doctor();
    expect([result.code, result.ids]).toEqual([1, ['config-invalid']]);
    expect(result.out).toContain(`${root}/etc/bootstate/bootstate.toml: cannot read: ELOOP`);
  });

  it('the checks never block on a FIFO either: one in place of a file they read is no file', async () => {
    await fifo('etc/waagent.conf');
    await fifo('etc/cloud/cloud.cfg');
    await rm(path.join(root, 'etc/ssh/sshd_config'));
    await fifo('etc/ssh/sshd_config');
    const result = await doctor();
    expect(result.ids).toEqual(['sshd-config-missing']);
    expect(result.out).toContain('does not exist or is not a regular file');
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
