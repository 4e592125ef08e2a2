/**
 * Keys and certificates from the wireserver's goal state, on real first boots in namespaces: the media names the
 * admin's key only by its certificate's thumbprint, the fake fabric envelopes a PKCS#12 bundle to the transport
 * certificate the agent sent (real openssl on both sides), and a real sshd then lets the admin in with that key.
 */
import { existsSync } from 'node:fs';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCertificate, type FabricCertificate } from '../../src/fabric/certificates.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { ovfDocument } from '../../src/fabric/ovf-document.js';
import { lastFailure, vmFile, withMedia, withVm, type BootResult, type Vm } from './boot.js';
import { assertNamespaces, canSandbox, runInSandbox } from './ns.js';

const PREFIX = `bs-cert-${process.pid}`;
const LOOP = existsSync('/dev/loop-control');
const vms: Vm[] = [];
type Cert = FabricCertificate & { thumbprint: string };
type Booted = { vm: Vm; boot: BootResult; login?: { exitCode: number | null; stdout: string; stderr: string } };
const cases: Record<string, Promise<Booted>> = {};
let owner: Cert;
let app: Cert;

/** IMDS naming no key, with password logins off: the key named by fingerprint is the only way in. */
function imdsWithoutKeys(): Record<string, any> {
  const doc = exampleImdsDocument();
  doc.compute.publicKeys = [];
  doc.compute.osProfile.disablePasswordAuthentication = 'true';
  return doc;
}

/** A real sshd on the VM's loopback, and one `ssh -i` login with the owner's private key: the name it logs in as. */
const LOGIN = `
mkdir -p /run/sshd && chmod 0755 /run/sshd
/usr/sbin/sshd -p 2222 -o ListenAddress=127.0.0.1 -o PidFile=/run/e2e-sshd.pid -E /run/e2e-sshd.log || exit 90
i=0; while [ ! -s /run/e2e-sshd.pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
ssh -F /dev/null -i /run/owner.key -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \\
  -o ConnectTimeout=30 -o LogLevel=VERBOSE -p 2222 azureuser@127.0.0.1 id -un; rc=$?
kill "$(cat /run/e2e-sshd.pid)"; cat /run/e2e-sshd.log >&2; exit $rc
`;

function bootWith(name: string, options: { imds?: unknown; certificates: Cert[]; ovf: Parameters<typeof ovfDocument>[0]; login?: boolean }): Promise<Booted> {
  const pem = options.certificates.map((c) => c.certificatePem + (c.privateKeyPem ?? '')).join('');
  return withVm(vms, `${PREFIX}-${name}`, { generation: 2, imdsDocument: options.imds, certificates: pem }, async (vm) =>
    withMedia(vm, ovfDocument(options.ovf), async () => {
      const boot = await vm.boot();
      if (!options.login) return { vm, boot };
      await writeFile(vm.sandbox.hostPath('/run/owner.key'), owner.privateKeyPem!, { mode: 0o600 });
      const login = await runInSandbox(vm.sandbox, ['sh', '-c', LOGIN], { netns: vm.netns.name, timeoutMs: 90_000 });
      return { vm, boot, login };
    }),
  );
}

const mode = async (vm: Vm, p: string) => {
  const s = await stat(vm.sandbox.hostPath(p));
  return { mode: (s.mode & 0o777).toString(8), uid: s.uid };
};

