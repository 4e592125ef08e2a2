/**
 * A pool VM's network actors (src/provision/pool-nics.ts) stopped by the chart — a deadline, a TERMINATE, the claim
 * leaving the wait — stop their commands with them: no `ifdown`/`ifup` or `ip` goes on changing a NIC after the state
 * that asked for it is gone. The stack's tools are stand-ins on PATH that record their pid and sleep.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import pino from 'pino';
import { createActor } from 'xstate';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, type Config } from '../../src/config/defaults.js';
import { poolNicActors } from '../../src/provision/pool-nics.js';

let dir: string;
let savedPath: string | undefined;

/** A stand-in for `name` that writes its pid to `<dir>/<name>.pid` and sleeps 30 s. */
function sleeper(name: string): void {
  const file = join(dir, name);
  writeFileSync(file, `#!/bin/sh\necho $$ > ${join(dir, `${name}.pid`)}\nexec sleep 30\n`);
  chmodSync(file, 0o755);
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function pidOf(name: string): Promise<number> {
  const file = join(dir, `${name}.pid`);
  for (let i = 0; i < 200 && !existsSync(file); i++) await new Promise((r) => setTimeout(r, 25));
  // The shell writes its pid, then execs sleep under the same pid.
  await new Promise((r) => setTimeout(r, 50));
  return Number(readFileSync(file, 'utf8').trim());
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'bootstate-pool-nics-'));
  savedPath = process.env.PATH;
  process.env.PATH = `${dir}:${process.env.PATH}`;
});

afterEach(() => {
  process.env.PATH = savedPath;
  rmSync(dir, { recursive: true, force: true });
});

const ifupdown: Config = { ...DEFAULT_CONFIG, network: { ...DEFAULT_CONFIG.network, stack: 'ifupdown' } };
const actors = () => poolNicActors({ log: pino({ level: 'silent' }) });

describe('a pool NIC actor stopped by the chart', () => {
  it('renewLease: ifdown is killed at once, and the actor ends', async () => {
    sleeper('ifdown');
    const actor = createActor(actors().renewLease, { input: { config: ifupdown, nic: 'eth0' } }).start();
    actor.subscribe({ error: () => undefined });
    const pid = await pidOf('ifdown');
    expect(alive(pid)).toBe(true);
    actor.stop();
    for (let i = 0; i < 40 && alive(pid); i++) await new Promise((r) => setTimeout(r, 50));
    expect(alive(pid), 'ifdown still runs after the actor was stopped').toBe(false);
  });

  it('probePrimaryNic: `ip link set up` is killed at once', async () => {
    sleeper('ip');
    const actor = createActor(actors().probePrimaryNic, { input: { config: ifupdown, nic: { name: 'eth1', mac: '00:0d:3a:00:00:01' } } }).start();
    actor.subscribe({ error: () => undefined });
    const pid = await pidOf('ip');
    expect(alive(pid)).toBe(true);
    actor.stop();
    for (let i = 0; i < 40 && alive(pid); i++) await new Promise((r) => setTimeout(r, 50));
    expect(alive(pid), 'ip still runs after the actor was stopped').toBe(false);
  });
});

describe('a NIC ruled out by the probe', () => {
  it('is logged with why (the chart goes on to the next NIC without a word)', async () => {
    const file = join(dir, 'ip');
    writeFileSync(file, '#!/bin/sh\necho "Cannot find device \\"eth9\\"" >&2\nexit 1\n');
    chmodSync(file, 0o755);
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const actor = createActor(poolNicActors({ log }).probePrimaryNic, { input: { config: ifupdown, nic: { name: 'eth9', mac: '00:0d:3a:00:00:09' } } });
    const ended = new Promise<unknown>((resolve) => actor.subscribe({ error: resolve, complete: () => resolve(null) }));
    actor.start();
    expect(await ended).toMatchObject({ code: 'PPS_NIC_FAILED' });
    const said = lines.map((line) => JSON.parse(line) as { msg: string }).map((line) => line.msg);
    expect(said.join('\n')).toMatch(/eth9 is not the primary network interface: ip link set dev eth9 up exited with 1: Cannot find device "eth9"/);
  });
});

describe("the probe's question to IMDS", () => {
  it('is asked again when the first goes unanswered (the new network not yet programmed), within its bound', async () => {
    // `ip` as the OS would answer for a NIC that is up, has its lease and the route to IMDS.
    const file = join(dir, 'ip');
    writeFileSync(
      file,
      [
        '#!/bin/sh',
        'case "$*" in',
        '  *monitor*) exec sleep 30 ;;',
        '  *"addr show"*) echo "3: eth9    inet 10.9.0.5/24 brd 10.9.0.255 scope global eth9"; exit 0 ;;',
        '  *"route get"*) echo "127.0.0.1 dev eth9 src 10.9.0.5 uid 0"; exit 0 ;;',
        '  *) exit 0 ;;',
        'esac',
        '',
      ].join('\n'),
    );
    chmodSync(file, 0o755);
    let asked = 0;
    const server = createServer((req, res) => {
      asked += 1;
      // The first question is lost on the way (the fabric is not behind the NIC yet); the next is answered.
      if (asked === 1) req.socket.destroy();
      else res.end('{}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      const config: Config = { ...DEFAULT_CONFIG, network: { ...DEFAULT_CONFIG.network, stack: 'networkd' }, imds: { ...DEFAULT_CONFIG.imds, endpoint: `http://127.0.0.1:${port}/metadata/instance` } };
      const actor = createActor(actors().probePrimaryNic, { input: { config, nic: { name: 'eth9', mac: '00:0d:3a:00:00:09' } } });
      const ended = new Promise<unknown>((resolve) => actor.subscribe({ error: (error) => resolve(error), complete: () => resolve('primary') }));
      actor.start();
      expect(await ended).toBe('primary');
      expect(asked).toBe(2);
    } finally {
      server.close();
    }
  }, 30_000);
});

