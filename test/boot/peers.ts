/**
 * What the boots beside a real peer share: the layers that put Debian's WALinuxAgent (`waagent`, unit
 * walinuxagent.service) or cloud-init on an image beside the .deb, and how a test reads what each agent told the
 * fabric and what the peer did inside the VM.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { type AgentName, healthReportsOf, type HealthReport, isFinal } from '../../src/fabric/agents.js';
import type { RecordedRequest } from '../../src/fabric/behaviours.js';
import type { Boot, Machine } from './machine.js';
import { bakeLayer, type Rig } from './scenario.js';

export const WAAGENT_UNIT = 'walinuxagent.service';

/**
 * WALinuxAgent's configuration for the supported setup: bootstate provisions, WALinuxAgent runs extensions only.
 * `Provisioning.Agent=disabled` is the setting bootstate's docs name; the resource disk is left alone because the
 * container has none (WALinuxAgent would look for it on the VMBus), and verbose logs explain a failing test.
 */
export const WAAGENT_CONF = `Extensions.Enabled=y
Provisioning.Agent=disabled
Provisioning.DeleteRootPassword=n
Provisioning.RegenerateSshHostKeyPair=n
Provisioning.MonitorHostName=n
ResourceDisk.Format=n
ResourceDisk.EnableSwap=n
Logs.Verbose=y
OS.EnableFirewall=n
AutoUpdate.Enabled=n
`;

/**
 * A layer with WALinuxAgent's configuration, and a drop-in that lifts the unit's only condition
 * (ConditionVirtualization=microsoft: Debian starts it on Hyper-V only, and a container is not one). An empty
 * Condition assignment resets the unit's conditions; the drop-in sorts before any other, so nothing else is reset.
 */
export async function waagentLayer(rig: Rig, name: string): Promise<string> {
  const dir = path.join(rig.workDir, `waagent-${name}`);
  await mkdir(path.join(dir, `etc/systemd/system/${WAAGENT_UNIT}.d`), { recursive: true });
  await writeFile(path.join(dir, 'etc/waagent.conf'), WAAGENT_CONF);
  await writeFile(path.join(dir, `etc/systemd/system/${WAAGENT_UNIT}.d/00-not-hyper-v.conf`), '[Unit]\nConditionVirtualization=\n');
  return dir;
}

/**
 * A layer that removes, over `lowers`, every drop-in of walinuxagent.service the .deb installed (what an image
 * builder who deleted them would have): the boot that shows what the drop-in is for. Returns the layer and what
 * it removed.
 */
export async function withoutBootstateDropIns(rig: Rig, name: string, lowers: string[]): Promise<string> {
  const script = `found=$(dpkg-query -L bootstate | grep -E '/${WAAGENT_UNIT.replace('.', '\\.')}\\.d/[^/]+$' || true)
[ -n "$found" ] || { echo "the .deb installed no drop-in of ${WAAGENT_UNIT}" >&2; exit 1; }
for f in $found; do rm "$f"; done`;
  return bakeLayer(rig, `no-dropin-${name}`, lowers, script);
}

/** A layer that turns cloud-init off the documented way: /etc/cloud/cloud-init.disabled. */
export async function cloudInitDisabledLayer(rig: Rig): Promise<string> {
  const dir = path.join(rig.workDir, 'cloud-init-disabled');
  await mkdir(path.join(dir, 'etc/cloud'), { recursive: true });
  await writeFile(path.join(dir, 'etc/cloud/cloud-init.disabled'), '');
  return dir;
}

/**
 * A layer in which cloud-init reads DMI inside a container. cloud-init's DMI reader answers nothing when
 * systemd-detect-virt says container, because a container's DMI is usually its host's; the harness gives each VM a
 * DMI identity of its own (machine.ts), and without it the Azure datasource finds no system UUID and gives up. The
 * check is turned off in the installed file at build time, so nothing of cloud-init is kept in this repository.
 */
export function cloudInitDmiLayer(rig: Rig, lowers: string[]): Promise<string> {
  const script = `f=$(python3 -c 'import cloudinit.dmi as dmi; print(dmi.__file__)')
grep -q '^    if is_container():$' "$f" || { echo "$f: no container check to turn off" >&2; exit 1; }
sed -i 's/^    if is_container():$/    if False:/' "$f"`;
  return bakeLayer(rig, 'cloud-init-dmi', lowers, script);
}

/** The first final report (Ready, or ProvisioningFailed) the fabric heard, and from whom. */
export function firstFinal(reports: HealthReport[]): HealthReport | undefined {
  return reports.find(isFinal);
}

/** Requests one agent sent. */
export const from = (requests: RecordedRequest[], agent: AgentName) => requests.filter((r) => r.agent === agent);

/** Everything about one boot beside WALinuxAgent a failing assertion needs to be explained. */
export async function peerStory(machine: Machine, boot: Boot): Promise<string> {
  const exec = async (argv: string[]) => {
    const r = await boot.exec(argv);
    return `${r.stdout}${r.stderr}`;
  };
  const requests = await machine.requests();
  return [
    `health reports: ${JSON.stringify(healthReportsOf(requests).map((r) => `${r.agent}:${r.state}${r.subStatus ? `/${r.subStatus}` : ''}`))}`,
    `requests: ${requests.map((r) => `${r.agent} ${r.method} ${r.url}`).join('\n  ')}`,
    `systemctl status:\n${await exec(['systemctl', 'status', '--no-pager', '-l', 'bootstate.service', WAAGENT_UNIT])}`,
    `waagent.log (end):\n${(await exec(['tail', '-n', '60', '/var/log/waagent.log'])).slice(-6000)}`,
    `console (end):\n${boot.console().slice(-2000)}`,
  ].join('\n');
}

/** The users of the VM with a home under /home (the ones an agent made for someone to log in as). */
export async function homeUsers(boot: Boot): Promise<string[]> {
  const passwd = await boot.exec(['getent', 'passwd']);
  return passwd.stdout.split('\n').filter((l) => l.split(':')[5]?.startsWith('/home/')).map((l) => l.split(':')[0]!);
}
