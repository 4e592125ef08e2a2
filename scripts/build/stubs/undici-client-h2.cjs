'use strict';
// The fabric speaks HTTP/1.1 over plain TCP, so undici never negotiates h2; this keeps node:http2 out of the bundle.
module.exports = function connectH2() {
  throw new Error('HTTP/2 is not part of this build of bootstate');
};
