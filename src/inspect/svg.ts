/**
 * DOT → SVG through Graphviz compiled to WebAssembly (`@viz-js/viz`): offline, no binary on the host. Imported
 * lazily so that the provisioning path never loads the WASM module.
 */

type VizInstance = { renderString(dot: string, options: { format: string; engine?: string }): string };
let viz: Promise<VizInstance> | undefined;

/** Renders DOT text to an SVG document string. */
export async function renderSvg(dot: string): Promise<string> {
  viz ??= import('@viz-js/viz').then((module) => module.instance());
  return (await viz).renderString(dot, { format: 'svg', engine: 'dot' });
}
