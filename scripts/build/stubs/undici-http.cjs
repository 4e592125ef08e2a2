'use strict';
// undici's Client and util need two things from node:http, whose load (HTTP server, parser binding, agent) is the
// largest part of what the provision path would otherwise evaluate: the default header size limit, which
// src/azure/http.ts passes explicitly, and IncomingMessage, to recognise a server request used as a request body,
// which bootstate never sends (its bodies are strings).
class IncomingMessage {}
module.exports = { IncomingMessage };
