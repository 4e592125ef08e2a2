/**
 * `bootstate graph --format html`: the chart alone as one self-contained page (inline SVG, no network), for
 * reading a machine without a run.
 */
import type { AnyStateMachine } from 'xstate';
import { buildGraph, renderSvg, toDot, type GraphOptions } from './graph.js';
import { escapeHtml } from './trace.js';

/** Renders a machine's chart as a self-contained HTML page. */
export async function renderChartHtml(machine: AnyStateMachine, options: GraphOptions = {}): Promise<string> {
  const graph = buildGraph(machine, options);
  const svg = await renderSvg(toDot(graph));
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>${escapeHtml(graph.id)} statechart</title>
<style>body { margin: 16px; font: 14px system-ui, sans-serif; } h1 { font-size: 18px; }</style></head>
<body><h1>${escapeHtml(graph.id)} statechart</h1>
${svg.slice(svg.indexOf('<svg'))}
</body></html>
`;
}
