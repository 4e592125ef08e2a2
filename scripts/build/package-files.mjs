// The bytes of one entry of packaging/installed-files.mjs, for the package builders.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** `made` maps each `made` name to a function giving its bytes (or a promise of them). */
export async function contentOf(file, root, made) {
  if (file.text !== undefined) return file.text;
  if (file.from !== undefined) return readFileSync(join(root, file.from));
  const make = made[file.made];
  if (!make) throw new Error(`packaging/installed-files.mjs: ${file.path}: nothing makes "${file.made}" in this build`);
  return make();
}
