/**
 * Files the built program carries beside its scripts (dist/, or the single executable's assets) and reads as bytes:
 * the flock addon, undici's HTTP parser. scripts/build/bundle.mjs defines `__BOOTSTATE_BUNDLED__` and leaves
 * `require('bootstate-asset:<name>')` to the loader; run from source (tsx, vitest) there are none.
 */
declare const __BOOTSTATE_BUNDLED__: boolean | undefined;

/** Whether this code runs from the build (scripts/build/bundle.mjs) rather than from source. */
export const bundled = typeof __BOOTSTATE_BUNDLED__ !== 'undefined';

/** The asset's bytes; null when not running from the build, or when the build has no such file. */
export function bundledAsset(name: string): Buffer | null {
  if (!bundled) return null;
  try {
    // A synchronous load of a computed name that only the loader (scripts/build/loader.cjs) answers: ESM has no such form.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(`bootstate-asset:${name}`) as Buffer;
  } catch {
    return null;
  }
}
