/**
 * WALinuxAgent next to bootstate (docs/coexistence.md): it stays for extensions when it does not provision
 * (`Provisioning.Agent=disabled` in /etc/waagent.conf) and its unit starts only once `bootstate gate` opens, as the
 * package's drop-in arranges. Both are read the way their readers read them: waagent.conf as WALinuxAgent 2.7 parses
 * it, the unit as systemd merges it with its drop-ins.
 */
import type { Check, Finding } from './finding.js';
import { exists, listDir, masked, read, unitEnabled } from '../system/image-files.js';

/** WALinuxAgent's unit: walinuxagent.service on Debian and Ubuntu, waagent.service on RHEL, SUSE and upstream. */
export const WAAGENT_UNITS = ['walinuxagent.service', 'waagent.service'];

/** The drop-in the package installs for each of them. */
export const GATE_DROPIN = '50-bootstate.conf';

/** Where systemd looks for system units and their drop-ins, highest priority first. */
const UNIT_DIRS = ['etc/systemd/system', 'run/systemd/system', 'usr/local/lib/systemd/system', 'usr/lib/systemd/system', 'lib/systemd/system'];

const GATE_COMMAND = /^\/usr\/bin\/bootstate\s+gate(\s|$)/;

/**
 * The value WALinuxAgent reads for `key` from waagent.conf text, or null when unset: a line starting with `#` is a
 * comment, the key ends at the first `=`, the value at the first `#`, both lose surrounding blanks (the value also its
 * quotes), the last line of a key wins, and `None` means unset.
 */
export function waagentSetting(conf: string, key: string): string | null {
  let value: string | null = null;
  for (const line of conf.split('\n')) {
    const at = line.indexOf('=');
    if (line.startsWith('#') || at < 0 || line.slice(0, at).trim() !== key) continue;
    const raw = line.slice(at + 1).split('#')[0]!.replace(/^[" ]+|[" ]+$/g, '').trim();
    value = raw === 'None' ? null : raw;
  }
  return value;
}

const WAAGENT_FIX = 'set Provisioning.Agent=disabled in /etc/waagent.conf (WALinuxAgent then only handles extensions: keep Extensions.Enabled=y)';

/**
 * WALinuxAgent provisions unless `Provisioning.Agent=disabled`: `auto` (the default) provisions itself, or, when it
 * finds cloud-init enabled, waits for cloud-init and reports Ready for it; `Provisioning.Enabled` has been ignored
 * since 2.2.45, so `Provisioning.Enabled=n` alone leaves it provisioning.
 */
export const waagentProvisioning: Check = async (root) => {
  const conf = await read(root, 'etc/waagent.conf');
  if (conf === null) return null;
  const agent = waagentSetting(conf, 'Provisioning.Agent');
  if (agent === 'disabled') return null;
  const legacy = waagentSetting(conf, 'Provisioning.Enabled');
  const ignored = legacy === null ? '' : `; Provisioning.Enabled=${legacy} has no effect since WALinuxAgent 2.2.45`;
  const problems: Record<string, string> = {
    auto: `WALinuxAgent is installed with Provisioning.Agent=${agent ?? 'auto (the default)'}${ignored}: it would provision this VM too (or, with cloud-init enabled, report Ready for cloud-init's provisioning)`,
    waagent: `WALinuxAgent is installed with Provisioning.Agent=waagent${ignored}: it would provision this VM too`,
    'cloud-init': `WALinuxAgent is installed with Provisioning.Agent=cloud-init (Debian's default)${ignored}: it would wait for cloud-init to provision this VM and report Ready for it, or, when cloud-init does not, report ProvisioningFailed after 30 minutes`,
  };
  const problem = problems[agent ?? 'auto'];
  if (problem) return { id: 'waagent-provisioning', severity: 'breaks', problem, fix: WAAGENT_FIX };
  return {
    id: 'waagent-provisioning',
    severity: 'warns',
    problem: `Provisioning.Agent=${agent} in /etc/waagent.conf is none of auto, waagent, cloud-init, disabled: WALinuxAgent 2.7 treats it as disabled, later versions may not`,
    fix: WAAGENT_FIX,
  };
};

/**
 * Each installed, unmasked WALinuxAgent unit must, as systemd would load it, be ordered after bootstate.service and
 * run `bootstate gate` as its ExecCondition=: it reports Ready the moment it starts.
 */
