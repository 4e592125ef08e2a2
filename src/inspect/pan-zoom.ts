/**
 * Fit, zoom and pan for the charts on every inspect page (graph, trace, live), in a few lines of script that the
 * page's CSP admits by hash: no inline handlers, no network. A chart view holds the overview and the full chart;
 * a button switches between them, and each opens fitted to the view.
 */
import { createHash } from 'node:crypto';
import { CHART_FONT_CSS, CHART_TEXT_CSS } from './chart-font.js';

export const CHART_VIEW_CSS = `
.screen { box-sizing: border-box; height: 100vh; display: flex; flex-direction: column; padding: 10px 20px 10px; }
.screen > * { flex: none; }
.screen > .chart-view { flex: 1 1 auto; min-height: 260px; }
.chart-view { position: relative; border: 1px solid #d1d9e0;
  border-radius: 6px; background: #fcfcfd; overflow: hidden; touch-action: none; cursor: grab; }
.chart-view:focus { outline: 2px solid #0969da; outline-offset: 1px; }
.chart-view.dragging { cursor: grabbing; }
/* The toolbar has a strip of its own below the chart, so fitting never puts a state under a button. */
.chart-view > svg { width: 100%; height: calc(100% - 42px); display: block; user-select: none; }
.chart-view > svg[hidden] { display: none; }
${CHART_FONT_CSS}
.chart-view svg ${CHART_TEXT_CSS}
.chart-tools { position: absolute; bottom: 6px; right: 8px; display: flex; gap: 4px; z-index: 1; }
.chart-tools button { font: 13px system-ui, sans-serif; min-width: 30px; height: 28px; padding: 0 8px; border: 1px solid #d1d9e0;
  border-radius: 6px; background: #ffffffee; cursor: pointer; }
.chart-tools button:hover { background: #f3f4f6; }
.chart-help { font: 12px system-ui, sans-serif; color: #59636e; margin: 2px 0 4px; }
`;

