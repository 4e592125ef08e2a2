'use strict';
// Log transports run in worker threads; bootstate writes its logs synchronously and never starts one.
module.exports = function transport() {
  throw new Error('pino transports are not part of this build of bootstate');
};
