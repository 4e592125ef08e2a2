/**
 * The goal state's certificates against a wireserver that misbehaves, with the built agent (scratch backend) and the
 * fake fabric on loopback: 500s, a 410, a stall, a blob that does not decrypt, a bundle without the key's
 * certificate. Each ends in a precise warning (the VM is Ready with its other keys) or, when the keys named by
 * fingerprint were the only way in, a precise ProvisioningFailed — within `[certificates] total_retry_timeout_secs`.
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { decodeReport } from '../../src/azure/report.js';
import { certificatesXml, makeCertificate, sealCertificates, type FabricCertificate } from '../../src/fabric/certificates.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { ovfDocument } from '../../src/fabric/ovf-document.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { lastFailureDescription, reportKinds, runAgent } from './agent.js';

const PLACE = '[certificates]\nplace = true\ntotal_retry_timeout_secs = 3\n';
/** For the tests that are not about the deadline: a loaded machine's openssl and retries get a minute. */
const PLACE_WITH_SLACK = '[certificates]\nplace = true\ntotal_retry_timeout_secs = 60\n';
let fabric: FakeFabric;
let cert: FabricCertificate & { thumbprint: string };
let other: FabricCertificate & { thumbprint: string };

beforeAll(async () => {
  [cert, other] = await Promise.all([makeCertificate('vm-cert'), makeCertificate('other')]);
});
beforeEach(async () => {
  fabric = await startFakeFabric();
});
afterEach(async () => {
  await fabric.close();
});

/** The run's warnings as its last log line lists them. */
const warnings = (stderr: string): string[] => {
  const last = stderr.trim().split('\n').map((l) => { try { return JSON.parse(l) as Record<string, unknown>; } catch { return {}; } });
  return last.filter((l) => l.level === 40).map((l) => String(l.msg));
};

describe('the goal state misbehaving, certificates wanted for /var/lib/waagent only', () => {
  it('500s until the deadline: a warning naming the timeout and the last error, and the VM is Ready', async () => {
    fabric.setCertificates([cert]);
    fabric.setBehaviour('goalState', { status: 500, body: 'busy' });
    const run = await runAgent(fabric, { extraToml: PLACE, wireserver: { retry_interval_secs: 0.2 } });
    expect(run.code, run.stderr).toBe(0);
    expect(reportKinds(fabric)).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(fabric.requestsTo('goalState').length).toBeGreaterThan(1);
    expect(warnings(run.stderr)).toContain(
      "certificates: operation timed out (error the wireserver did not give the goal state's certificates within 3 s, last error http status error); no certificates placed",
    );
    expect(existsSync(join(run.root, 'var/lib/waagent'))).toBe(false);
  });

  it('a 410 (the goal state changed) is asked again, then the certificates land with their names and modes', async () => {
    fabric.setCertificates([cert, { certificatePem: other.certificatePem }]);
    fabric.setBehaviour('goalState', { status: 410, body: 'gone' }, 'ok');
    const run = await runAgent(fabric, { extraToml: PLACE_WITH_SLACK, wireserver: { retry_interval_secs: 0.2 } });
    expect(run.code, run.stderr).toBe(0);
    expect(fabric.requestsTo('goalState')).toHaveLength(2);
    const dir = join(run.root, 'var/lib/waagent');
    expect(readdirSync(dir).sort()).toEqual([`${cert.thumbprint}.crt`, `${cert.thumbprint}.prv`, `${other.thumbprint}.crt`].sort());
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, `${cert.thumbprint}.crt`)).mode & 0o777).toBe(0o644);
    expect(statSync(join(dir, `${cert.thumbprint}.prv`)).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, `${cert.thumbprint}.crt`), 'utf8')).toBe(cert.certificatePem);
    // The transport key's directory is gone, and no private key reached the log.
    expect(readdirSync(join(run.root, 'run')).filter((n) => n.startsWith('bootstate-transport-'))).toEqual([]);
    expect(readFileSync(join(run.root, 'var/log/bootstate.log'), 'utf8')).not.toContain('PRIVATE KEY');
    expect(run.stderr + run.stdout).not.toContain('PRIVATE KEY');
  });

  it('a goal state that stalls is abandoned at the deadline with a warning', async () => {
    fabric.setBehaviour('goalState', 'stall');
    const run = await runAgent(fabric, { extraToml: PLACE });
    expect(run.code, run.stderr).toBe(0);
    expect(warnings(run.stderr)).toContain(
      "certificates: operation timed out (error the wireserver did not give the goal state's certificates within 3 s); no certificates placed",
    );
  });

  it('a Certificates blob that does not decrypt with the transport key is a warning saying so, not retried', async () => {
    fabric.setCertificates([cert]);
    const foreign = certificatesXml(await sealCertificates(new X509Certificate(other.certificatePem).raw.toString('base64'), [cert]));
    fabric.setBehaviour('certificates', { status: 200, body: foreign, headers: { 'content-type': 'text/xml' } });
    const run = await runAgent(fabric, { extraToml: PLACE_WITH_SLACK });
    expect(run.code, run.stderr).toBe(0);
    expect(fabric.requestsTo('certificates')).toHaveLength(1);
    expect(warnings(run.stderr).find((w) => w.startsWith('certificates: failed to provision certificates (problem openssl could not decrypt the Certificates blob with the transport key'))).toBeDefined();
  });
});

