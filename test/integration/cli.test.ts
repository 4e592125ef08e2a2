/**
 * The built agent against a fake fabric on loopback: retries, deadlines, final reports and exit codes.
 */
import { mkdirSync, mkdtempSync, readdirSync, watch } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { decodeReport } from '../../src/azure/report.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { readVmId } from '../../src/azure/vmid.js';
import { lastFailureDescription, markers, reportKinds, runAgent } from './agent.js';

let fabric: FakeFabric;
beforeEach(async () => {
  fabric = await startFakeFabric();
});
afterEach(async () => {
  await fabric.close();
});

const field = (description: string | undefined, key: string) =>
  description ? decodeReport(description).find(([k]) => k === key)?.[1] : undefined;

/** Lets only the Ready report follow a script; InProgress is always accepted. */
function readyScript(...statuses: Array<number | 'stall'>) {
  let i = 0;
  fabric.setWireserver((request) => {
    if (!request.body.includes('"Ready"')) return 'ok';
    const next = statuses[Math.min(i++, statuses.length - 1)]!;
    return next === 'stall' ? 'stall' : { status: next };
  });
}

describe('the agent against a healthy fabric', () => {
  it('provisions, reports InProgress then Ready, writes the marker and exits 0', async () => {
    const run = await runAgent(fabric);
    expect(run.code).toBe(0);
    expect(reportKinds(fabric)).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(markers(run.root)).toEqual([expect.stringMatching(/\.provisioned$/)]);
  });

  it('reports nothing and exits 0 on the second boot of the same VM', async () => {
    const first = await runAgent(fabric);
    fabric.requests.length = 0;
    fabric.reports.length = 0;
    const second = await runAgent(fabric, { root: first.root });
    expect(second.code).toBe(0);
    expect(fabric.requests).toEqual([]);
  });
});

describe('the markers', () => {
  // Not "failed to write provisioned marker", as it once was reported.
  it('a waiting-for-reuse marker that cannot be read fails the run as a failure to read that marker, before any report but the failure', async () => {
    const root = mkdtempSync(join(tmpdir(), 'bootstate-it-'));
    // A scratch run reads this machine's VM id.
    const { vmId } = await readVmId();
    const marker = join(root, 'var/lib/bootstate', `${vmId}.waiting-for-reuse`);
    mkdirSync(marker, { recursive: true });
    const run = await runAgent(fabric, { root });
    expect(run.code, run.stderr).toBe(1);
    expect(reportKinds(fabric)).toEqual(['NotReady/ProvisioningFailed']);
    expect(field(lastFailureDescription(fabric), 'reason')).toBe('failed to read marker');
    expect(field(lastFailureDescription(fabric), 'path')).toBe(marker);
  });
});

