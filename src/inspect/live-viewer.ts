/**
 * The pages `inspect-server` serves: a self-contained live viewer (no network beyond its own WebSocket; every
 * value is set with `textContent`) and a bridge into the hosted Stately inspector for those who want its UI.
 */

const VIEWER_CSS = `
:root { font: 14px/1.4 system-ui, sans-serif; color: #1f2328; }
body { margin: 16px 24px; }
#status { font-weight: 600; }
#current { font: 13px ui-monospace, monospace; background: #f6f8fa; padding: 8px; border-radius: 6px; white-space: pre-wrap; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { border-bottom: 1px solid #d1d9e0; padding: 3px 8px; text-align: left; vertical-align: top; }
td { font-family: ui-monospace, monospace; }
`;

const VIEWER_JS = `
var rows = document.getElementById('rows');
var status = document.getElementById('status');
var current = document.getElementById('current');
function flat(v, p) {
  if (typeof v === 'string') return (p || '') + v;
  if (!v || typeof v !== 'object') return p || '';
  return Object.keys(v).map(function (k) { return flat(v[k], (p || '') + k + '.'); }).join(', ');
}
function cell(tr, text) { var td = document.createElement('td'); td.textContent = text; tr.appendChild(td); }
function connect() {
  var ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/view');
  ws.onopen = function () { status.textContent = 'connected, waiting for a run'; };
  ws.onclose = function () { status.textContent = 'disconnected, retrying'; setTimeout(connect, 1000); };
  ws.onmessage = function (message) {
    var e; try { e = JSON.parse(message.data); } catch (err) { return; }
    if (e.type === '@xstate.actor') { status.textContent = 'run of ' + e.name; return; }
    if (e.type !== '@xstate.snapshot' || !e.snapshot) return;
    var s = e.snapshot, tr = document.createElement('tr');
    cell(tr, String(s.seq)); cell(tr, new Date(Number(e.createdAt)).toISOString()); cell(tr, String(e.event && e.event.type));
    cell(tr, flat(s.value)); cell(tr, (s.tags || []).join(', ')); cell(tr, (s.transitions || []).join('\\n')); cell(tr, String(s.status));
    rows.appendChild(tr);
    current.textContent = flat(s.value) + '  [' + (s.tags || []).join(', ') + ']  ' + s.status + (s.output ? '  ' + JSON.stringify(s.output) : '');
  };
}
connect();
`;

/** The self-contained live viewer page. */
export function viewerHtml(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src ws: wss:">
<title>bootstate live</title><style>${VIEWER_CSS}</style></head>
<body><h1>bootstate live</h1><p id="status">connecting</p><div id="current"></div>
<table><thead><tr><th>#</th><th>time</th><th>event</th><th>state</th><th>tags</th><th>transitions</th><th>status</th></tr></thead><tbody id="rows"></tbody></table>
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
