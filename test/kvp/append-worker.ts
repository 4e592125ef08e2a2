/**
 * Child process for the interop tests. `append`: appends COUNT records `node|TAG|<i>` in batches of BATCH.
 * `churn`: COUNT times appends a duplicate of key `node|TAG|churn` then upserts it, so every round rewrites and
 * shortens the file while other writers append: only real mutual exclusion keeps their records.
 * Set KVP_FLOCK to use another flock binary (e.g. `true`, to show what happens without locking).
 */
import { KvpStore } from '../../src/kvp/store.js';

const [mode, path, count, tag, batch = '1'] = process.argv.slice(2);
const store = new KvpStore({ path, timeoutMs: 60_000, flockPath: process.env.KVP_FLOCK });
const total = Number(count);
if (mode === 'churn') {
  for (let i = 0; i < total; i++) {
    store.append([{ key: `node|${tag}|churn`, value: `dup ${i}` }]);
    store.upsert(`node|${tag}|churn`, `final ${i}`);
  }
} else {
  for (let start = 0; start < total; start += Number(batch)) {
    const records = [];
    for (let i = start; i < Math.min(total, start + Number(batch)); i++) records.push({ key: `node|${tag}|${i}`, value: `value ${i} of ${tag} é€` });
    store.append(records);
  }
}
