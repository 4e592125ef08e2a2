/**
 * bootstate next to the real peers on real boots (Debian 12 under systemd-nspawn, the fake fabric at Azure's
 * addresses, now also speaking the classic wireserver protocol): Debian's WALinuxAgent 2.7 (`waagent`) and
 * cloud-init 22.4 installed from the archive beside the .deb. Every request the fabric hears is told apart by its
 * User-Agent, so each assertion names the agent that said what.
 *
 * - The supported setup (docs/coexistence.md): WALinuxAgent with `Provisioning.Agent=disabled` and the .deb's drop-in
 *   of walinuxagent.service. A good boot: bootstate's Ready is the first final report, WALinuxAgent starts its
 *   extension handling after it, and only one user is made. A failed boot: ProvisioningFailed, and WALinuxAgent
 *   never starts, so no Ready follows.
 * - The same image without the drop-in: WALinuxAgent reports Ready after bootstate's ProvisioningFailed.
 * - cloud-init turned off with /etc/cloud/cloud-init.disabled: bootstate is the only agent the fabric hears.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { healthReportsOf, type HealthReport } from '../../src/fabric/agents.js';
import type { RecordedRequest } from '../../src/fabric/behaviours.js';
import { canSandbox } from '../e2e/ns.js';
import { createMachine, show, until, type Boot, type Machine, type MachineOptions } from './machine.js';
import { cloudInitDisabledLayer, firstFinal, from, homeUsers, peerStory, WAAGENT_UNIT, waagentLayer, withoutBootstateDropIns } from './peers.js';
import { createRig, imdsDocument, type Rig } from './scenario.js';

const TAG = `bsp${process.pid}${randomBytes(2).toString('hex')}`;
/** WALinuxAgent's daemon and extension handler start in seconds; a loaded 2-core machine booting several VMs is slow. */
const PEER_WAIT_MS = 300_000;

let rig: Rig;
const machines: Machine[] = [];

interface Seen {
  requests: RecordedRequest[];
  reports: HealthReport[];
  users: string[];
  waagent: Record<string, string>;
  waagentLog: string;
  bootstate: Record<string, string>;
  story: string;
}

async function machine(name: string, options: Partial<MachineOptions> & { layers: string[] }): Promise<Machine> {
  const m = await createMachine({ name: `${TAG}${name}`, workDir: rig.workDir, imdsDocument: imdsDocument(rig.publicKey), ...options });
  machines.push(m);
  return m;
}

/** bootstate's process has ended (the unit exited or failed). */
async function bootstateEnded(m: Machine, boot: Boot): Promise<Record<string, string>> {
  return until(
    `${m.name}: bootstate.service's process to end`,
    async () => {
      const props = await show(boot, 'bootstate.service', ['SubState', 'Result', 'ExecMainStatus']);
      return props.SubState === 'exited' || props.SubState === 'failed' ? props : null;
    },
    PEER_WAIT_MS,
    () => peerStory(m, boot),
  );
}

async function observe(m: Machine, boot: Boot): Promise<Seen> {
  const log = await boot.exec(['cat', '/var/log/waagent.log']);
  const requests = await m.requests();
  return {
    requests,
    reports: healthReportsOf(requests),
    users: await homeUsers(boot),
    waagent: await show(boot, WAAGENT_UNIT, ['ActiveState', 'SubState', 'Result', 'ExecMainStartTimestampMonotonic', 'ConditionResult']),
    waagentLog: log.stdout,
    bootstate: await show(boot, 'bootstate.service', ['SubState', 'Result', 'ExecMainStatus']),
    story: await peerStory(m, boot),
  };
}

/** Boots, waits for bootstate to end and for `done` (what the peer's last expected step is), then records. */
async function bootAndWatch(m: Machine, done: (boot: Boot) => Promise<boolean>): Promise<Seen> {
  const boot = await m.boot();
  try {
    await boot.settled();
    await bootstateEnded(m, boot);
    await until(`${m.name}: the peer's last expected step`, async () => ((await done(boot)) ? true : null), PEER_WAIT_MS, () => peerStory(m, boot));
    return await observe(m, boot);
  } finally {
    await boot.shutdown();
  }
}

/** WALinuxAgent's extension handler uploaded the VM's status through the host plugin. */
const waagentReportedStatus = (m: Machine) => async () => from(await m.requests(), 'WALinuxAgent').some((r) => r.route === 'hostPluginStatus');
/** WALinuxAgent told the fabric Ready. */
const waagentReady = (m: Machine) => async () => healthReportsOf(await m.requests()).some((r) => r.agent === 'WALinuxAgent' && r.state === 'Ready');