describe('IMDS faults', () => {
  it('retries 500 and 404 and then provisions', async () => {
    fabric.setImds({ status: 500 }, { status: 404 }, 'ok');
    const run = await runAgent(fabric);
    expect(run.code).toBe(0);
    expect(fabric.requestsTo('imds')).toHaveLength(3);
    expect(reportKinds(fabric).at(-1)).toBe('Ready');
  });

  // A body cut short with valid framing is damage in transit, not IMDS's answer: asked again, as azure-init does.
  it('asks again after 200s whose bodies were cut short (valid framing), and provisions from the whole one', async () => {
    fabric.setImds('truncated-body', { status: 200, body: '{"compute": {"osProfile": ' }, 'truncated-body', 'ok');
    const run = await runAgent(fabric);
    expect(run.code, run.stderr).toBe(0);
    expect(fabric.requestsTo('imds')).toHaveLength(4);
    expect(reportKinds(fabric)).toEqual(['NotReady/Provisioning', 'Ready']);
  });

  it('asks again within the IMDS budget while every body is cut short, then fails naming the parse error, with no media', async () => {
    fabric.setImds('truncated-body');
    const run = await runAgent(fabric, { imds: { total_retry_timeout_secs: 2 } });
    expect(run.code).toBe(1);
    const description = lastFailureDescription(fabric);
    expect(field(description, 'reason')).toBe('operation timed out');
    expect(field(description, 'last_error')).toBe('error parsing IMDS metadata');
    const imds = fabric.requestsTo('imds');
    expect(imds.length).toBeGreaterThan(3);
    // Paced by retry_interval_secs (0.1 s here), and ended by the total deadline, not by the first garbled body.
    const failed = fabric.requestsTo('health').at(-1)!.receivedAt;
    expect(failed - imds[0]!.receivedAt).toBeGreaterThanOrEqual(2000 - 100);
  });

  it('fails at once, naming the key, on a well-formed document with a wrong type, without asking again', async () => {
    const doc = exampleImdsDocument();
    doc.compute.osProfile.computerName = 42;
    fabric.setImds({ status: 200, body: doc }, 'ok');
    const run = await runAgent(fabric);
    expect(run.code).toBe(78);
    expect(fabric.requestsTo('imds')).toHaveLength(1);
    const description = lastFailureDescription(fabric);
    expect(field(description, 'reason')).toBe('invalid IMDS metadata');
    expect(field(description, 'key')).toBe('compute.osProfile.computerName');
  });

  it('gives up on a stalled IMDS at the total deadline, within a second', async () => {
    fabric.setImds('stall');
    const run = await runAgent(fabric, { imds: { total_retry_timeout_secs: 2, request_timeout_secs: 60 } });
    expect(run.code).toBe(1);
    expect(reportKinds(fabric).at(-1)).toBe('NotReady/ProvisioningFailed');
    expect(field(lastFailureDescription(fabric), 'reason')).toBe('operation timed out');
    const first = fabric.requestsTo('imds')[0]!.receivedAt;
    const failed = fabric.requestsTo('health').at(-1)!.receivedAt;
    expect(failed - first).toBeGreaterThanOrEqual(2000 - 100);
    expect(failed - first).toBeLessThan(2000 + 1000);
  });

  it('gives up on an IMDS that always answers 503, naming the last error', async () => {
    fabric.setImds({ status: 503 });
    const run = await runAgent(fabric, { imds: { total_retry_timeout_secs: 1.5 } });
    expect(run.code).toBe(1);
    const description = lastFailureDescription(fabric);
    expect(field(description, 'reason')).toBe('operation timed out');
    expect(field(description, 'last_error')).toBe('http status error');
    expect(fabric.requestsTo('imds').length).toBeGreaterThan(3);
  });

  it('fails at once on a non-retryable status and reports the endpoint and status', async () => {
    fabric.setImds({ status: 403 });
    const run = await runAgent(fabric);
    expect(run.code).toBe(1);
    expect(fabric.requestsTo('imds')).toHaveLength(1);
    const description = lastFailureDescription(fabric);
    expect(field(description, 'reason')).toBe('http status error');
    expect(field(description, 'status')).toBe('403');
  });

  it('rejects a hostile username from metadata with exit 78 and the value escaped', async () => {
    const doc = structuredClone((await (await fetch(fabric.imdsUrl, { headers: { Metadata: 'true' } })).json()) as any);
    doc.compute.osProfile.adminUsername = '-oops;rm\n';
    fabric.setImdsDocument(doc);
    const run = await runAgent(fabric);
    expect(run.code).toBe(78);
    const description = lastFailureDescription(fabric)!;
    expect(field(description, 'reason')).toBe('invalid username');
    expect(description).toContain('-oops;rm\\x0a');
    expect(markers(run.root)).toEqual([]);
  });
});

