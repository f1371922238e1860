// What a bundled program gets for the `ws` package: the simulated WebSocket of its peer's
// context (installed as globalThis.WebSocket before the program runs). A WebSocketServer
// would be real network.
'use strict';
const WebSocket = globalThis.WebSocket;
module.exports = WebSocket;
module.exports.WebSocket = WebSocket;
module.exports.default = WebSocket;
module.exports.WebSocketServer = module.exports.Server = function WebSocketServer() {
  throw new Error('relaysim-node-host: nondeterminism: ws.WebSocketServer (real network) (closed in relaysim\'s simulated world)');
};
module.exports.createWebSocketStream = function createWebSocketStream() {
  throw new Error('relaysim-node-host: not provided: ws.createWebSocketStream');
};
