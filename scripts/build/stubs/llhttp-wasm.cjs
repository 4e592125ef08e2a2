'use strict';
// undici's HTTP/1 parser without SIMD, which undici compiles only when the SIMD build fails to; read when asked for.
module.exports = require('bootstate-asset:llhttp.wasm');
