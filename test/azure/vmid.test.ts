import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { ZERO_VM_ID } from '../../src/core/metadata.js';
import { readVmId, sameVmId, swapGen1 } from '../../src/azure/vmid.js';

const roots: string[] = [];
async function sys(uuid: string | null, options: { efi?: boolean; devEfi?: boolean } = {}): Promise<string> {
  const root = await mkdtemp(path.join(tmpdir(), 'vmid-'));
  roots.push(root);
  await mkdir(path.join(root, 'sys/class/dmi/id'), { recursive: true });
  if (uuid !== null) await writeFile(path.join(root, 'sys/class/dmi/id/product_uuid'), uuid);
  if (options.efi) await mkdir(path.join(root, 'sys/firmware/efi'), { recursive: true });
  if (options.devEfi) {
    await mkdir(path.join(root, 'dev'), { recursive: true });
    await writeFile(path.join(root, 'dev/efi'), '');
  }
  return root;
}
afterEach(async () => {
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

describe('readVmId', () => {
  it('byte-swaps the first three groups on Gen1 (the first example of docs/protocol.md#vm-id-examples)', async () => {
    const id = await readVmId({ sysRoot: await sys('550e8400-e29b-41d4-a716-446655440000\n') });
    expect(id).toEqual({ vmId: '00840e55-9be2-d441-a716-446655440000', source: 'product_uuid', generation: 1 });
  });

  it('lower-cases an upper-case uuid from an old kernel before swapping (the second example of docs/protocol.md#vm-id-examples)', async () => {
    const id = await readVmId({ sysRoot: await sys('544CDFD0-CB4E-4B4A-9954-5BDF3ED5C3B8') });
    expect(id.vmId).toBe('d0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8');
  });

  it('leaves the uuid unswapped on Gen2 when /sys/firmware/efi exists', async () => {
    const id = await readVmId({ sysRoot: await sys('550E8400-E29B-41D4-A716-446655440000', { efi: true }) });
    expect(id).toEqual({ vmId: '550e8400-e29b-41d4-a716-446655440000', source: 'product_uuid', generation: 2 });
  });

  it('treats /dev/efi as Gen2 too', async () => {
    const id = await readVmId({ sysRoot: await sys('550e8400-e29b-41d4-a716-446655440000', { devEfi: true }) });
    expect(id.generation).toBe(2);
  });

  it('reports the zero GUID as unreadable when the file is missing or empty', async () => {
    expect(await readVmId({ sysRoot: await sys(null) })).toMatchObject({ vmId: ZERO_VM_ID, source: 'unreadable' });
    expect(await readVmId({ sysRoot: await sys('  \n') })).toMatchObject({ vmId: ZERO_VM_ID, source: 'unreadable' });
  });

  it('keeps an unparsable Gen1 value as its lower-cased raw string', async () => {
    const id = await readVmId({ sysRoot: await sys('Not-A-UUID') });
    expect(id).toMatchObject({ vmId: 'not-a-uuid', source: 'product_uuid', generation: 1 });
  });
});

describe('swapGen1 and sameVmId', () => {
  const uuid = fc.uuid().map((u) => u.toLowerCase());

  it('swapping twice gives the original id back', () => {
    fc.assert(fc.property(uuid, (u) => swapGen1(swapGen1(u)) === u));
  });

  it('produces lower case whatever the case of product_uuid', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uuid(), fc.boolean(), async (u, upper) => {
        const id = await readVmId({ sysRoot: await sys(upper ? u.toUpperCase() : u) });
        return id.vmId === id.vmId.toLowerCase() && id.vmId === swapGen1(u.toLowerCase());
      }),
      { numRuns: 25 },
    );
  });

  it('compares ids ignoring case', () => {
    fc.assert(fc.property(uuid, (u) => sameVmId(u, u.toUpperCase())));
    expect(sameVmId('00840e55-9be2-d441-a716-446655440000', '550e8400-e29b-41d4-a716-446655440000')).toBe(false);
  });
});
