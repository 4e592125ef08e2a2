'use strict';
// undici's HTTP/1 parser (llhttp, WebAssembly with SIMD), read from dist/ or the SEA's assets (scripts/bundle.mjs).
module.exports = require('bootstate-asset:llhttp_simd.wasm');
