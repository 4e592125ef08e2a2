/**
 * `bootstate graph --format html`: the chart alone as one self-contained page (inline SVG, no network), for
 * reading a machine without a run: the overview first, every state one click away, fitted, zoomable, pannable.
 */
import type { AnyStateMachine } from 'xstate';
import { toDot } from './dot.js';
import { buildGraph, type GraphOptions } from './graph.js';
import { renderSvg } from './svg.js';
import { overviewOf } from './overview.js';
import { CHART_HELP, CHART_VIEW_CSS, CHART_VIEW_JS, chartTools, inlineSvg, scriptHash } from './pan-zoom.js';
import { escapeHtml } from './trace.js';

/** Renders a machine's chart as a self-contained HTML page. */
export async function renderChartHtml(machine: AnyStateMachine, options: GraphOptions = {}): Promise<string> {
  const graph = buildGraph(machine, options);
  const overview = await renderSvg(toDot(overviewOf(graph).graph, { compact: true }));
  const full = await renderSvg(toDot(graph));
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; font-src data:; script-src ${scriptHash(CHART_VIEW_JS)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(graph.id)} statechart</title>
<style>body { margin: 0; font: 14px system-ui, sans-serif; } h1 { font-size: 18px; margin: 0 0 4px; }
${CHART_VIEW_CSS}</style></head>
<body><div class="screen"><h1>${escapeHtml(graph.id)} statechart</h1>
${CHART_HELP}
<section class="chart-view" id="chart" tabindex="0" aria-label="${escapeHtml(graph.id)} statechart">
${chartTools(true)}
${inlineSvg(overview, 'overview')}
${inlineSvg(full, 'full', true)}
</section></div>
<script>${CHART_VIEW_JS}</script>
</body></html>
`;
}
