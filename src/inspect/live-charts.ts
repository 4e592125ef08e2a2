/**
 * The charts the live viewer lights up: the agent's machines (overview and full chart each), rendered once per
 * relay on the first page request. Imported only by `inspect-server`'s page handler, never on an agent's path.
 */
import { tagSvg } from './chart-tags.js';
import { toDot } from './dot.js';
import { buildGraph } from './graph.js';
import { renderSvg } from './svg.js';
import { overviewOf } from './overview.js';
import { chartTools, inlineSvg } from './pan-zoom.js';
import { loadMachine } from './render.js';

const MACHINES = ['provisioning', 'monitor'] as const;
let charts: Promise<string> | undefined;

/** One hidden chart view per machine, `data-machine` naming it; the viewer shows the one whose run arrives. */
export function liveCharts(): Promise<string> {
  charts ??= Promise.all(
    MACHINES.map(async (name) => {
      const { machine, options } = await loadMachine(name);
      const graph = buildGraph(machine, options);
      const { graph: overview, alias } = overviewOf(graph);
      const overviewSvg = tagSvg(inlineSvg(await renderSvg(toDot(overview, { compact: true })), 'overview'), overview, { alias });
      const fullSvg = tagSvg(inlineSvg(await renderSvg(toDot(graph)), 'full', true), graph);
      return `<section class="chart-view" data-machine="${name}" data-root="${graph.root}" tabindex="0" aria-label="${name} statechart" hidden>
${chartTools(true)}
${overviewSvg}
${fullSvg}
</section>`;
    }),
  ).then((sections) => sections.join('\n'));
  return charts;
}
