'use strict';
// pino asks worker_threads only whether it runs on the main thread; bootstate has no other thread.
module.exports = { isMainThread: true };
