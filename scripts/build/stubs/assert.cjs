'use strict';
// undici and sonic-boom use node:assert only as assert(value, message), for their own invariants; loading the real
// module (assertion errors, deep comparison, diffs) came before the first IMDS request.
function assert(value, message) {
  if (value) return;
  if (message instanceof Error) throw message;
  const error = new Error(message ?? 'assertion failed');
  error.code = 'ERR_ASSERTION';
  throw error;
}
assert.ok = assert;
module.exports = assert;
