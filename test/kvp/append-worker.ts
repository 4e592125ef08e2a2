/** Child process for the interop test: appends COUNT records `node|TAG|<i>` to POOL through KvpStore in batches of BATCH. */
import { KvpStore } from '../../src/kvp/store.js';

const [path, count, tag, batch = '1'] = process.argv.slice(2);
const store = new KvpStore({ path, timeoutMs: 60_000 });
const total = Number(count);
for (let start = 0; start < total; start += Number(batch)) {
  const records = [];
  for (let i = start; i < Math.min(total, start + Number(batch)); i++) records.push({ key: `node|${tag}|${i}`, value: `value ${i} of ${tag} é€` });
  store.append(records);
}