interface CloudInitSeen extends Seen {
  /** `cloud-init status --long`. */
  status: string;
  /** ActiveState and start time of cloud-init's four boot stages. */
  stages: Record<string, Record<string, string>>;
}

const CLOUD_INIT_STAGES = ['cloud-init-local.service', 'cloud-init.service', 'cloud-config.service', 'cloud-final.service'];

let vms: {
  supported: Promise<Seen & { userAdds: string[] }>;
  supportedFailure: Promise<Seen>;
  noDropInFailure: Promise<Seen>;
  cloudInitOff: Promise<CloudInitSeen>;
};

/** cloud-init installed and turned off as documented, bootstate provisioning. */
async function bootCloudInitOff(): Promise<CloudInitSeen> {
  const cloudInit = await rig.withPackages(['cloud-init']);
  const m = await machine('ci', { layers: [await cloudInitDisabledLayer(rig), cloudInit.debLayer, cloudInit.debian] });
  const boot = await m.boot();
  try {
    // is-system-running --wait returns once every start job is done, cloud-init's stages included had they been
    // enabled: whatever cloud-init would have sent, it has sent by then.
    await boot.settled();
    const bootstate = await bootstateEnded(m, boot);
    const stages: Record<string, Record<string, string>> = {};
    for (const unit of CLOUD_INIT_STAGES) stages[unit] = await show(boot, unit, ['ActiveState', 'ExecMainStartTimestampMonotonic']);
    const status = await boot.exec(['cloud-init', 'status', '--long']);
    return { ...(await observe(m, boot)), bootstate, stages, status: `${status.stdout}${status.stderr}` };
  } finally {
    await boot.shutdown();
  }
}

