/**
 * Secrets never leave the agent: a distinctive password and custom data are planted in the metadata, the
 * config file and the kernel log the boot diagnostics read, and every byte the run produced is searched for them —
 * stdout, stderr, every file it wrote (log, KVP pool, journals, markers, OS files), the KVP pool's boot diagnostics
 * decoded (reassembled and decompressed), the trace HTML, every request the fabric received, and the argv of the
 * agent and its children while it ran.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes, X509Certificate } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { decodeRecords } from '../../src/kvp/codec.js';
import { unpackDiagnostics } from '../../src/kvp/diagnostics.js';
import { makeCertificate } from '../../src/fabric/certificates.js';
import { opensshPublicKey } from '../../src/os/certificates/openssh-key.js';
import { ovfDocument } from '../../src/fabric/ovf-document.js';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { AGENT, runAgent, type AgentRun } from '../integration/agent.js';
import { watchProcessTree } from './process-watch.js';

const tag = randomBytes(6).toString('hex');
const PASSWORD = `S3cr3t-Canary-${tag}`;
const CUSTOM_TEXT = `CanaryCustom-${tag}`;
const CUSTOM = Buffer.from(CUSTOM_TEXT).toString('base64');
/** Whole secrets and fragments long enough to identify them (a JSON error shows ~10 characters of its input). */
const NEEDLES = [PASSWORD, CUSTOM, CUSTOM_TEXT, 'S3cr3t-Can', CUSTOM.slice(0, 10), CUSTOM_TEXT.slice(0, 10), tag];

function plantedDocument(): Record<string, any> {
  const doc = exampleImdsDocument();
  doc.compute.customData = CUSTOM;
  doc.compute.userData = CUSTOM;
  doc.compute.osProfile.adminPassword = PASSWORD;
  doc.compute.tagsList = [{ name: 'password', value: PASSWORD }];
  return doc;
}

const CONFIG_WITH_SECRETS = `
# admin password for the image: ${PASSWORD}
# custom data: ${CUSTOM}
[journal]
enable = true # ${PASSWORD}
`;

interface Produced {
  where: string;
  text: string;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile());
}

let fabric: FakeFabric;
beforeEach(async () => {
  fabric = await startFakeFabric();
});
afterEach(async () => {
  await fabric.close();
});

/**
 * A kernel log for the boot diagnostics to read, with `secrets` (the ones the run is given) on lines of their own, at
 * the start and end of lines, and cut through at the start of one.
 */
