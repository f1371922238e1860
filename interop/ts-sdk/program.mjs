// relaysim peer program: the real @contextvm/sdk (pinned in package.json) as a server and a
// client, for relaysim-node-host (interop/node-host), which runs it in relaysim's simulated
// world in virtual time. The interface (exports `server(env)` and `client(env)`) is described in
// interop/node-host/PROGRAM.md; the tool catalogue mirrors relaysim's simulated tools
// (src/peer/tools.rs) so relaysim's own oracle can check every result.
//
// It runs under plain node as well (the host's tests measure the SDK's own cost that way):
// it uses only the SDK, node:crypto's createHash, crypto.getRandomValues, timers and TextDecoder.
import { createHash } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { NostrServerTransport, NostrClientTransport, callToolStream } from '@contextvm/sdk/transport';
import { EncryptionMode } from '@contextvm/sdk/core';
import { ApplesauceRelayPool } from '@contextvm/sdk/relay';

// JSON-RPC error codes relaysim's simulated server uses (src/peer/tools.rs `tool_codes`).
const INVALID_PARAMS = -32602;
const TOOL_FAILED = -32000;
// relaysim's limits (src/limits.rs), so a bad argument is refused as relaysim refuses it.
const MAX_PAYLOAD_BYTES = 2 ** 30;
const MAX_STREAM_CHUNKS = 1_000_000;
const MAX_CHUNK_BYTES = 2 ** 20;
const MAX_MS = 86_400_000;

const TOOLS = [
  ['echo', 'Returns `text`.'],
  ['large_result', 'Returns `bytes` bytes of `content` text (ascii, escape-heavy, utf8, random).'],
  ['stream', 'Streams `chunks` chunks of `chunk_bytes` bytes every `interval_ms` over CEP-41, then returns.'],
  ['slow', 'Returns after `ms` milliseconds.'],
  ['fail', 'Returns a JSON-RPC error with `reason`.'],
  ['upload', 'Takes `data` and returns its sha256 digest.'],
].map(([name, description]) => ({ name, description, inputSchema: { type: 'object' } }));

const ENCRYPTION = {
  disabled: EncryptionMode.DISABLED, optional: EncryptionMode.OPTIONAL, required: EncryptionMode.REQUIRED,
};
function encryptionMode(options) {
  const name = options?.encryption ?? 'disabled';
  const mode = ENCRYPTION[name];
  if (mode === undefined) throw new Error(`options.encryption must be disabled, optional or required, got ${JSON.stringify(name)}`);
  return mode;
}

// ---- relaysim's tool semantics ---------------------------------------------------------------
class JsonRpcError extends Error {
  constructor(code, message) { super(message); this.code = code; }
}
const badArgument = (tool, arg, expected) =>
  new JsonRpcError(INVALID_PARAMS, `tool ${tool}: argument \`${arg}\` must be ${expected}`);
function uint(args, tool, arg, max) {
  const v = args?.[arg];
  if (!Number.isSafeInteger(v) || v < 0 || v > max) throw badArgument(tool, arg, 'a non-negative integer within limits');
  return v;
}
export const digestOf = (text) => 'sha256:' + createHash('sha256').update(text, 'utf8').digest('hex');
const textResult = (text) => ({ content: [{ type: 'text', text }], isError: false });
export function streamChunkText(index, bytes) {
  const label = `chunk ${index}:`;
  return label.length >= bytes ? label : label + 'x'.repeat(bytes - label.length);
}

// Random draws: `bytes(n)` gives n random bytes (crypto.getRandomValues: under the host, the
// peer's seeded generator). Bytes are drawn in blocks of 64 KiB.
function byteSource() {
  let block = new Uint8Array(0), at = 0;
  return () => {
    if (at === block.length) {
      block = new Uint8Array(65536);
      crypto.getRandomValues(block);
      at = 0;
    }
    return block[at++];
  };
}
const ASCII = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .'; // 64
const ESCAPES = '"\\"\\a\n\t\u0001'; // 8: quotes, backslashes, newline, tab, a control character
const UTF8 = ['é', 'ß', '€', '中', '😀', '🦀'];
const utf8Len = (cp) => (cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);