/** The view's script: fit on load and on resize, wheel and buttons zoom, drag and arrow keys pan, `0` fits. */
export const CHART_VIEW_JS = `
(function () {
  var MAX_FIT_ZOOM = 1.4;
  function setup(view) {
    var svgs = Array.prototype.slice.call(view.querySelectorAll(':scope > svg'));
    svgs.forEach(function (svg) {
      var box = svg.viewBox.baseVal;
      svg.dataset.full = [box.x, box.y, box.width, box.height].join(' ');
      svg.removeAttribute('width'); svg.removeAttribute('height');
      svg.setAttribute('preserveAspectRatio', 'xMidYMid meet');
    });
    function current() { return svgs.filter(function (svg) { return !svg.hasAttribute('hidden'); })[0]; }
    function get(svg) { return svg.getAttribute('viewBox').split(/[ ,]+/).map(Number); }
    function put(svg, b) { svg.setAttribute('viewBox', b.join(' ')); }
    function fit() {
      var svg = current(); if (!svg) return;
      var b = svg.dataset.full.split(' ').map(Number), r = svg.getBoundingClientRect();
      if (!r.width || !r.height) return;
      var s = Math.max(b[2] / r.width, b[3] / r.height, 1 / MAX_FIT_ZOOM);
      var w = r.width * s, h = r.height * s;
      put(svg, [b[0] + (b[2] - w) / 2, b[1] + (b[3] - h) / 2, w, h]);
    }
    function scale(svg) {
      var b = get(svg), r = svg.getBoundingClientRect();
      return Math.max(b[2] / r.width, b[3] / r.height);
    }
    function zoom(factor, clientX, clientY) {
      var svg = current(); if (!svg) return;
      var b = get(svg), r = svg.getBoundingClientRect(), s = scale(svg);
      var cx = clientX === undefined ? b[0] + b[2] / 2 : b[0] + b[2] / 2 + (clientX - r.left - r.width / 2) * s;
      var cy = clientY === undefined ? b[1] + b[3] / 2 : b[1] + b[3] / 2 + (clientY - r.top - r.height / 2) * s;
      var full = svg.dataset.full.split(' ').map(Number);
      var w = Math.min(full[2] * 4, Math.max(full[2] / 40, b[2] / factor)), h = b[3] * (w / b[2]);
      put(svg, [cx - (cx - b[0]) * (w / b[2]), cy - (cy - b[1]) * (h / b[3]), w, h]);
    }
    function pan(dx, dy) {
      var svg = current(); if (!svg) return;
      var b = get(svg), s = scale(svg);
      put(svg, [b[0] - dx * s, b[1] - dy * s, b[2], b[3]]);
    }
    view.querySelectorAll('[data-zoom]').forEach(function (button) {
      button.addEventListener('click', function () {
        var what = button.getAttribute('data-zoom');
        if (what === 'in') zoom(1.25); else if (what === 'out') zoom(0.8); else if (what === 'fit') fit();
        else if (what === 'switch') {
          svgs.forEach(function (svg) { svg.toggleAttribute('hidden'); });
          var full = view.querySelector('svg[data-view="full"]');
          button.textContent = full && !full.hasAttribute('hidden') ? 'overview' : 'all states';
          fit();
        }
      });
    });
    view.addEventListener('wheel', function (e) { e.preventDefault(); zoom(e.deltaY < 0 ? 1.15 : 1 / 1.15, e.clientX, e.clientY); }, { passive: false });
    var drag = null;
    view.addEventListener('pointerdown', function (e) {
      if (e.target.closest('button')) return;
      drag = { x: e.clientX, y: e.clientY }; view.classList.add('dragging'); view.setPointerCapture(e.pointerId);
    });
    view.addEventListener('pointermove', function (e) {
      if (!drag) return;
      pan(e.clientX - drag.x, e.clientY - drag.y); drag = { x: e.clientX, y: e.clientY };
    });
    function end() { drag = null; view.classList.remove('dragging'); }
    view.addEventListener('pointerup', end); view.addEventListener('pointercancel', end);
    view.addEventListener('keydown', function (e) {
      var step = 60, keys = { ArrowLeft: [step, 0], ArrowRight: [-step, 0], ArrowUp: [0, step], ArrowDown: [0, -step] };
      if (e.key === '+' || e.key === '=') zoom(1.25); else if (e.key === '-' || e.key === '_') zoom(0.8);
      else if (e.key === '0') fit(); else if (keys[e.key]) pan(keys[e.key][0], keys[e.key][1]); else return;
      e.preventDefault();
    });
    window.addEventListener('resize', fit);
    fit();
  }
  document.querySelectorAll('.chart-view').forEach(setup);
})();
`;

/** The line that tells how to move the chart, placed above a chart view. */
export const CHART_HELP = '<p class="chart-help">drag or arrow keys to pan · wheel or +/− to zoom · 0 or “fit” to see it whole</p>';

/** The toolbar of a chart view; `switchable` adds the overview / all-states button. */
export function chartTools(switchable: boolean): string {
  const toggle = switchable ? '<button type="button" data-zoom="switch" title="switch between the overview and every state">all states</button>' : '';
  return `<div class="chart-tools">${toggle}<button type="button" data-zoom="out" title="zoom out (-)">−</button><button type="button" data-zoom="in" title="zoom in (+)">+</button><button type="button" data-zoom="fit" title="fit the chart to the view (0)">fit</button></div>`;
}

/** The `'sha256-…'` CSP source that admits exactly this inline script. */
export function scriptHash(script: string): string {
  return `'sha256-${createHash('sha256').update(script, 'utf8').digest('base64')}'`;
}

/** Strips what precedes `<svg` (XML prolog, doctype, comments) so the SVG can be inlined. */
export function inlineSvg(svg: string, view?: 'overview' | 'full', hidden = false): string {
  const body = svg.slice(svg.indexOf('<svg'));
  return body.replace('<svg', `<svg${view ? ` data-view="${view}"` : ''}${hidden ? ' hidden' : ''} role="img"`);
}