describe.skipIf(!canSandbox)('keys and certificates from the goal state', { timeout: 300_000 }, () => {
  beforeAll(async () => {
    assertNamespaces();
    if (!LOOP) throw new Error('no loop devices (/dev/loop-control): these tests attach the provisioning media as one');
    [owner, app] = await Promise.all([makeCertificate('owner-ssh-key'), makeCertificate('app-certificate', 'ec:P-256')]);
    const base = { username: 'azureuser', hostname: 'cert-vm', disableSshPasswordAuthentication: true };
    // One after the other: a boot makes an RSA-3072 transport key, and the machine is shared.
    cases.login = bootWith('login', {
      imds: imdsWithoutKeys(),
      certificates: [owner, { ...app, privateKeyPem: undefined }],
      ovf: { ...base, keyFingerprints: [owner.thumbprint], keyPairs: [{ fingerprint: owner.thumbprint, path: '$HOME/azureuser/.ssh/id_rsa' }] },
      login: true,
    });
    await cases.login.catch(() => undefined);
    cases.missingOnly = bootWith('missing', { imds: imdsWithoutKeys(), certificates: [app], ovf: { ...base, keyFingerprints: [owner.thumbprint] } });
    await cases.missingOnly.catch(() => undefined);
    cases.missingBeside = bootWith('beside', { certificates: [app], ovf: { ...base, keyFingerprints: [owner.thumbprint] } });
    await cases.missingBeside.catch(() => undefined);
  });

  afterAll(async () => {
    await Promise.allSettled(Object.values(cases));
    await Promise.allSettled(vms.map((vm) => vm.sandbox.cleanup()));
  });

  it('installs the key named only by fingerprint, and a real sshd lets the admin in with its private key', async () => {
    const { vm, boot, login } = await cases.login!;
    expect(boot.exitCode, boot.stderr).toBe(0);
    expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready']);
    const keys = await vmFile(vm, '/home/azureuser/.ssh/authorized_keys');
    expect(keys).toMatch(/^ssh-rsa AAAA\S+$/m);
    expect(login!.stdout.trim(), login!.stderr).toBe('azureuser');
    expect(login!.exitCode).toBe(0);
    const requests = await vm.requests();
    const certificates = requests.filter((r) => r.route === 'certificates');
    expect(certificates).toHaveLength(1);
    expect(certificates[0]!.headers['x-ms-cipher-name']).toBe('DES_EDE3_CBC');
    expect(requests.find((r) => r.route === 'goalState')!.headers['x-ms-version']).toBe('2012-11-30');
    // The transport key lived in a private directory under /run and is gone.
    expect((await runInSandbox(vm.sandbox, ['sh', '-c', 'ls -d /run/bootstate-transport-* 2>/dev/null | wc -l'])).stdout.trim()).toBe('0');
  });

  it('installs the KeyPairs private key at its path, 0600 and the user\'s, with its public key beside it', async () => {
    const { vm } = await cases.login!;
    const user = (await vmFile(vm, '/etc/passwd')).split('\n').find((l) => l.startsWith('azureuser:'))!.split(':');
    expect(await mode(vm, '/home/azureuser/.ssh/id_rsa')).toEqual({ mode: '600', uid: Number(user[2]) });
    expect(await mode(vm, '/home/azureuser/.ssh/id_rsa.pub')).toEqual({ mode: '644', uid: Number(user[2]) });
    expect(await vmFile(vm, '/home/azureuser/.ssh/id_rsa')).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    const authorized = (await vmFile(vm, '/home/azureuser/.ssh/authorized_keys')).trim();
    expect((await vmFile(vm, '/home/azureuser/.ssh/id_rsa.pub')).trim()).toBe(authorized);
  });

  it('leaves every certificate in /var/lib/waagent as <THUMBPRINT>.crt (0644) and its key as .prv (0600), root\'s', async () => {
    const { vm, boot } = await cases.login!;
    expect(await mode(vm, '/var/lib/waagent')).toEqual({ mode: '700', uid: 0 });
    expect(await mode(vm, `/var/lib/waagent/${owner.thumbprint}.crt`)).toEqual({ mode: '644', uid: 0 });
    expect(await mode(vm, `/var/lib/waagent/${owner.thumbprint}.prv`)).toEqual({ mode: '600', uid: 0 });
    expect(await mode(vm, `/var/lib/waagent/${app.thumbprint}.crt`)).toEqual({ mode: '644', uid: 0 });
    expect(existsSync(vm.sandbox.hostPath(`/var/lib/waagent/${app.thumbprint}.prv`))).toBe(false);
    expect(await vmFile(vm, `/var/lib/waagent/${owner.thumbprint}.crt`)).toBe(owner.certificatePem);
    // No private key reaches the log, stdout or the arguments of any command.
    const log = await readFile(vm.sandbox.hostPath('/var/log/bootstate.log'), 'utf8');
    for (const text of [log, boot.stdout, boot.stderr, JSON.stringify(await vm.commands())]) expect(text).not.toContain('PRIVATE KEY');
  });

  it('a fingerprint without its certificate, with no other key and password logins off, is ProvisioningFailed naming it', async () => {
    const { vm, boot } = await cases.missingOnly!;
    expect(boot.exitCode).toBe(78);
    expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'NotReady/ProvisioningFailed']);
    const failure = await lastFailure(vm);
    expect(failure.get('reason')).toBe('invalid ssh public key');
    expect(failure.get('key_1')).toBe(owner.thumbprint);
    expect(failure.get('key_1_problem')).toBe(`no certificate with thumbprint ${owner.thumbprint} in the goal state`);
  });

  it('a fingerprint without its certificate beside a usable key is a warning naming it, and the VM is Ready', async () => {
    const { vm, boot } = await cases.missingBeside!;
    expect(boot.exitCode, boot.stderr).toBe(0);
    expect(await vm.reportKinds()).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(boot.stderr).toContain(`ssh key ${owner.thumbprint} skipped: no certificate with thumbprint ${owner.thumbprint} in the goal state`);
    expect(await vmFile(vm, `/var/lib/waagent/${app.thumbprint}.crt`)).toBe(app.certificatePem);
  });
});
