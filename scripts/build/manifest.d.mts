import type { Patch, Stub } from './replacements.mjs';

/** The program's stubs and patches (scripts/build/manifest.mjs). */
export const STUBS: Stub[];
export const PATCHES: Patch[];
