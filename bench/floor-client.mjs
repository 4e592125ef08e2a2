// The time-to-Ready floor: a node process that makes only the unavoidable round trips, one IMDS GET and then
// one Ready POST, with node:http and nothing else loaded; given a JSON file of argv arrays, it runs those
// commands one after another in between (the OS work of a real provisioning, done bare).
// Usage: node bench/floor-client.mjs IMDS_URL HEALTH_URL [COMMANDS.json]
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';

const [imdsUrl, healthUrl, commandsFile] = process.argv.slice(2);

function send(url, options, body) {
  return new Promise((resolve, reject) => {
    const req = request(url, options, (res) => {
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => (res.statusCode === 200 ? resolve(Buffer.concat(chunks)) : reject(new Error(`${url}: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const document = JSON.parse(await send(imdsUrl, { headers: { Metadata: 'true' } }));
for (const [file, ...args] of commandsFile ? JSON.parse(readFileSync(commandsFile, 'utf8')) : []) {
  spawnSync(file, args, { stdio: 'ignore' });
}
const ready = JSON.stringify({ state: 'Ready', vmId: document.compute?.vmId });
await send(healthUrl, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(ready) } }, ready);
