'use strict';
// undici's HTTP/1 client turns a FormData request body into a stream through its fetch body code (the WHATWG
// fetch, FormData and WebIDL modules); bootstate's bodies are strings, so that code stays out of the bundle.
module.exports = {
  extractBody() {
    throw new Error('FormData request bodies are not part of this build of bootstate');
  },
};