describe('a SIGTERM while the Certificates request is in flight', () => {
  // The transport key's directory was removed after the abort, by then often too late: the run had exited.
  it('leaves no transport key behind, in 20 runs of 20', async () => {
    const left: string[] = [];
    for (let i = 0; i < 20; i++) {
      fabric.setCertificates([cert]);
      fabric.setBehaviour('certificates', 'stall');
      let signalled = false;
      const run = await runAgent(fabric, {
        extraToml: '[certificates]\nplace = true\ntotal_retry_timeout_secs = 60\n',
        onSpawn: (child) => {
          void fabric.waitForRequests('certificates', 1, 60_000).then(() => {
            signalled = true;
            child.kill('SIGTERM');
          });
        },
      });
      expect(signalled).toBe(true);
      expect(run.code, run.stderr).toBe(1);
      expect(existsSync(join(run.root, 'run'))).toBe(true);
      left.push(...readdirSync(join(run.root, 'run')).filter((n) => n.startsWith('bootstate-transport-')).map((n) => `run ${i + 1}: ${n}`));
      await fabric.close();
      fabric = await startFakeFabric();
    }
    expect(left).toEqual([]);
  }, 300_000);
});

describe('the keys named by fingerprint being the only way in (a claimed pool VM whose document names only them)', () => {
  const claim = (fingerprint: string) => {
    const customer = exampleImdsDocument();
    Object.assign(customer.compute.osProfile, { adminUsername: 'customer', computerName: 'customer-vm', disablePasswordAuthentication: 'true' });
    customer.compute.publicKeys = [];
    fabric.setPreprovisioned({
      type: 'Running',
      claimAtPoll: 1,
      customerDocument: customer,
      customerOvf: ovfDocument({ username: 'customer', hostname: 'customer-vm', keyFingerprints: [fingerprint] }),
    });
  };
  const failure = () => new Map(decodeReport(lastFailureDescription(fabric)!));

  it('500s until the deadline: ProvisioningFailed "operation timed out" with the last error', async () => {
    claim(cert.thumbprint);
    fabric.setCertificates([cert]);
    fabric.setBehaviour('goalState', { status: 500, body: 'busy' });
    const run = await runAgent(fabric, { extraToml: '[certificates]\ntotal_retry_timeout_secs = 3\n', wireserver: { retry_interval_secs: 0.2 } });
    expect(run.code).toBe(1);
    expect(reportKinds(fabric).at(-1)).toBe('NotReady/ProvisioningFailed');
    expect(failure().get('reason')).toBe('operation timed out');
    expect(failure().get('last_error')).toBe('http status error');
  });

  it('a bundle without the fingerprint\'s certificate: ProvisioningFailed "invalid ssh public key" naming it', async () => {
    claim(cert.thumbprint);
    fabric.setCertificates([other]);
    const run = await runAgent(fabric);
    expect(run.code).toBe(78);
    expect(failure().get('reason')).toBe('invalid ssh public key');
    expect(failure().get('key_1')).toBe(cert.thumbprint);
    expect(failure().get('key_1_problem')).toBe(`no certificate with thumbprint ${cert.thumbprint} in the goal state`);
  });

  it('with its certificate: the key lands in the customer\'s authorized_keys and the VM is Ready', async () => {
    claim(cert.thumbprint);
    fabric.setCertificates([cert]);
    const run = await runAgent(fabric);
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(join(run.root, 'home/customer/.ssh/authorized_keys'), 'utf8')).toMatch(/^ssh-rsa AAAA/m);
  });
});
