import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import { FileMarkerStore } from '../../src/provision/marker.js';

const VM = '00840e55-9be2-d441-a716-446655440000';
const roots: string[] = [];
async function temp(): Promise<string> {
  const root = await mkdtemp(path.join(tmpdir(), 'marker-'));
  roots.push(root);
  return root;
}
afterEach(async () => {
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

describe('FileMarkerStore', () => {
  it('reports none when the data directory does not exist yet', async () => {
    expect(await new FileMarkerStore(path.join(await temp(), 'missing')).state(VM)).toBe('none');
  });

  it('creates the data directory 0700 and an empty 0600 report-pending marker', async () => {
    const dir = path.join(await temp(), 'var/lib/bootstate');
    const store = new FileMarkerStore(dir);
    await store.markReportPending(VM);
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    const file = await stat(path.join(dir, `${VM}.report-pending`));
    expect(file.mode & 0o777).toBe(0o600);
    expect(file.size).toBe(0);
    expect(await store.state(VM)).toBe('report-pending');
  });

  it('writes provisioned then drops the pending marker, leaving no temp files', async () => {
    const dir = await temp();
    const store = new FileMarkerStore(dir);
    await store.markReportPending(VM);
    await store.markProvisioned(VM);
    expect(await readdir(dir)).toEqual([`${VM}.provisioned`]);
    expect(await store.state(VM)).toBe('provisioned');
  });

  it('records a pool VM waiting for reuse, which report-pending and provisioned outrank, and drops it once provisioned', async () => {
    const dir = await temp();
    const store = new FileMarkerStore(dir);
    await store.markWaitingForReuse(VM);
    expect(await store.state(VM)).toBe('waiting-for-reuse');
    expect((await stat(path.join(dir, `${VM}.waiting-for-reuse`))).mode & 0o777).toBe(0o600);
    await store.markReportPending(VM);
    expect(await store.state(VM)).toBe('report-pending');
    await store.markProvisioned(VM);
    expect(await readdir(dir)).toEqual([`${VM}.provisioned`]);
    await store.markWaitingForReuse('11111111-2222-3333-4444-555555555555');
    expect(await store.clean({ logs: false, logPath: '' })).toHaveLength(2);
  });

  it("records a Savable pool VM's wait under a name of its own (how a resumed run knows its type), outranked and dropped as the others", async () => {
    const dir = await temp();
    const store = new FileMarkerStore(dir);
    await store.markWaitingForReuse(VM, 'Savable');
    expect(await readdir(dir)).toEqual([`${VM}.waiting-for-reuse-savable`]);
    expect(await store.state(VM)).toBe('waiting-for-reuse-savable');
    expect((await stat(path.join(dir, `${VM}.waiting-for-reuse-savable`))).mode & 0o777).toBe(0o600);
    // Running's marker keeps its name.
    await store.markWaitingForReuse('11111111-2222-3333-4444-555555555555', 'Running');
    expect(await store.state('11111111-2222-3333-4444-555555555555')).toBe('waiting-for-reuse');
    await store.markReportPending(VM);
    expect(await store.state(VM)).toBe('report-pending');
    await store.markProvisioned(VM);
    expect((await readdir(dir)).sort()).toEqual([`${VM}.provisioned`, '11111111-2222-3333-4444-555555555555.waiting-for-reuse']);
    await store.markWaitingForReuse('22222222-2222-3333-4444-555555555555', 'Savable');
    expect(await store.clean({ logs: false, logPath: '' })).toHaveLength(3);
  });

  it("records an OS-disk pool VM's wait for its shutdown, which the reuse marker outranks, and drops it once provisioned", async () => {
    const dir = await temp();
    const store = new FileMarkerStore(dir);
    await store.markWaitingForShutdown(VM);
    expect(await store.state(VM)).toBe('waiting-for-shutdown');
    expect((await stat(path.join(dir, `${VM}.waiting-for-shutdown`))).mode & 0o777).toBe(0o600);
    await store.markWaitingForReuse(VM);
    expect(await store.state(VM)).toBe('waiting-for-reuse');
    await store.markProvisioned(VM);
    expect(await readdir(dir)).toEqual([`${VM}.provisioned`]);
    await store.markWaitingForShutdown('11111111-2222-3333-4444-555555555555');
    expect(await store.clean({ logs: false, logPath: '' })).toHaveLength(2);
  });

  it('tidies pending and waiting markers a crash left next to provisioned, for this VM id only', async () => {
    const dir = await temp();
    const other = '11111111-2222-3333-4444-555555555555';
    for (const name of [`${VM}.provisioned`, `${VM}.report-pending`, `${VM}.waiting-for-reuse`, `${other}.report-pending`]) {
      await writeFile(path.join(dir, name), '');
    }
    expect(await new FileMarkerStore(dir).state(VM)).toBe('provisioned');
    expect((await readdir(dir)).sort()).toEqual([`${VM}.provisioned`, `${other}.report-pending`]);
  });

  it('matches an existing marker whatever the case of the vm id', async () => {
    const dir = await temp();
    await writeFile(path.join(dir, `${VM.toUpperCase()}.provisioned`), '');
    expect(await new FileMarkerStore(dir).state(VM)).toBe('provisioned');
  });

  it("counts azure-init's <vm_id>.provisioned in a peer directory, for this VM id only, and never cleans it", async () => {
    const [ours, azureInit] = [path.join(await temp(), 'bootstate'), await temp()];
    await writeFile(path.join(azureInit, `${VM}.provisioned`), '');
    const store = new FileMarkerStore(ours, [azureInit]);
    expect(await store.state(VM)).toBe('provisioned');
    expect(await store.state('11111111-2222-3333-4444-555555555555')).toBe('none');
    expect(await new FileMarkerStore(ours, [path.join(azureInit, 'missing')]).state(VM)).toBe('none');
    await store.markReportPending('11111111-2222-3333-4444-555555555555');
    await store.clean({ logs: false, logPath: '' });
    expect(await readdir(azureInit)).toEqual([`${VM}.provisioned`]);
  });

  it('finds nothing for a new vm id, so a clone provisions again', async () => {
    const store = new FileMarkerStore(await temp());
    await store.markProvisioned(VM);
    expect(await store.state('11111111-2222-3333-4444-555555555555')).toBe('none');
  });

  it('clean removes markers and, with logs, the log file; a missing log is fine', async () => {
    const dir = await temp();
    const store = new FileMarkerStore(dir);
    await store.markProvisioned(VM);
    await store.markReportPending('11111111-2222-3333-4444-555555555555');
    await writeFile(path.join(dir, 'journal.jsonl'), '');
    const log = path.join(dir, 'bootstate.log');
    await writeFile(log, 'x');
    const removed = await store.clean({ logs: true, logPath: log });
    expect(removed.sort()).toEqual([path.join(dir, '11111111-2222-3333-4444-555555555555.report-pending'), path.join(dir, `${VM}.provisioned`), log].sort());
    expect(await readdir(dir)).toEqual(['journal.jsonl']);
    expect(await store.clean({ logs: true, logPath: log })).toEqual([]);
  });

  // A waiting-for-reuse marker that cannot be read was once reported as "failed to write provisioned marker".
  it.each([
    ['a directory', (file: string) => mkdir(file)],
    ['a FIFO', async (file: string) => execFileSync('mkfifo', [file])],
    ['a symlink', (file: string) => symlink('/etc/passwd', file)],
  ])('a waiting-for-reuse marker that is %s fails as a failure to read that marker, naming it', async (_kind, plant) => {
    const dir = await temp();
    const file = path.join(dir, `${VM}.waiting-for-reuse`);
    await plant(file);
    const error = await new FileMarkerStore(dir).state(VM).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(BootstateError);
    expect((error as BootstateError).toFailure()).toMatchObject({
      code: 'MARKER_READ_FAILED',
      reason: 'failed to read marker',
      exitCode: 1,
      data: [['path', file], ['error', expect.stringContaining(file)]],
    });
  });

  it('a data directory that cannot be listed is a failure to read the markers; one that cannot be written to, to write one', async () => {
    const root = await temp();
    const notDir = path.join(root, 'data');
    await writeFile(notDir, '');
    await expect(new FileMarkerStore(notDir).state(VM)).rejects.toMatchObject({ code: 'MARKER_READ_FAILED', data: [['path', notDir], ['error', expect.stringContaining('ENOTDIR')]] });
    await expect(new FileMarkerStore(notDir).markWaitingForReuse(VM)).rejects.toMatchObject({ code: 'MARKER_FAILED', reason: 'failed to write provisioned marker' });
  });

  it('clean fails with MARKER_FAILED when the data directory is missing', async () => {
    const store = new FileMarkerStore(path.join(await temp(), 'nope'));
    await expect(store.clean({ logs: false, logPath: '' })).rejects.toMatchObject({ code: 'MARKER_FAILED' });
    await expect(store.clean({ logs: false, logPath: '' })).rejects.toBeInstanceOf(BootstateError);
  });
});
