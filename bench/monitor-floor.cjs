// The monitor cycle's floor (bench/monitor-cycles.ts): a node process that makes only the HTTP exchanges of a
// steady `monitor --once` cycle, with node:http and nothing else loaded: the host plugin's GET /health beside the
// IMDS heartbeat's GET, then one HealthService POST per observation, one after another, over kept-alive
// connections. No configuration, state file, logger, chart or checks: what any agent that posts the same
// observations pays at least. CommonJS, as the agent's own entry is: an ES module main starts Node's ESM loader.
// Usage: node bench/monitor-floor.cjs HOST_PLUGIN_ORIGIN IMDS_URL HEALTH_SERVICE_URL
'use strict';
const { Agent, request } = require('node:http');

const [hostPlugin, imds, healthService] = process.argv.slice(2);
const agent = new Agent({ keepAlive: true });

function send(url, options, body) {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, ...options }, (res) => {
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => (res.statusCode === 200 ? resolve(Buffer.concat(chunks)) : reject(new Error(`${url}: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function observe(name) {
  const body = JSON.stringify({ Api: 'reporttargethealth', Version: '1.0', Source: 'bootstate', Observations: [{ ObservationName: name, IsHealthy: true, Description: '', Value: '' }] });
  return send(healthService, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, body);
}

(async () => {
  const [, document] = await Promise.all([send(`${hostPlugin}/health`, {}), send(imds, { headers: { Metadata: 'true' } })]);
  JSON.parse(document);
  await observe('GuestAgentPluginHeartbeat');
  await observe('InstanceMetadataHeartbeat');
  agent.destroy();
})().catch((error) => {
  process.stderr.write(`${error.message}\n`);
  process.exitCode = 1;
});
