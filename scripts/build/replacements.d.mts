/** The manifest's types and its esbuild plugin (scripts/build/replacements.mjs, scripts/build/manifest.mjs). */
import type { Plugin } from 'esbuild';

export interface Stub {
  name: string;
  why: string;
  replaces: Array<{ importer?: string; specifier: string | RegExp }>;
  with?: string;
  contents?: string;
}

export interface Patch {
  name: string;
  why: string;
  file: string;
  search: string;
  replace: string;
  count?: number;
}

export function replacements(manifest: { stubs: Stub[]; patches: Patch[] }, stubDir: string): { plugin: Plugin; check(): void };
