/**
 * The unit names of the temporary disk's mount and swap units: systemd's own path escaping (`systemd-escape --path`),
 * or systemd refuses a mount unit whose name does not match its Where=.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { run } from '../../src/system/exec.js';
import { escapePath, mountUnitName, swapUnitName } from '../../src/resource-disk/units.js';

describe('escapePath', () => {
  it('names the usual mount points as systemd does', () => {
    expect(mountUnitName('/mnt')).toBe('mnt.mount');
    expect(mountUnitName('/mnt/resource')).toBe('mnt-resource.mount');
    expect(swapUnitName('/mnt/resource/swapfile')).toBe('mnt-resource-swapfile.swap');
    expect(escapePath('/tmp/bootstate-x/mnt.d')).toBe('tmp-bootstate\\x2dx-mnt.d');
  });

  it('agrees with systemd-escape --path on any path a mount_point may be', async () => {
    const segment = fc.stringMatching(/^[A-Za-z0-9_.-]{1,12}$/).filter((s) => s !== '.' && s !== '..');
    const paths = fc.sample(fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => `/${parts.join('/')}`), 200);
    const ours = paths.map(escapePath);
    const systemd = (await run(['systemd-escape', '--path', ...paths])).stdout.trim().split(/\s+/);
    expect(ours).toEqual(systemd);
  });
});
