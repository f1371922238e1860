#!/usr/bin/env node
// A real @contextvm/sdk (TypeScript) server and client talking through relays under test.
// One JSON line per call goes to the outcome sink; everything human goes to stderr.
import { parseArgs } from 'node:util';
import { appendFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

// The SDK's pino loggers are created at import time and read these; keep stdout clean
// (it may be the outcome sink), so import the SDK only after setting them.
process.env.LOG_LEVEL ??= 'warn';
process.env.LOG_DESTINATION ??= 'stderr';
const { WebSocket } = await import('ws');
const { z } = await import('zod');
const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { NostrServerTransport, NostrClientTransport, ApplesauceRelayPool, PrivateKeySigner,
  EncryptionMode, callToolStream } = await import('@contextvm/sdk');

// Fixed keys (sha256 of "relaysim ts-sdk server" / "... client") so runs are repeatable.
const SERVER_SK = '52ba0c7a1e5b9f8c2ce1af5c4977d6d2046aab89620bc4ad3338f514db3f1fb4';
const CLIENT_SK = 'baf3964b39d7878d9e282f0ec71807d674c2b3863a7c6cad19578104e5a4a22a';
const PEER = 'ts-sdk client';
const CALLS = ['echo', 'large', 'stream'];
const ECHO_TEXT = 'hello relaysim, héllo ✓';
// The SDK fragments once the published event exceeds this (oversized-transfer/constants.js:7,
// not exported); a text this long always does.
const OVERSIZED_THRESHOLD = 48000;

const log = (...a) => console.error('[ts-sdk]', ...a);
const setupError = (msg) => { log(`setup error: ${msg}`); process.exit(2); };

// ---- arguments -------------------------------------------------------------------------
let args;
try {
  args = parseArgs({ strict: true, options: {
    relay: { type: 'string', multiple: true }, out: { type: 'string' },
    'timeout-ms': { type: 'string' }, 'large-bytes': { type: 'string' },
    'stream-chunks': { type: 'string' }, calls: { type: 'string' },
    'server-local-address': { type: 'string' }, 'client-local-address': { type: 'string' },
    encryption: { type: 'string' },
  } }).values;
} catch (e) { setupError(e.message); }
const posInt = (name, dflt) => {
  const v = args[name] ?? String(dflt);
  if (!/^[1-9][0-9]*$/.test(v)) setupError(`--${name} must be a positive integer, got "${v}"`);
  return Number(v);
};
const timeoutMs = posInt('timeout-ms', 30000);
const largeBytes = posInt('large-bytes', 200000);
const streamChunks = posInt('stream-chunks', 20);
const calls = (args.calls ?? CALLS.join(',')).split(',').map((s) => s.trim()).filter(Boolean);
for (const c of calls) if (!CALLS.includes(c)) setupError(`unknown call "${c}" (known: ${CALLS})`);
if (!calls.length) setupError('--calls is empty');
const relays = args.relay ?? (process.env.RELAYSIM_RELAYS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
if (!relays.length) setupError('no relay: pass --relay URL (repeatable) or set RELAYSIM_RELAYS=url1,url2');
for (const r of relays) if (!/^wss?:\/\/[^/]/.test(r)) setupError(`not a ws:// or wss:// URL: ${r}`);
const outFile = args.out ?? process.env.RELAYSIM_OUTCOMES;
const ENCRYPTION = { disabled: EncryptionMode.DISABLED, optional: EncryptionMode.OPTIONAL, required: EncryptionMode.REQUIRED };
const encryption = ENCRYPTION[args.encryption ?? 'disabled'];
if (encryption === undefined) setupError(`--encryption must be disabled, optional or required, got "${args.encryption}"`);

// ---- outcomes ----------------------------------------------------------------------------
// Appended, one line per call, so several peer programs may share one outcome file.
const reported = new Set();
let failures = 0;
// What the SDK's transports reported (`onerror`) and when: a failed call's `why` names the
// errors that came while it was open, in the SDK's own words.
const transportErrors = [];
const MAX_ERRORS_KEPT = 1000;
function noteError(who, e) {
  const text = `${who}: ${oneLine(e)}`;
  log(text);
  if (transportErrors.length < MAX_ERRORS_KEPT) transportErrors.push({ at: performance.now(), text });
}
function whySince(t0) {
  const seen = new Map();
  for (const e of transportErrors) if (e.at >= t0) seen.set(e.text, (seen.get(e.text) ?? 0) + 1);
  const texts = [...seen].map(([t, n]) => (n > 1 ? `${t} (×${n})` : t));
  if (texts.length === 0) return undefined;
  const shown = texts.slice(0, 3).join('; ');
  return texts.length > 3 ? `${shown}; and ${texts.length - 3} more` : shown;
}
// Wall-clock times (Unix ms) of each call's start, so `serve` can place the call on its trace.
const startedUnixMs = new Map();
let initStartedUnixMs; // when the server's start and the client's initialize began
let initError; // why initialization failed, if it did
function report(index, call, outcome, latencyMs, why) {
  if (reported.has(index)) return;
  reported.add(index);
  if (outcome !== 'completed') failures += 1;
  const fields = { peer: PEER, call, outcome, latency_ms: Math.round(latencyMs * 1000) / 1000,
    // A call that never started: when initialization began if it failed, else now (the
    // overall deadline), so it is drawn where it ended, not over the whole run.
    started_unix_ms: startedUnixMs.get(index) ?? (initError !== undefined ? initStartedUnixMs : Date.now()),
    ended_unix_ms: Date.now() };
  if (outcome !== 'completed' && why) fields.why = why;
  const line = JSON.stringify(fields) + '\n';
  if (outFile) appendFileSync(outFile, line); else process.stdout.write(line);
  log(`${call}: ${outcome} (${latencyMs.toFixed(1)} ms)`);
}

// ---- deterministic payloads -----------------------------------------------------------------
// 16-byte blocks that spell their own offset: a lost, doubled or shifted block is visible.
function largeText(n) {
  let s = '';
  for (let off = 0; s.length < n; off += 16) s += String(off).padStart(15, '0') + '|';
  return s.slice(0, n);
}
const streamChunk = (i, n) => `chunk ${i}/${n} ` + 'abcdefghijklmnopqrstuvwxyz'[i % 26].repeat(8 + (i % 8));
const streamDone = (n) => `streamed ${n} chunks`;
const textOf = (res) => res?.content?.[0]?.text;

// ---- relay handlers --------------------------------------------------------------------------
// The SDK passes relayOptions through to applesauce's Relay, whose `WebSocket` option is a
// constructor; a ws subclass lets each side bind its own loopback source address.
function wsCtor(localAddress) {
  if (!localAddress) return undefined;
  return class BoundWebSocket extends WebSocket {
    constructor(url, protocols) { super(url, protocols, { localAddress }); }
  };
}
// Counts CEP-22 frames the client receives (to prove `large` used the oversized path) and
// reports the first EOSE (to know the subscription is live before anyone publishes).
class TappedPool extends ApplesauceRelayPool {
  frames = { start: 0, chunk: 0, end: 0 };
  eose = new Promise((resolve) => { this.onFirstEose = resolve; });
  async subscribe(filters, onEvent, onEose) {
    return super.subscribe(filters, (ev) => { this.tap(ev); onEvent(ev); },
      () => { this.onFirstEose(); onEose?.(); });
  }
  tap(ev) {
    try {
      const cvm = JSON.parse(ev.content)?.params?.cvm;
      if (cvm?.type === 'oversized-transfer' && cvm.frameType in this.frames) this.frames[cvm.frameType] += 1;
    } catch { /* not JSON: not ours to judge */ }
  }
}
const makePool = (localAddress) => new TappedPool(relays, { relayOptions: { WebSocket: wsCtor(localAddress) } });

// A plain WebSocket open per relay: the SDK connects lazily and retries forever, so it
// cannot tell us that no relay is reachable at all.
function probe(url, localAddress) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, [], { localAddress, handshakeTimeout: 5000 });
    const done = (ok, why) => { ws.removeAllListeners(); ws.on('error', () => {}); ws.terminate(); resolve({ url, ok, why }); };
    ws.on('open', () => done(true));
    ws.on('error', (e) => done(false, e.message));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const withTimeout = (p, ms) => Promise.race([p, sleep(ms).then(() => { throw new TimeoutError(); })]);
class TimeoutError extends Error {}
const oneLine = (e) => String(e?.message ?? e).replace(/\s+/g, ' ').trim();

// Late rejections from calls we already gave up on must not kill the process.
process.on('unhandledRejection', (e) => log('late rejection:', oneLine(e)));

// ---- main ------------------------------------------------------------------------------------
const probes = await Promise.all(relays.map((u) => probe(u, args['client-local-address'])));
for (const p of probes) if (!p.ok) log(`relay ${p.url} unreachable: ${p.why}`);
if (!probes.some((p) => p.ok)) setupError('cannot connect to any relay');

// One timeout per call plus one each for server start and initialize; the 10 s cover the
// EOSE wait and closing.
const deadlineMs = (calls.length + 2) * timeoutMs + 10000;
const callStarted = new Map();
const deadline = setTimeout(() => {
  log(`overall deadline of ${deadlineMs} ms reached`);
  calls.forEach((c, i) => report(i, c, 'timeout', callStarted.has(i) ? performance.now() - callStarted.get(i) : 0,
    whySince(callStarted.get(i) ?? 0)));
  process.exit(1);
}, deadlineMs);

const server = new McpServer({ name: 'relaysim-ts-sdk-server', version: '1.0.0' });
server.registerTool('echo', { description: 'Returns its text', inputSchema: { text: z.string() } },
  async ({ text }) => ({ content: [{ type: 'text', text }] }));
server.registerTool('large', { description: 'Returns `bytes` deterministic bytes', inputSchema: { bytes: z.number().int() } },
  async ({ bytes }, extra) => {
    // SDK 0.11.14 gives every request that carries a progressToken an OpenStreamWriter when
    // openStream is enabled, and holds the response back while that writer isActive, which is
    // true from construction even if it never started. `large` needs a progressToken (the server
    // only fragments token-bearing responses), so retire the unused writer without publishing.
    const w = extra?._meta?.stream;
    if (w && !w.started) w.active = false;
    return { content: [{ type: 'text', text: largeText(bytes) }] };
  });
server.registerTool('stream', { description: 'CEP-41 stream of `chunks` chunks', inputSchema: { chunks: z.number().int() } },
  async ({ chunks }, extra) => {
    const w = extra?._meta?.stream; // injected by NostrServerTransport when openStream is enabled
    if (!w) throw new Error('no open-stream writer in _meta.stream (request had no progressToken?)');
    for (let i = 0; i < chunks; i++) await w.write(streamChunk(i, chunks));
    await w.close();
    return { content: [{ type: 'text', text: streamDone(chunks) }] };
  });

const serverPool = makePool(args['server-local-address']);
const serverTransport = new NostrServerTransport({
  signer: SERVER_SK, relayHandler: serverPool, encryptionMode: encryption,
  serverInfo: { name: 'relaysim-ts-sdk-server' },
  publishRelayList: false, // would also publish to public bootstrap relays
  oversizedTransfer: { enabled: true }, openStream: { enabled: true },
});
serverTransport.onerror = (e) => noteError('server transport error', e);
const clientPool = makePool(args['client-local-address']);
const serverPubkey = await new PrivateKeySigner(SERVER_SK).getPublicKey();
const clientTransport = new NostrClientTransport({
  signer: CLIENT_SK, relayHandler: clientPool, serverPubkey, encryptionMode: encryption,
  oversizedTransfer: { enabled: true }, openStream: { enabled: true },
});
const client = new Client({ name: 'relaysim-ts-sdk-client', version: '1.0.0' });
client.onerror = (e) => noteError('client error', e);

initStartedUnixMs = Date.now();
try {
  await withTimeout(server.connect(serverTransport), timeoutMs);
  // Requests published before the server's REQ is live would be lost (ephemeral kind).
  await withTimeout(serverPool.eose, 5000).catch(() => log('no EOSE from the server subscription after 5 s; going on'));
  const t0 = performance.now();
  await withTimeout(client.connect(clientTransport, { timeout: timeoutMs + 1000 }), timeoutMs);
  log(`initialized in ${(performance.now() - t0).toFixed(1)} ms via ${relays.join(', ')}`);
} catch (e) {
  initError = e instanceof TimeoutError ? 'initialize: timeout' : `initialize: ${oneLine(e)}`;
}

async function runCall(name) {
  const opts = { timeout: timeoutMs + 1000 }; // our own race below decides first
  if (name === 'echo') {
    const res = await client.callTool({ name, arguments: { text: ECHO_TEXT } }, undefined, opts);
    const got = textOf(res);
    return got === ECHO_TEXT ? null : `echo returned ${JSON.stringify(got)?.slice(0, 80)}`;
  }
  if (name === 'large') {
    const before = { ...clientPool.frames };
    // onprogress makes the MCP client attach a progressToken, without which the server never fragments.
    const res = await client.callTool({ name, arguments: { bytes: largeBytes } }, undefined, { ...opts, onprogress: () => {} });
    const got = Buffer.from(textOf(res) ?? '', 'utf8'), want = Buffer.from(largeText(largeBytes), 'utf8');
    if (!got.equals(want)) {
      let i = 0; while (i < got.length && i < want.length && got[i] === want[i]) i++;
      return `large returned ${got.length} bytes, expected ${want.length}, first difference at byte ${i}`;
    }
    const chunks = clientPool.frames.chunk - before.chunk;
    const viaCep22 = clientPool.frames.start > before.start && clientPool.frames.end > before.end && chunks > 0;
    if (!viaCep22 && largeBytes >= OVERSIZED_THRESHOLD)
      return 'large result did not arrive as a CEP-22 oversized transfer';
    log(`large: ${chunks} CEP-22 chunk frames received`);
    return null;
  }
  // stream: the SDK's CEP-41 helper pairs the request with an OpenStreamSession.
  const call = await callToolStream({ client, transport: clientTransport, name, arguments: { chunks: streamChunks } });
  const got = [];
  for await (const c of call.stream) got.push(c);
  const res = await call.result;
  for (let i = 0; i < Math.max(got.length, streamChunks); i++) {
    const want = i < streamChunks ? streamChunk(i, streamChunks) : undefined;
    if (got[i]?.chunkIndex !== i || got[i]?.value !== want)
      return `stream chunk ${i}: got ${JSON.stringify(got[i] ?? null).slice(0, 80)}, expected ${JSON.stringify(want ?? null)} (${got.length} of ${streamChunks} chunks)`;
  }
  return textOf(res) === streamDone(streamChunks) ? null : `stream final result ${JSON.stringify(textOf(res))?.slice(0, 80)}`;
}

for (const [i, name] of calls.entries()) {
  if (initError) { report(i, name, `error: ${initError}`, 0, whySince(0)); continue; }
  const t0 = performance.now();
  callStarted.set(i, t0);
  startedUnixMs.set(i, Date.now());
  let outcome;
  try {
    const wrong = await withTimeout(runCall(name), timeoutMs);
    outcome = wrong === null ? 'completed' : `wrong result: ${wrong}`;
  } catch (e) {
    // -32001 is the MCP SDK's own request timeout.
    outcome = e instanceof TimeoutError || e?.code === -32001 ? 'timeout' : `error: ${oneLine(e)}`;
  }
  report(i, name, outcome, performance.now() - t0, whySince(t0));
}

// Closing can hang on a publish that the SDK retries forever; bound it.
await withTimeout(Promise.allSettled([client.close(), serverTransport.close()]), 3000)
  .catch(() => log('transports did not close within 3 s'));
clearTimeout(deadline);
process.exit(failures === 0 && reported.size === calls.length ? 0 : 1);
