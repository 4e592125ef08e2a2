/**
 * `bootstate demo` (what `npm start` runs): a whole first boot against the embedded fabric, changing nothing on
 * this machine; with `--monitor` it also runs `monitor --once` against the same fabric and prints its summary.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { AGENT } from './agent.js';

it('provisions, prints the exact commands and files, then measures and posts every monitor signal', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'bootstate-demo-test-'));
  const { stdout } = await promisify(execFile)(process.execPath, [AGENT, 'demo', '--dir', dir, '--monitor'], { timeout: 60_000 });
  expect(stdout).toContain('result: provisioned, exit code 0');
  expect(stdout).toContain('reports received by the fabric: NotReady/Provisioning, Ready');
  expect(stdout).toMatch(/^ {2}hostnamectl set-hostname \S+$/m);
  expect(stdout).toMatch(/^ {2}useradd .* --comment 'created by bootstate from provisioning metadata' azureuser$/m);
  expect(stdout).toMatch(/^ {2}0600 {2}home\/azureuser\/\.ssh\/authorized_keys$/m);
  for (const name of ['GuestAgentPluginHeartbeat', 'GuestAgentPluginVersions', 'InstanceMetadataHeartbeat']) {
    expect(stdout).toMatch(new RegExp(`^ {4}${name} +ok +.*posted healthy \\(HTTP 200\\)$`, 'm'));
  }
  expect(stdout).toContain('0 check(s) failed, 0 post(s) failed');
});