describe('wireserver faults', () => {
  it('retries 429 three times and then has Ready accepted', async () => {
    readyScript(429, 429, 429, 200);
    const run = await runAgent(fabric);
    expect(run.code).toBe(0);
    expect(reportKinds(fabric).filter((k) => k === 'Ready')).toHaveLength(4);
    expect(markers(run.root)).toEqual([expect.stringMatching(/\.provisioned$/)]);
  });

  it('keeps Ready pending on a 403 and reports it on the next boot without provisioning again', async () => {
    readyScript(403);
    const first = await runAgent(fabric);
    expect(first.code).toBe(1);
    expect(markers(first.root)).toEqual([expect.stringMatching(/\.report-pending$/)]);
    readyScript(200);
    fabric.requests.length = 0;
    fabric.reports.length = 0;
    const second = await runAgent(fabric, { root: first.root });
    expect(second.code).toBe(0);
    expect(reportKinds(fabric)).toEqual(['Ready']);
    expect(fabric.requestsTo('imds')).toEqual([]);
    expect(markers(first.root)).toEqual([expect.stringMatching(/\.provisioned$/)]);
  });

  it('gives up on a stalled wireserver at the report deadline, within a second', async () => {
    readyScript('stall');
    const run = await runAgent(fabric, { wireserver: { total_retry_timeout_secs: 2, read_timeout_secs: 60 } });
    expect(run.code).toBe(1);
    const readyPosts = fabric.requestsTo('health').filter((r) => r.body.includes('"Ready"'));
    expect(readyPosts).toHaveLength(1);
    expect(run.ms).toBeLessThan(2000 + 1000 + 1500);
    expect(markers(run.root)).toEqual([expect.stringMatching(/\.report-pending$/)]);
  });
});

describe('signals', () => {
  it.each(['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'] as const)('reports ProvisioningFailed with reason terminated within 2 s of %s', async (signal) => {
    fabric.setImds('stall');
    let killedAt = 0;
    const run = await runAgent(fabric, {
      imds: { total_retry_timeout_secs: 60 },
      onSpawn: (child) => {
        void fabric.waitForRequests('imds', 1, 10_000).then(() => {
          killedAt = performance.now();
          child.kill(signal);
        });
      },
    });
    expect(run.code).toBe(1);
    expect(field(lastFailureDescription(fabric), 'reason')).toBe('terminated');
    expect(performance.now() - killedAt).toBeLessThan(2000);
  });
});

describe('a signal while user data is being saved', () => {
  // A SIGTERM soon after start once left the decoded user data in a temp file in the data directory.
  it('leaves no temp file in the data directory: the run reports terminated and the half-written copy is gone', async () => {
    const doc = exampleImdsDocument();
    doc.compute.userData = Buffer.alloc(16 << 20, 0x61).toString('base64');
    fabric.setImdsDocument(doc);
    const root = mkdtempSync(join(tmpdir(), 'bootstate-it-'));
    const data = join(root, 'var/lib/bootstate');
    mkdirSync(data, { recursive: true });
    let signalled = false;
    const run = await runAgent(fabric, {
      root,
      imds: { max_body_bytes: 64 * 1024 * 1024 },
      onSpawn: (child) => {
        // SIGTERM the moment the temp copy of UserData appears, while its 16 MiB are being written.
        const watcher = watch(data, (_event, name) => {
          if (!signalled && name?.startsWith('.UserData.') && name.endsWith('.tmp')) {
            signalled = true;
            child.kill('SIGTERM');
            watcher.close();
          }
        });
        child.on('exit', () => watcher.close());
      },
    });
    expect(signalled).toBe(true);
    expect(run.code, run.stderr).toBe(1);
    expect(field(lastFailureDescription(fabric), 'reason')).toBe('terminated');
    expect(readdirSync(data).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });
});

describe('a single instance', () => {
  it('lets only one of two agents started on the same machine provision; the other exits with a clear message', async () => {
    let release!: () => void;
    fabric.setImds({ gate: new Promise<void>((r) => (release = r)) });
    const root = mkdtempSync(join(tmpdir(), 'bootstate-it-'));
    const first = runAgent(fabric, { root, imds: { total_retry_timeout_secs: 20 } });
    await fabric.waitForRequests('imds', 1, 10_000);
    const second = await runAgent(fabric, { root });
    release();
    const done = await first;
    expect(second.code).toBe(1);
    expect(second.stderr).toContain('another bootstate is already provisioning this machine');
    expect(done.code).toBe(0);
    expect(fabric.requestsTo('imds')).toHaveLength(1);
  });

  it('still lets only one provision when the data directory cannot hold the lock: the lock moves to the runtime directory', async () => {
    let release!: () => void;
    fabric.setImds({ gate: new Promise<void>((r) => (release = r)) });
    const root = mkdtempSync(join(tmpdir(), 'bootstate-it-'));
    // A directory planted where the lock file belongs: the data directory cannot hold the lock.
    mkdirSync(join(root, 'var/lib/bootstate/bootstate.lock'), { recursive: true });
    const first = runAgent(fabric, { root, imds: { total_retry_timeout_secs: 20 } });
    await fabric.waitForRequests('imds', 1, 10_000);
    const second = await runAgent(fabric, { root });
    release();
    await first;
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`another bootstate is already provisioning this machine (it holds ${join(root, 'run/bootstate/bootstate.lock')})`);
    expect(fabric.requestsTo('imds')).toHaveLength(1);
  });
});