describe.runIf(canSandbox)('bootstate beside WALinuxAgent and cloud-init on booted Debian 12', () => {
  beforeAll(async () => {
    rig = await createRig();
    const waagent = await rig.withPackages(['waagent']);
    const conf = await waagentLayer(rig, 'conf');
    const supported = [conf, waagent.debLayer, waagent.debian];
    const noDropIn = await withoutBootstateDropIns(rig, 'waagent', supported);
    vms = {
      supported: machine('ok', { layers: supported }).then(async (m) => {
        const boot = await m.boot();
        try {
          await boot.settled();
          await bootstateEnded(m, boot);
          await until(`${m.name}: WALinuxAgent's status upload`, async () => ((await waagentReportedStatus(m)()) ? true : null), PEER_WAIT_MS, () => peerStory(m, boot));
          const userAdds = (await boot.exec(['journalctl', '--no-pager', '-q', '-b', '-t', 'useradd', '-o', 'cat'])).stdout;
          return { ...(await observe(m, boot)), userAdds: userAdds.split('\n').filter((l) => l.startsWith('new user')) };
        } finally {
          await boot.shutdown();
        }
      }),
      supportedFailure: machine('fail', { scenario: 'hostile-username', imdsDocument: undefined, layers: supported }).then((m) =>
        bootAndWatch(m, async (boot) => (await show(boot, WAAGENT_UNIT, ['Result'])).Result === 'exec-condition'),
      ),
      noDropInFailure: machine('nodrop', { scenario: 'hostile-username', imdsDocument: undefined, layers: [noDropIn, ...supported] }).then((m) =>
        bootAndWatch(m, waagentReady(m)),
      ),
      cloudInitOff: bootCloudInitOff(),
    };
    for (const vm of Object.values(vms)) vm.catch(() => {});
  }, 900_000);

  afterAll(async () => {
    for (const m of machines) await m.destroy();
    await rig?.cleanup();
  }, 120_000);

  describe('WALinuxAgent in the supported setup (Provisioning.Agent=disabled, the .deb’s drop-in)', () => {
    it('a good boot: the first final report the fabric hears is bootstate’s Ready, on its JSON endpoint', async () => {
      const seen = await vms.supported;
      expect(firstFinal(seen.reports), seen.story).toMatchObject({ agent: 'bootstate', protocol: 'json', state: 'Ready' });
      expect(seen.reports.filter((r) => r.subStatus === 'ProvisioningFailed'), seen.story).toEqual([]);
      expect(seen.bootstate.Result).toBe('success');
    }, PEER_WAIT_MS * 2);

    it('a good boot: WALinuxAgent starts only after bootstate’s Ready, then fetches the goal state and runs its extension handling', async () => {
      const seen = await vms.supported;
      const readyAt = seen.reports.find((r) => r.agent === 'bootstate' && r.state === 'Ready')!.receivedAt;
      const waagent = from(seen.requests, 'WALinuxAgent');
      expect(waagent.length, seen.story).toBeGreaterThan(0);
      expect(waagent.filter((r) => r.receivedAt < readyAt).map((r) => `${r.method} ${r.url}`), seen.story).toEqual([]);
      const routes = new Set(waagent.map((r) => r.route));
      for (const route of ['versions', 'goalState', 'extensionsConfig', 'hostPluginStatus'] as const) expect(routes, seen.story).toContain(route);
      expect(seen.waagent.ActiveState, seen.story).toBe('active');
      expect(seen.waagentLog).toContain('Provisioning is disabled');
    }, PEER_WAIT_MS * 2);

    it('a good boot: nothing provisions twice (one user made, by bootstate)', async () => {
      const seen = await vms.supported;
      expect(seen.userAdds, seen.story).toHaveLength(1);
      expect(seen.userAdds[0]).toMatch(/name=azureuser/);
      expect(seen.users).toEqual(['azureuser']);
      expect(seen.waagentLog).not.toMatch(/Create user account|Running default provisioning handler/);
    }, PEER_WAIT_MS * 2);

    it('a failed boot: ProvisioningFailed, no Ready from anyone, and WALinuxAgent never starts (its ExecCondition shuts it out)', async () => {
      const seen = await vms.supportedFailure;
      expect(seen.reports.map((r) => `${r.agent}:${r.state}${r.subStatus ? `/${r.subStatus}` : ''}`), seen.story).toContain('bootstate:NotReady/ProvisioningFailed');
      expect(seen.reports.filter((r) => r.state === 'Ready'), seen.story).toEqual([]);
      expect(from(seen.requests, 'WALinuxAgent'), seen.story).toEqual([]);
      expect(seen.waagent, seen.story).toMatchObject({ ActiveState: 'inactive', Result: 'exec-condition', ExecMainStartTimestampMonotonic: '0' });
      expect(seen.waagentLog).toBe('');
    }, PEER_WAIT_MS * 2);
  });

  describe('WALinuxAgent without the .deb’s drop-in', () => {
    it('reports Ready after bootstate reported ProvisioningFailed: the race the drop-in closes', async () => {
      const seen = await vms.noDropInFailure;
      const kinds = seen.reports.map((r) => `${r.agent}:${r.state}${r.subStatus ? `/${r.subStatus}` : ''}`);
      const failed = kinds.indexOf('bootstate:NotReady/ProvisioningFailed');
      const ready = kinds.indexOf('WALinuxAgent:Ready');
      expect(failed, seen.story).toBeGreaterThanOrEqual(0);
      expect(ready, seen.story).toBeGreaterThan(failed);
      expect(seen.waagentLog).toContain('Provisioning is disabled');
    }, PEER_WAIT_MS * 2);
  });

  describe('cloud-init turned off with /etc/cloud/cloud-init.disabled', () => {
    it('leaves bootstate the only agent the fabric hears, and bootstate provisions', async () => {
      const seen = await vms.cloudInitOff;
      expect(seen.requests.length, seen.story).toBeGreaterThan(0);
      expect(
        seen.requests.filter((r) => r.agent !== 'bootstate').map((r) => `${r.userAgent} ${r.method} ${r.url}`),
        seen.story,
      ).toEqual([]);
      expect(seen.reports.map((r) => `${r.agent}:${r.state}`)).toContain('bootstate:Ready');
      expect(seen.bootstate.Result).toBe('success');
      expect(seen.users).toEqual(['azureuser']);
    }, PEER_WAIT_MS * 2);

    it('never runs a stage of cloud-init, and cloud-init itself says it is disabled', async () => {
      const seen = await vms.cloudInitOff;
      expect(seen.status, seen.story).toMatch(/status: disabled/);
      for (const [unit, props] of Object.entries(seen.stages)) {
        expect({ unit, ...props }).toEqual({ unit, ActiveState: 'inactive', ExecMainStartTimestampMonotonic: '0' });
      }
    }, PEER_WAIT_MS * 2);
  });
});