/** Exactly `bytes` UTF-8 bytes of text of a content class, drawn from crypto.getRandomValues. */
export function payloadText(content, bytes) {
  const next = byteSource();
  const out = [];
  let piece = '';
  const push = (s) => { piece += s; if (piece.length >= 8192) { out.push(piece); piece = ''; } };
  if (content === 'ascii' || content === 'escape-heavy') {
    const alphabet = content === 'ascii' ? ASCII : ESCAPES;
    const mask = alphabet.length - 1;
    for (let i = 0; i < bytes; i++) push(alphabet[next() & mask]);
  } else if (content === 'utf8') {
    // Two-, three- and four-byte characters; the tail takes only characters that still fit,
    // and a last lone byte is an `a`.
    for (let left = bytes; left > 0;) {
      const fits = UTF8.filter((c) => Buffer_byteLength(c) <= left);
      if (!fits.length) { push('a'); left -= 1; continue; }
      let b; do b = next(); while (b >= 252); // 252 = 42 × 6: no bias for 6, 4, 3 or 2 choices
      const c = fits[b % fits.length];
      push(c); left -= Buffer_byteLength(c);
    }
  } else if (content === 'random') {
    // Any Unicode scalar value (control characters included); near the end, one that fits.
    for (let left = bytes; left > 0;) {
      let cp;
      do {
        const w = ((next() << 16) | (next() << 8) | next()) >>> 0; // 24 bits
        cp = w & 0x1fffff;
      } while (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff));
      if (utf8Len(cp) > left) cp = next() & 0x7f;
      push(String.fromCodePoint(cp)); left -= utf8Len(cp);
    }
  } else {
    throw badArgument('large_result', 'content', 'ascii, escape-heavy, utf8 or random');
  }
  out.push(piece);
  return out.join('');
}
const Buffer_byteLength = (c) => utf8Len(c.codePointAt(0));

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The SDK transport options relaysim's scenario knobs map to (`options` of the peer):
 * `chunk_size_bytes` (CEP-22 chunk data size), `idle_timeout_ms` and `probe_timeout_ms`
 * (CEP-41 keepalive), `stateless` (a client that skips initialize). */
function sdkOptions(options) {
  const oversizedTransfer = { enabled: true };
  if (Number.isSafeInteger(options.chunk_size_bytes)) oversizedTransfer.chunkSizeBytes = options.chunk_size_bytes;
  const policy = {};
  if (Number.isSafeInteger(options.idle_timeout_ms)) policy.idleTimeoutMs = options.idle_timeout_ms;
  if (Number.isSafeInteger(options.probe_timeout_ms)) policy.probeTimeoutMs = options.probe_timeout_ms;
  const openStream = Object.keys(policy).length ? { enabled: true, policy } : { enabled: true };
  return { oversizedTransfer, openStream };
}

/** The SDK's own relay pool, telling when its first subscription got its first EOSE. */
class EoseAwarePool extends ApplesauceRelayPool {
  constructor(relays) {
    super(relays);
    this.firstEose = new Promise((resolve) => { this.onFirstEose = resolve; });
  }
  async subscribe(filters, onEvent, onEose) {
    return super.subscribe(filters, onEvent, () => { this.onFirstEose(); onEose?.(); });
  }
}

