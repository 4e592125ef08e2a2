/**
 * The pages `inspect-server` serves: a self-contained live viewer — the same chart as the trace with the current
 * states lit and the path so far drawn, a status line, and the events in words (no network beyond its own
 * WebSocket; scripts admitted by hash; every value set with `textContent`) — and a bridge into the hosted Stately
 * inspector for those who want its UI.
 */
import { CHART_HELP, CHART_VIEW_CSS, CHART_VIEW_JS, scriptHash } from './pan-zoom.js';
import { ACTOR_WORDS, EVENT_WORDS } from './words.js';

const VIEWER_CSS = `
:root { font: 14px/1.4 system-ui, sans-serif; color: #1f2328; }
body { margin: 0; }
#events { margin: 0 20px 24px; width: calc(100% - 40px); }
h1 { font-size: 18px; margin: 0 0 4px; }
#status { font-weight: 600; margin: 0; }
#current { font-size: 13px; margin: 2px 0 4px; color: #1f2328; overflow-wrap: anywhere; }
#no-chart { color: #59636e; }
table { border-collapse: collapse; font-size: 13px; table-layout: fixed; margin-top: 12px; }
th, td { border-bottom: 1px solid #d1d9e0; padding: 3px 8px; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
th { background: #f6f8fa; }
th.n { width: 3em; } th.t { width: 8.5em; } th.h { width: 14em; } th.s { width: 5em; }
td.t { white-space: nowrap; font-variant-numeric: tabular-nums; }
td code { font: 12px ui-monospace, monospace; }
tr.run td { background: #f6f8fa; font-weight: 600; }
g.active > polygon, g.active > path { stroke: #0969da !important; stroke-width: 4px; }
g.node.active > polygon, g.node.active > path { fill: #cfe4ff !important; }
g.visited > polygon, g.visited > path { stroke: #1a7f37 !important; stroke-width: 2.2px; }
g.edge.taken > path { stroke: #1a7f37 !important; stroke-width: 2.4px; }
g.edge.taken > polygon { stroke: #1a7f37 !important; fill: #1a7f37 !important; }
${CHART_VIEW_CSS}`;

const VIEWER_JS = `
(function () {
  var rows = document.getElementById('rows');
  var statusLine = document.getElementById('status');
  var current = document.getElementById('current');
  var noChart = document.getElementById('no-chart');
  var words = JSON.parse(document.getElementById('words').textContent);
  var view = null, root = '', machine = '', seen = {}, taken = {}, timers = {};
  function leaves(v, p) {
    p = p || '';
    if (typeof v === 'string') return [p + v];
    if (!v || typeof v !== 'object') return p ? [p.slice(0, -1)] : [];
    return Object.keys(v).reduce(function (all, k) { return all.concat(leaves(v[k], p + k + '.')); }, []);
  }
  function active(v) {
    var out = {}; out[root] = true;
    leaves(v).forEach(function (leaf) {
      var parts = leaf.split('.');
      for (var i = 1; i <= parts.length; i++) out[root + '.' + parts.slice(0, i).join('.')] = true;
    });
    return out;
  }
  function spoken(ms) {
    if (ms < 1000) return ms + ' ms';
    if (ms < 60000 || ms % 60000) return (ms / 1000) + ' s';
    return ms % 3600000 ? (ms / 60000) + ' min' : (ms / 3600000) + ' h';
  }
  function eventWords(type) {
    if (words.events[type]) return words.events[type];
    var m = /^xstate\\.(done|error)\\.actor\\.(.+)$/.exec(type);
    if (m) return (words.actors[m[2]] || {})[m[1]] || m[2] + (m[1] === 'done' ? ' finished' : ' failed');
    m = /^xstate\\.after\\.([^.]+)\\./.exec(type);
    if (m) {
      var value = timers[m[1]] !== undefined ? ' (' + spoken(timers[m[1]]) + ')' : '';
      if (/retry/i.test(m[1])) return 'retry timer' + value + ' fired';
      if (/timeout|deadline|total/i.test(m[1])) return 'deadline' + value + ' reached: ' + m[1];
      return 'timer ' + m[1] + value + ' fired';
    }
    m = /^xstate\\.done\\.state\\.(.+)$/.exec(type);
    if (m) return m[1].split('.').pop() + ' finished';
    return type;
  }
  function members(g, own) { return g.dataset.members ? JSON.parse(g.dataset.members) : [own]; }
  function paint(now) {
    if (!view) return;
    view.querySelectorAll('g[data-state]').forEach(function (g) {
      var ids = members(g, g.dataset.state);
      var on = ids.some(function (id) { return now[id]; });
      g.classList.toggle('active', on);
      g.classList.toggle('visited', !on && ids.some(function (id) { return seen[id]; }));
    });
    view.querySelectorAll('g[data-edge]').forEach(function (g) {
      g.classList.toggle('taken', members(g, g.dataset.edge).some(function (key) { return taken[key]; }));
    });
  }
  function cell(tr, text, cls) { var td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); }
  function startRun(name) {
    machine = String(name); seen = {}; taken = {}; timers = {};
    statusLine.textContent = 'run of ' + machine;
    if (view) view.hidden = true;
    view = document.querySelector('.chart-view[data-machine="' + CSS.escape(machine) + '"]');
    noChart.hidden = !!view;
    noChart.textContent = view ? '' : 'no chart for machine ' + machine + ': events only';
    if (view) { view.hidden = false; root = view.dataset.root; window.dispatchEvent(new Event('resize')); }
    var tr = document.createElement('tr'); tr.className = 'run';
    var td = document.createElement('td'); td.colSpan = 6; td.textContent = 'run of ' + machine; tr.appendChild(td);
    rows.appendChild(tr);
  }
  function outcome(s) {
    var o = s.output || {};
    var exit = o.exitCode !== undefined ? 'exit ' + o.exitCode : '';
    if (o.exitCode === 0 || (o.exitCode === undefined && o.result !== 'failed')) return 'finished: ' + [o.result || 'done', exit].filter(Boolean).join(', ');
    return 'FAILED: ' + (o.cause || o.reason || o.result || 'failed') + ' (' + [o.cause ? o.reason : '', exit].filter(Boolean).join(', ') + ')';
  }
  function snapshot(e) {
    var s = e.snapshot;
    if (s.timers && typeof s.timers === 'object') Object.keys(s.timers).forEach(function (k) { timers[k] = s.timers[k]; });
    var now = active(s.value);
    Object.keys(now).forEach(function (id) { seen[id] = true; });
    (Array.isArray(s.transitions) ? s.transitions : []).forEach(function (key) { taken[key] = true; });
    paint(now);
    var states = leaves(s.value), tags = Array.isArray(s.tags) ? s.tags : [];
    var tr = document.createElement('tr');
    cell(tr, String(s.seq)); cell(tr, new Date(Number(e.createdAt)).toISOString().slice(11, 23), 't');
    cell(tr, eventWords(String(e.event && e.event.type))); cell(tr, states.join('\\n'));
    cell(tr, tags.join(', ')); cell(tr, String(s.status));
    tr.children[3].style.whiteSpace = 'pre-line';
    rows.appendChild(tr);
    var health = tags.length ? ' · health ' + tags.join(', ') : '';
    current.textContent = s.status === 'done' ? outcome(s) : 'now: ' + states.join(', ') + health;
    statusLine.textContent = 'run of ' + machine + (s.status === 'done' ? ' (finished)' : ' (running)');
  }
  function connect() {
    var ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/view');
    ws.onopen = function () { statusLine.textContent = 'connected, waiting for a run'; };
    ws.onclose = function () { statusLine.textContent = 'disconnected, retrying'; setTimeout(connect, 1000); };
    ws.onmessage = function (message) {
      var e; try { e = JSON.parse(message.data); } catch (err) { return; }
      if (!e || typeof e !== 'object') return;
      if (e.type === '@xstate.actor') startRun(e.name);
      else if (e.type === '@xstate.snapshot' && e.snapshot && typeof e.snapshot === 'object') snapshot(e);
    };
  }
  connect();
})();
`;