describe('live inspection', () => {
  it('provisions and exits promptly when the inspector it was pointed at is unreachable', async () => {
    const { createServer } = await import('node:net');
    const probe = createServer();
    await new Promise<void>((done) => probe.listen(0, '127.0.0.1', done));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((done) => probe.close(() => done()));
    const run = await runAgent(fabric, { args: ['--inspect', `ws://127.0.0.1:${port}`] });
    expect(run.code).toBe(0);
    expect(reportKinds(fabric)).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(run.ms).toBeLessThan(10_000);
    expect(run.stderr.match(/inspector at ws:\/\/127\.0\.0\.1:\d+ cannot be reached/g)).toHaveLength(1);
  });

  it('provisions with one warning when the inspector URL is not a WebSocket URL', async () => {
    fabric.reports.length = 0;
    const run = await runAgent(fabric, { args: ['--inspect', 'http:/nowhere'] });
    expect(run.code).toBe(0);
    expect(reportKinds(fabric)).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(run.stderr.match(/inspector URL http:\/nowhere is unusable/g)).toHaveLength(1);
  });
});

describe('a dry run with a broken configuration', () => {
  it('stops with exit 78 and the file and key, instead of falling back to the real fabric and /var', async () => {
    // Broken among the keys a run reads again alone (where its state is and where it reports): the defaults remain.
    const run = await runAgent(fabric, { extraToml: '[journal]\nkeep = "many"\n[platform]\ncheck = "yes"\n' });
    expect(run.code).toBe(78);
    expect(run.stderr).toContain('bootstate.toml');
    expect(run.stderr).toContain('keep');
    expect(run.stderr).toContain('dry run not started');
    expect(fabric.requests).toEqual([]);
  });
});

describe('a hung OS step', () => {
  it('reports operation timed out at the OS deadline when a step hangs', async () => {
    const { execFileSync } = await import('node:child_process');
    const { mkdirSync } = await import('node:fs');
    const root = mkdtempSync(join(tmpdir(), 'bootstate-it-'));
    mkdirSync(join(root, 'etc/ssh'), { recursive: true });
    execFileSync('mkfifo', [join(root, 'etc/ssh/sshd_config')]); // nobody ever writes: reading it blocks
    const run = await runAgent(fabric, {
      root,
      extraToml: '[os]\ntimeout_secs = 1\n',
      // A read blocked on a FIFO holds a libuv thread that no abort can free, and Node waits for it at exit; the
      // report is what the deadline guarantees, so the test ends the process once the report is in.
      onSpawn: (child) => {
        void fabric.waitForRequests('health', 2, 10_000).then(() => setTimeout(() => child.kill('SIGKILL'), 500));
      },
    });
    expect([1, null]).toContain(run.code);
    const description = lastFailureDescription(fabric);
    expect(field(description, 'reason')).toBe('operation timed out');
    expect(field(description, 'phase')).toBe('OS configuration');
    const fetched = fabric.requestsTo('imds')[0]!.receivedAt;
    const failed = fabric.requestsTo('health').at(-1)!.receivedAt;
    expect(failed - fetched).toBeLessThan(1000 + 1000);
    expect(markers(root)).toEqual([]);
  });
});
