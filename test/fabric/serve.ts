/**
 * Runs the fake fabric as a process, for tests that need it inside a network namespace on the real addresses:
 *
 *   npx tsx test/fabric/serve.ts --imds 169.254.169.254:80 --wireserver 168.63.129.16:80 \
 *     --host-plugin 168.63.129.16:32526 --record /tmp/requests.jsonl [--scenario happy] [--imds-doc FILE] \
 *     [--imds-delay-ms N] [--health-unavailable-while FILE] [--certificates PEM] [--claim-when FILE]
 *
 * Prints one JSON line `{"ready":true,...}` once every service listens, appends each request to the record file
 * as a JSON line, and exits on SIGTERM/SIGINT. `FAKE_FABRIC_SCENARIO` and `FAKE_FABRIC_IMDS_DOC` stand in for
 * the two options when they are not given.
 */
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { type Listen, startFakeFabric } from '../../src/fabric/fake-fabric.js';
import { applyScenario } from '../../src/fabric/scenarios.js';

/** Parses `host:port` (IPv6 as `[::1]:80`). */
function parseListen(value: string | undefined): Partial<Listen> | undefined {
  if (value === undefined) return undefined;
  const match = /^\[?([^\]]*?)\]?:(\d+)$/.exec(value);
  if (!match) throw new Error(`expected HOST:PORT, got ${value}`);
  return { host: match[1], port: Number(match[2]) };
}

const { values } = parseArgs({
  options: {
    imds: { type: 'string' },
    wireserver: { type: 'string' },
    'host-plugin': { type: 'string' },
    record: { type: 'string' },
    scenario: { type: 'string' },
    'imds-doc': { type: 'string' },
    /** Every IMDS answer waits N ms first, whatever the scenario answers then. */
    'imds-delay-ms': { type: 'string' },
    /** PEM file of the goal state's certificates (each CERTIFICATE, the first one's PRIVATE KEY after it). */
    certificates: { type: 'string' },
    /** Every health POST gets 503 while FILE exists (a test removes it to let the reports through). */
    'health-unavailable-while': { type: 'string' },
    /** A pool VM is claimed once FILE exists (a test creates it when the network the claim needs is in place). */
    'claim-when': { type: 'string' },
  },
});

const scenario = values.scenario ?? process.env.FAKE_FABRIC_SCENARIO ?? 'happy';
const docFile = values['imds-doc'] ?? process.env.FAKE_FABRIC_IMDS_DOC;
const record = values.record;

const fabric = await startFakeFabric({
  imds: parseListen(values.imds),
  wireserver: parseListen(values.wireserver),
  hostPlugin: parseListen(values['host-plugin']),
  onRequest: record ? (request) => appendFileSync(record, `${JSON.stringify(request)}\n`) : undefined,
});
applyScenario(fabric, scenario);
if (docFile) fabric.setImdsDocument(JSON.parse(readFileSync(docFile, 'utf8')));
if (values.certificates) {
  const pem = readFileSync(values.certificates, 'utf8');
  const blocks = [...pem.matchAll(/-----BEGIN ([A-Z ]+)-----[\s\S]*?-----END \1-----\n?/g)];
  const certificates: Array<{ certificatePem: string; privateKeyPem?: string }> = [];
  for (const [text, label] of blocks) {
    if (label === 'CERTIFICATE') certificates.push({ certificatePem: text.endsWith('\n') ? text : `${text}\n` });
    else if (label!.endsWith('PRIVATE KEY') && certificates.length > 0) certificates.at(-1)!.privateKeyPem = text;
  }
  fabric.setCertificates(certificates);
}
if (values['imds-delay-ms']) fabric.delayImds(Number(values['imds-delay-ms']));
const unavailableWhile = values['health-unavailable-while'];
if (unavailableWhile) fabric.setWireserver(() => (existsSync(unavailableWhile) ? { status: 503, body: 'Service Unavailable' } : 'ok'));

const claimWhen = values['claim-when'];
if (claimWhen) {
  const timer = setInterval(() => {
    if (!existsSync(claimWhen)) return;
    clearInterval(timer);
    fabric.claim();
  }, 100);
  timer.unref();
}

process.stdout.write(
  `${JSON.stringify({
    ready: true,
    scenario,
    imdsUrl: fabric.imdsUrl,
    healthUrl: fabric.healthUrl,
    healthServiceUrl: fabric.healthServiceUrl,
    hostPluginUrl: fabric.hostPluginUrl,
    ports: fabric.ports,
  })}\n`,
);

const stop = () => {
  fabric.close().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`fake fabric: close failed: ${String(error)}\n`);
      process.exit(1);
    },
  );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
