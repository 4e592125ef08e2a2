/**
 * What the provisioning media says counts whichever of it and IMDS answers first. Each case boots twice
 * in namespaces with the default configuration and a real ISO 9660 ovf-env.xml on a loop device: once with the
 * media read held up (a slow `mount`) so IMDS answers first, once with IMDS held up (the fake fabric waits before
 * each answer) so the media is read first. The run journal shows which order happened.
 */
import { existsSync } from 'node:fs';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CUSTOMER_CUSTOM_DATA } from '../../src/fabric/scenarios.js';
import { ovfDocument, type OvfDocumentOptions } from '../../src/fabric/ovf-document.js';
import { vmFile, withMedia, withVm, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox } from './ns.js';

const PREFIX = `bs-order-${process.pid}`;
const DATA_DIR = '/var/lib/bootstate';
const LOOP = existsSync('/dev/loop-control');
const MEDIA_CUSTOM_DATA = Buffer.from('#!/bin/sh\n# custom data only the media carries: media-order-5e1a\n');
const ORDERS = ['IMDS first', 'media first'] as const;
type Order = (typeof ORDERS)[number];

interface Booted { vm: Vm; boot: BootResult; order: string }
const vms: Vm[] = [];
const cases = new Map<string, Promise<Booted>>();

/** Which answer the chart took first, from the run journal's state values. */
async function orderSeen(vm: Vm): Promise<string> {
  const dir = vm.sandbox.hostPath(`${DATA_DIR}/runs`);
  const journals = (await readdir(dir).catch(() => [])).filter((n) => n.endsWith('.jsonl')).sort();
  const text = (await Promise.all(journals.map((n) => readFile(path.join(dir, n), 'utf8')))).join('\n');
  // The first gathering state in which one region is over and the other is not.
  const imdsFirst = text.indexOf('"imds":"done","media":"reading"');
  const mediaFirst = text.search(/"imds":\{"fetching":"[a-z]+"\},"media":"done"/);
  if (imdsFirst < 0 && mediaFirst < 0) return 'unknown';
  if (mediaFirst < 0 || (imdsFirst >= 0 && imdsFirst < mediaFirst)) return 'IMDS first';
  return 'media first';
}

/** Boots a VM whose only media is an ISO holding `ovf`, with the given order of arrival. */
function bootWithMedia(name: string, scenario: string, ovf: OvfDocumentOptions, order: Order): Promise<Booted> {
  const options = { generation: 2 as const, scenario, ...(order === 'media first' ? { imdsDelayMs: 2_000 } : {}) };
  return withVm(vms, `${PREFIX}-${name}`, options, async (vm) => {
    if (order === 'IMDS first') await writeFile(path.join(vm.sandbox.root, 'mount-delay'), '1.5\n');
    return withMedia(vm, ovfDocument(ovf), async () => {
      const boot = await vm.boot();
      return { vm, boot, order: await orderSeen(vm) };
    });
  });
}

const PLACEHOLDER = { username: 'pooladmin', hostname: 'pool-placeholder' };
const CASES: Record<string, { scenario: string; ovf: OvfDocumentOptions }> = {
  'pool-type': { scenario: 'pps-media-only', ovf: { ...PLACEHOLDER, ppsType: 'Running', preprovisionedVm: true } },
  'pool-legacy': { scenario: 'pps-media-only', ovf: { ...PLACEHOLDER, preprovisionedVm: true } },
  'custom-data': { scenario: 'happy', ovf: { username: 'azureuser', hostname: 'web-01', customData: MEDIA_CUSTOM_DATA } },
};

const users = async (vm: Vm) => (await vmFile(vm, '/etc/passwd')).split('\n').map((l) => l.split(':')[0]);

describe.skipIf(!canSandbox)('the provisioning media counts in either order of arrival', { timeout: 240_000 }, () => {
  beforeAll(() => {
    assertNamespaces();
    if (!LOOP) throw new Error('no loop devices (/dev/loop-control): these tests attach the provisioning media as one');
    // Each VM sees only its own loop device (ns.ts), so the boots may overlap; two at a time keep a 2-core machine sane.
    const queue = Object.entries(CASES).flatMap(([name, c]) => ORDERS.map((order) => ({ key: `${name} ${order}`, name: `${name}-${order[0]}`, ...c, order })));
    const chain: Promise<unknown>[] = [Promise.resolve(), Promise.resolve()];
    queue.forEach((c, i) => {
      const lane = i % 2;
      const booted = chain[lane]!.then(() => bootWithMedia(c.name, c.scenario, c.ovf, c.order));
      chain[lane] = booted.catch(() => undefined);
      booted.catch(() => undefined);
      cases.set(c.key, booted);
    });
  });

  afterAll(async () => {
    await Promise.allSettled([...cases.values()]);
    await Promise.allSettled(vms.map((vm) => vm.sandbox.cleanup()));
  });

  for (const order of ORDERS) {
    describe(order, () => {
      for (const flag of ['pool-type', 'pool-legacy'] as const) {
        it(`a pool VM only the media marks (${flag === 'pool-type' ? 'PreprovisionedVMType=Running' : 'only PreprovisionedVm=true'}) waits for its claim and provisions the customer`, async () => {
          const { vm, boot, order: seen } = await cases.get(`${flag} ${order}`)!;
          expect(seen).toBe(order);
          expect(boot.exitCode, boot.stderr).toBe(0);
          expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready', 'Ready']);
          expect((await vm.requests()).filter((r) => r.route === 'reprovision')).toHaveLength(2);
          const passwd = await users(vm);
          expect(passwd).toContain('customer');
          expect(passwd).not.toContain('pooladmin');
          expect((await vmFile(vm, '/etc/hostname')).trim()).toBe('customer-vm');
          expect(await readFile(vm.sandbox.hostPath(`${DATA_DIR}/CustomData`))).toEqual(CUSTOMER_CUSTOM_DATA);
        });
      }

      it("the media's CustomData is saved though IMDS does not say hasCustomData", async () => {
        const { vm, boot, order: seen } = await cases.get(`custom-data ${order}`)!;
        expect(seen).toBe(order);
        expect(boot.exitCode, boot.stderr).toBe(0);
        expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready']);
        const target = vm.sandbox.hostPath(`${DATA_DIR}/CustomData`);
        expect(await readFile(target)).toEqual(MEDIA_CUSTOM_DATA);
        expect((await stat(target)).mode & 0o7777).toBe(0o600);
      });
    });
  }
});