export const waagentGated: Check = async (root) => {
  const problems: string[] = [];
  const fixes: string[] = [];
  const gated: string[] = [];
  for (const unit of WAAGENT_UNITS) {
    const gap = await gateGap(root, unit);
    if (gap === 'gated') gated.push(unit);
    if (gap === null || gap === 'gated') continue;
    problems.push(`${unit} would start without waiting for bootstate: ${gap.why}`);
    fixes.push(gap.fix);
  }
  if (problems.length === 0) {
    if (gated.length === 0 || (await unitEnabled(root, 'bootstate.service')) !== null) return null;
    return {
      id: 'waagent-gated-bootstate-off',
      severity: 'warns',
      problem: `bootstate.service is not enabled, while ${gated.join(' and ')} waits for bootstate gate: no first boot would provision, and WALinuxAgent would never start on Azure`,
      fix: 'systemctl enable bootstate.service',
    };
  }
  const finding: Finding = {
    id: 'waagent-not-gated',
    severity: 'breaks',
    problem: `${problems.join('; ')}. WALinuxAgent reports Ready as soon as it starts, so the fabric could hear Ready before bootstate has provisioned the VM, or after it reported ProvisioningFailed`,
    fix: [...new Set(fixes)].join('; '),
  };
  return finding;
};

interface Gap {
  why: string;
  fix: string;
}

/** Why `unit` is not gated as systemd would load it; `gated`, or null when it is not installed or masked. */
async function gateGap(root: string, unit: string): Promise<Gap | 'gated' | null> {
  let unitFile: string | null = null;
  for (const dir of UNIT_DIRS) {
    const file = `${dir}/${unit}`;
    if (await masked(root, file)) return null;
    if (await exists(root, file)) {
      unitFile = file;
      break;
    }
  }
  if (unitFile === null) return null;

  // Drop-ins: one per file name, the highest-priority directory's; applied in file-name order after the unit.
  const dropins = new Map<string, string>();
  for (const dir of UNIT_DIRS) {
    for (const name of await listDir(root, `${dir}/${unit}.d`)) {
      if (name.endsWith('.conf') && !dropins.has(name)) dropins.set(name, `${dir}/${unit}.d/${name}`);
    }
  }
  const shipped = `usr/lib/systemd/system/${unit}.d/${GATE_DROPIN}`;
  const ours = dropins.get(GATE_DROPIN);
  const reinstall = `reinstall bootstate: it ships /${shipped}`;
  if (ours === undefined) return { why: `no /${shipped}`, fix: reinstall };
  if (ours !== shipped) {
    const how = (await masked(root, ours)) ? 'masks' : 'replaces';
    return { why: `/${ours} ${how} /${shipped}`, fix: `remove /${ours}` };
  }

  const files = [unitFile, ...[...dropins.keys()].sort().map((name) => dropins.get(name)!)];
  const after = new Set<string>();
  let conditions: string[] = [];
  let resetBy: string | null = null;
  for (const file of files) {
    const text = (await masked(root, file)) ? '' : ((await read(root, file)) ?? '');
    for (const { section, key, value } of unitSettings(text)) {
      if (section === 'Unit' && key === 'After') for (const name of value.split(/\s+/).filter(Boolean)) after.add(name);
      if (section !== 'Service' || key !== 'ExecCondition') continue;
      conditions = value === '' ? [] : [...conditions, value];
      if (value === '') resetBy = file;
    }
  }
  if (!conditions.some((command) => GATE_COMMAND.test(command))) {
    return resetBy
      ? { why: `/${resetBy} resets its ExecCondition=, so /usr/bin/bootstate gate no longer runs`, fix: `remove the empty ExecCondition= from /${resetBy}` }
      : { why: `/${shipped} does not run /usr/bin/bootstate gate as its ExecCondition=`, fix: reinstall };
  }
  if (!after.has('bootstate.service')) return { why: 'it is not ordered after bootstate.service', fix: reinstall };
  return 'gated';
}

/** `[Section] Key=Value` settings of a unit file, in order; comments skipped, backslash-continued lines joined. */
export function unitSettings(text: string): Array<{ section: string; key: string; value: string }> {
  const settings: Array<{ section: string; key: string; value: string }> = [];
  let section = '';
  const lines = text.replace(/\\\r?\n/g, ' ').split(/\r?\n/);
  for (const line of lines) {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#') || trimmed.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(trimmed);
    if (header) {
      section = header[1]!;
      continue;
    }
    const at = trimmed.indexOf('=');
    if (at < 0) continue;
    settings.push({ section, key: trimmed.slice(0, at).trim(), value: trimmed.slice(at + 1).trim() });
  }
  return settings;
}