/** The MCP server: relaysim's tool catalogue on NostrServerTransport. */
export async function server(env) {
  const options = env.options ?? {};
  const mcp = new Server({ name: 'relaysim-ts-sdk-server', version: '1.0.0' }, { capabilities: { tools: {} } });
  mcp.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  // Both workarounds below can be turned off (options.sdk_workarounds: false) to watch the
  // SDK's own behaviour.
  const workarounds = options.sdk_workarounds !== false;
  let transport; // set below; the handler runs only once it is connected
  mcp.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { name, arguments: args = {} } = request.params;
    // The SDK's OpenStreamWriter, made for any request with a progressToken. SDK 0.11.14 puts it
    // in `_meta.stream` (nostr-server/inbound-coordinator.js:97-104), except for a request that
    // arrived as a CEP-22 oversized transfer: nostr-server/inbound-notification-dispatcher.js:
    // 112-119 (handleIncomingRequest at 113) creates the writer but does not inject it. Its key is the
    // request's event id, which the SDK also makes the request's JSON-RPC id.
    const writer = extra?._meta?.stream
      ?? (workarounds ? transport?.getInternalStateForTesting().openStreamFactory.getWriter(String(extra?.requestId)) : undefined);
    // SDK 0.11.14 holds a response back while the request's writer `isActive`, which it is from
    // construction on even if never started (open-stream/writer.js:11,19;
    // nostr-server/open-stream-factory.js:121-127 `deferIfStreamActive`): a tool that does not
    // stream must retire it, or its response is never sent.
    const retire = () => { if (workarounds && writer && !writer.started) writer.active = false; };
    if (name !== 'stream') retire();
    switch (name) {
      case 'echo':
        return textResult(typeof args.text === 'string' ? args.text : '');
      case 'large_result': {
        const bytes = uint(args, 'large_result', 'bytes', MAX_PAYLOAD_BYTES);
        const content = args.content ?? 'ascii';
        if (!['ascii', 'escape-heavy', 'utf8', 'random'].includes(content))
          throw badArgument('large_result', 'content', 'ascii, escape-heavy, utf8 or random');
        const text = payloadText(content, bytes);
        return { ...textResult(text), _meta: { sha256: digestOf(text) } };
      }
      case 'stream': {
        const chunks = uint(args, 'stream', 'chunks', MAX_STREAM_CHUNKS);
        const chunkBytes = uint(args, 'stream', 'chunk_bytes', MAX_CHUNK_BYTES);
        const interval = uint(args, 'stream', 'interval_ms', MAX_MS);
        if (!writer) throw new JsonRpcError(INVALID_PARAMS, 'stream needs a progressToken');
        for (let i = 0; i < chunks; i++) {
          if (i > 0 && interval > 0) await sleep(interval);
          await writer.write(streamChunkText(i, chunkBytes));
        }
        await writer.close();
        return textResult(`streamed ${chunks} chunks`);
      }
      case 'slow': {
        const ms = uint(args, 'slow', 'ms', MAX_MS);
        const token = extra?._meta?.progressToken;
        let answered = false;
        if (args.progress_ms !== undefined && token !== undefined) {
          const every = Math.max(uint(args, 'slow', 'progress_ms', MAX_MS), 100);
          const total = Math.floor(ms / every);
          const tick = (k) => setTimeout(() => {
            if (answered) return;
            extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: k, total } })
              .catch((e) => env.log(`slow: progress ${k} not sent: ${e?.message ?? e}`));
            if (k < total) tick(k + 1);
          }, every);
          if (total > 0) tick(1);
        } else if (args.progress_ms !== undefined) {
          uint(args, 'slow', 'progress_ms', MAX_MS);
        }
        await sleep(ms);
        answered = true;
        return textResult('done');
      }
      case 'fail':
        throw new JsonRpcError(TOOL_FAILED, typeof args.reason === 'string' ? args.reason : 'tool failed');
      case 'upload':
        if (typeof args.data !== 'string') throw badArgument('upload', 'data', 'a string');
        return textResult(digestOf(args.data));
      default:
        throw new JsonRpcError(INVALID_PARAMS, `unknown tool ${JSON.stringify(name)}`);
    }
  });
  const pool = new EoseAwarePool(env.relays);
  transport = new NostrServerTransport({
    signer: env.secretKey,
    relayHandler: pool,
    encryptionMode: encryptionMode(options),
    serverInfo: { name: 'relaysim-ts-sdk-server' },
    publishRelayList: false, // would also publish to public bootstrap relays
    ...sdkOptions(options),
  });
  // The transport's errors reach this too (MCP's Protocol.connect chains transport.onerror),
  // e.g. "Duplicate start frame for active transfer (token: 1)", "Failed to send response: ...".
  mcp.onerror = (e) => env.log(`server error: ${e?.message ?? e}`);
  await mcp.connect(transport);
  // Ready once a relay has confirmed the subscription (EOSE): a request published before
  // would be lost (kind 25910 is ephemeral). At most `ready_timeout_ms` (default 5000) of
  // virtual time is spent waiting.
  const waitMs = options.ready_timeout_ms ?? 5000;
  let timer;
  const subscribed = await Promise.race([
    pool.firstEose.then(() => true),
    new Promise((resolve) => { timer = setTimeout(() => resolve(false), waitMs); }),
  ]);
  clearTimeout(timer);
  if (!subscribed) env.log(`no EOSE within ${waitMs} ms; ready anyway`);
  return { close: () => mcp.close() };
}

/** The MCP client: NostrClientTransport + MCP Client; `call` makes one tools/call. */
export async function client(env) {
  const options = env.options ?? {};
  const transport = new NostrClientTransport({
    signer: env.secretKey,
    relayHandler: env.relays,
    serverPubkey: env.serverPubkey,
    encryptionMode: encryptionMode(options),
    ...(options.stateless === true ? { isStateless: true } : {}),
    ...sdkOptions(options),
  });
  const mcp = new Client({ name: 'relaysim-ts-sdk-client', version: '1.0.0' });
  mcp.onerror = (e) => env.log(`client error: ${e?.message ?? e}`);
  const timeout = options.request_timeout_ms; // undefined: the MCP SDK's default (60 s)
  await mcp.connect(transport, timeout === undefined ? undefined : { timeout });
  return {
    async call({ name, arguments: args, progress, stream }) {
      if (stream) {
        const call = await callToolStream({ client: mcp, transport, name, arguments: args });
        // Settle the result even if the stream fails first, so its rejection is not unhandled.
        const result = call.result.then((value) => ({ value }), (error) => ({ error }));
        const chunks = [];
        for await (const chunk of call.stream) chunks.push(chunk.value);
        const settled = await result;
        if (settled.error) throw settled.error;
        return { result: settled.value, chunks };
      }
      const requestOptions = {};
      if (timeout !== undefined) requestOptions.timeout = timeout;
      // onprogress makes the MCP client attach a progressToken (needed for CEP-22 results).
      if (progress) requestOptions.onprogress = () => {};
      const result = await mcp.callTool({ name, arguments: args ?? {} }, undefined, requestOptions);
      return { result };
    },
    close: () => mcp.close(),
  };
}