function plantedKernelLog(secrets: string[]): string {
  const file = join(mkdtempSync(join(tmpdir(), 'bootstate-kmsg-')), 'kmsg');
  const lines = Array.from({ length: 400 }, (_, i) => `[${(i / 10).toFixed(6)}] hv_storvsc: probe ${i}`);
  for (const secret of secrets) lines.push(`[   41.000000] login: ${secret}`, `[   41.000001] ${secret} rejected`, secret.slice(4), `${secret} base64 ${Buffer.from(secret).toString('base64')}`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/** The boot diagnostics of every KVP pool among `produced`, decoded, as more produced text; how many texts there were. */
function decodedDiagnostics(produced: Produced[]): { texts: Produced[]; names: string[] } {
  const texts: Produced[] = [];
  const names: string[] = [];
  for (const { where } of produced.filter((p) => p.where.endsWith('.kvp_pool_1'))) {
    const { timelines, texts: unpacked } = unpackDiagnostics(decodeRecords(readFileSync(where), { lossy: true }));
    for (const t of timelines) texts.push({ where: `${where} timeline`, text: JSON.stringify(t.fields) });
    for (const t of unpacked) {
      expect(t.problem, `${t.name} in ${where}`).toBeUndefined();
      names.push(t.name);
      texts.push({ where: `${where} ${t.name} (decoded)`, text: t.bytes!.toString('latin1') });
    }
  }
  return { texts, names };
}

/** Runs the agent with the secrets planted and gathers everything it produced, by origin. */
async function runAndCollect(sections: Record<string, Record<string, number>> = {}, kernelSecrets: string[] = [CUSTOM_TEXT, CUSTOM]): Promise<{ run: AgentRun; produced: Produced[]; diagnostics: string[] }> {
  let watch: ReturnType<typeof watchProcessTree> | null = null;
  const extra = Object.entries(sections).map(([name, values]) => `[${name}]\n${Object.entries(values).map(([k, v]) => `${k} = ${v}`).join('\n')}\n`);
  extra.push(`[boot_diagnostics]\nkernel_log = "${plantedKernelLog(kernelSecrets)}"\n`);
  const run = await runAgent(fabric, {
    extraToml: [CONFIG_WITH_SECRETS, ...extra].join('\n'),
    imds: { total_retry_timeout_secs: 3, retry_interval_secs: 0.1 },
    onSpawn: (child) => (watch = watchProcessTree(child.pid!, 10)),
  });
  const w = watch as ReturnType<typeof watchProcessTree> | null;
  w?.stop();
  const produced: Produced[] = [
    { where: 'stdout', text: run.stdout },
    { where: 'stderr', text: run.stderr },
    ...[...(w?.seen.values() ?? [])].map((p) => ({ where: `argv of ${p.pid}`, text: p.argv.join(' ') })),
    ...fabric.requests.map((r, i) => ({ where: `request ${i} to ${r.route}`, text: `${r.method} ${r.url} ${JSON.stringify(r.headers)} ${r.body}` })),
  ];
  for (const file of filesUnder(run.root).filter((f) => !f.endsWith('/bootstate.toml'))) {
    produced.push({ where: file, text: readFileSync(file).toString('latin1') });
  }
  const runs = join(run.root, 'var/lib/bootstate/runs');
  for (const journal of readdirSync(runs).filter((f) => f.endsWith('.jsonl'))) {
    const html = join(run.root, `trace-${journal}.html`);
    execFileSync(process.execPath, [AGENT, 'trace', join(runs, journal), '-o', html], { stdio: 'pipe' });
    produced.push({ where: html, text: readFileSync(html, 'utf8') });
  }
  const decoded = decodedDiagnostics(produced);
  produced.push(...decoded.texts);
  return { run, produced, diagnostics: decoded.names };
}

/** The files meant to hold the owner's data, decoded (everything else must be clean). */
const SAVED = ['var/lib/bootstate/CustomData', 'var/lib/bootstate/UserData'];

function leaks(produced: Produced[]): string[] {
  return produced
    .filter(({ where }) => !SAVED.some((saved) => where.endsWith(`/${saved}`)))
    .flatMap(({ where, text }) => NEEDLES.filter((n) => text.includes(n)).map((n) => `${n} in ${where}`));
}

/** Each saved file holds exactly `bytes`, readable by its owner only. */
function expectSaved(root: string, file: string, bytes: Buffer): void {
  expect(readFileSync(join(root, file))).toEqual(bytes);
  expect(statSync(join(root, file)).mode & 0o777).toBe(0o600);
}

describe('secrets planted in metadata and config', () => {
  it('appear nowhere the agent wrote, sent or ran when provisioning succeeds', async () => {
    fabric.setImdsDocument(plantedDocument());
    const { run, produced, diagnostics } = await runAndCollect();
    expect(run.code).toBe(0);
    expect(produced.some((p) => p.where.endsWith('.kvp_pool_1'))).toBe(true);
    expect(diagnostics).toEqual(['kernel-log']);
    expect(produced.some((p) => p.where.endsWith('.html'))).toBe(true);
    expect(produced.filter((p) => p.where.startsWith('argv')).length).toBeGreaterThan(0);
    expect(leaks(produced)).toEqual([]);
    expectSaved(run.root, 'var/lib/bootstate/UserData', Buffer.from(CUSTOM_TEXT));
  });

  it('appear nowhere but the saved files when a claimed pool VM gets custom data in ovf-env.xml', async () => {
    const customer = plantedDocument();
    customer.extended.compute.hasCustomData = true;
    fabric.setPreprovisioned({
      type: 'Running',
      claimAtPoll: 2,
      customerDocument: customer,
      customerOvf: ovfDocument({ username: 'azureuser', hostname: 'web-01', password: PASSWORD, customData: Buffer.from(CUSTOM_TEXT) }),
    });
    const { run, produced } = await runAndCollect({ preprovisioning: { poll_interval_secs: 0.1 } }, [PASSWORD, CUSTOM_TEXT, CUSTOM]);
    expect(run.code, run.stderr).toBe(0);
    expect(fabric.requestsTo('reprovision')).toHaveLength(2);
    expect(leaks(produced)).toEqual([]);
    expectSaved(run.root, 'var/lib/bootstate/CustomData', Buffer.from(CUSTOM_TEXT));
    expectSaved(run.root, 'var/lib/bootstate/UserData', Buffer.from(CUSTOM_TEXT));
  });

  it('appear nowhere when provisioning fails and the failure report is sent', async () => {
    const doc = plantedDocument();
    doc.compute.osProfile.adminUsername = 'root';
    fabric.setImdsDocument(doc);
    const { run, produced, diagnostics } = await runAndCollect();
    expect(run.code).toBe(78);
    expect(diagnostics.sort()).toEqual(['kernel-log', 'step']);
    expect(produced.find((p) => p.where.endsWith('kernel-log (decoded)'))?.text).toContain('login: [redacted]');
    expect(produced.some((p) => p.text.includes('ProvisioningFailed'))).toBe(true);
    expect(leaks(produced)).toEqual([]);
  });

  it('appear nowhere when IMDS serves, until its deadline, a body that breaks JSON right at the custom data', async () => {
    const text = JSON.stringify(plantedDocument());
    // A garbled body is asked again (docs/protocol.md#imds-retries): every attempt's parse error is logged.
    fabric.setImds({ status: 200, body: text.replace(`"customData":"${CUSTOM}"`, `"customData":${CUSTOM}`) });
    // The custom data is never parsed, so the run does not hold it and cannot know it for a secret: none is planted in the kernel log.
    const { run, produced } = await runAndCollect({}, []);
    expect(run.code).toBe(1);
    expect(fabric.requestsTo('imds').length).toBeGreaterThan(1);
    expect(produced.some((p) => p.text.includes('ProvisioningFailed') && p.text.includes('error parsing IMDS metadata'))).toBe(true);
    expect(leaks(produced)).toEqual([]);
  });
});

describe("the goal state's private keys", () => {
  it('appear nowhere but the key pair file and /var/lib/waagent/<THUMBPRINT>.prv: not in logs, KVP, journals, the trace, requests or any argv', async () => {
    const owner = await makeCertificate('owner-key');
    // Lines of the private key's PEM, but for those that happen to hold only public bytes the public key shares.
    const sshLine = opensshPublicKey(new X509Certificate(owner.certificatePem).publicKey);
    const body = owner.privateKeyPem!.split('\n').filter((l) => l && !l.startsWith('-----') && !sshLine.includes(l) && !owner.certificatePem.includes(l));
    const customer = exampleImdsDocument();
    customer.compute.publicKeys = [];
    fabric.setCertificates([owner]);
    fabric.setPreprovisioned({
      type: 'Running',
      claimAtPoll: 1,
      customerDocument: customer,
      customerOvf: ovfDocument({
        username: 'azureuser',
        hostname: 'web-01',
        keyFingerprints: [owner.thumbprint],
        keyPairs: [{ fingerprint: owner.thumbprint, path: '/home/azureuser/.ssh/id_rsa' }],
      }),
    });
    const { run, produced } = await runAndCollect({ preprovisioning: { poll_interval_secs: 0.1 } });
    expect(run.code, run.stderr).toBe(0);
    const allowed = ['home/azureuser/.ssh/id_rsa', `var/lib/waagent/${owner.thumbprint}.prv`];
    expect(body.length).toBeGreaterThan(10);
    for (const file of allowed) expect(readFileSync(join(run.root, file), 'utf8')).toContain(body[1]);
    const found = produced
      .filter(({ where }) => !allowed.some((file) => where.endsWith(`/${file}`)))
      // Any private key, the transport key included, and any line of the owner's.
      .flatMap(({ where, text }) => [...(text.includes('PRIVATE KEY') ? ['PRIVATE KEY'] : []), ...body.filter((l) => text.includes(l))].map((n) => `${n.slice(0, 16)} in ${where}`));
    expect(found).toEqual([]);
    expect(produced.filter((p) => p.where.startsWith('argv')).length).toBeGreaterThan(0);
  });
});