/** The words data for the viewer's script, as a JSON block the CSP does not execute. */
function wordsJson(): string {
  return JSON.stringify({ actors: ACTOR_WORDS, events: EVENT_WORDS }).replace(/</g, '\\u003c');
}

/** The self-contained live viewer page around the charts `liveCharts()` rendered. */
export function viewerHtml(charts = ''): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; font-src data:; script-src ${scriptHash(CHART_VIEW_JS)} ${scriptHash(VIEWER_JS)}; connect-src ws: wss:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bootstate live</title><style>${VIEWER_CSS}</style></head>
<body><div class="screen"><h1>bootstate live</h1><p id="status">connecting</p><p id="current"></p>
${CHART_HELP}
<p id="no-chart" hidden></p>
${charts}
</div>
<table id="events"><thead><tr><th class="n">#</th><th class="t">time</th><th>what happened</th><th>states now</th><th class="h">health</th><th class="s">status</th></tr></thead><tbody id="rows"></tbody></table>
<script type="application/json" id="words">${wordsJson()}</script>
<script>${CHART_VIEW_JS}</script>
<script>${VIEWER_JS}</script></body></html>
`;
}

/** A page embedding the hosted Stately inspector and posting the relayed events into it. */
export function statelyBridgeHtml(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>bootstate in the Stately inspector</title>
<style>html, body, iframe { margin: 0; width: 100%; height: 100%; border: 0; }</style></head>
<body><iframe id="inspector" src="https://stately.ai/inspect"></iframe>
<script>
var frame = document.getElementById('inspector'), pending = [], ready = false;
window.addEventListener('message', function (m) {
  if (m.source !== frame.contentWindow || !m.data || m.data.type !== '@statelyai.connected') return;
  ready = true; pending.splice(0).forEach(function (e) { frame.contentWindow.postMessage(e, 'https://stately.ai'); });
});
var ws = new WebSocket('ws://' + location.host + '/view');
ws.onmessage = function (m) {
  var e; try { e = JSON.parse(m.data); } catch (err) { return; }
  if (ready) frame.contentWindow.postMessage(e, 'https://stately.ai'); else pending.push(e);
};
</script></body></html>
`;
}
