// The "floor": the same program and workload with the host's machinery out of the way — one
// plain node realm, real timers, no vm contexts, no line protocol, an in-process ideal relay
// (same semantics as driver.mjs: OK, live fan-out to matching REQs of other sockets, EOSE).
// Run as a script: node test/lib/floor.mjs [seeds [content [calls]]]; prints one JSON line of
// CPU figures (calls: how many of the standard workload's calls, in order).
import { PROGRAM, RELAY_URL, SERVER_SK, CLIENT_SK, pubkeyOf, workload } from './driver.mjs';

process.env.LOG_LEVEL ??= 'warn';

const subsOf = new Map(); // socket -> Map(subId, filters)
function matches(filter, ev) {
  if (filter.ids && !filter.ids.includes(ev.id)) return false;
  if (filter.authors && !filter.authors.includes(ev.pubkey)) return false;
  if (filter.kinds && !filter.kinds.includes(ev.kind)) return false;
  if (filter.since !== undefined && ev.created_at < filter.since) return false;
  for (const [k, vals] of Object.entries(filter)) {
    if (k[0] !== '#' || !Array.isArray(vals)) continue;
    if (!ev.tags.some((t) => t[0] === k.slice(1) && vals.includes(t[1]))) return false;
  }
  return true;
}
const hop = (fn) => setImmediate(fn);
class FloorWebSocket extends EventTarget {
  static CONNECTING = 0; static OPEN = 1; static CLOSING = 2; static CLOSED = 3;
  constructor(url) {
    super();
    this.url = url; this.readyState = 0; this.binaryType = 'blob'; this.bufferedAmount = 0; this.protocol = '';
    this.onopen = this.onmessage = this.onclose = this.onerror = null;
    hop(() => {
      subsOf.set(this, new Map());
      this.readyState = 1;
      this.#emit('open', new Event('open'));
    });
  }
  #emit(type, ev) { this.dispatchEvent(ev); this['on' + type]?.(ev); }
  #deliver(text) { hop(() => { if (this.readyState === 1) this.#emit('message', new MessageEvent('message', { data: text })); }); }
  send(text) {
    hop(() => { // reaches the relay
      const msg = JSON.parse(text);
      if (msg[0] === 'EVENT') {
        const ev = msg[1];
        this.#deliver(JSON.stringify(['OK', ev.id, true, '']));
        for (const [sock, subs] of subsOf) {
          if (sock === this) continue;
          for (const [id, filters] of subs) if (filters.some((f) => matches(f, ev))) sock.#deliver(`["EVENT",${JSON.stringify(id)},${JSON.stringify(ev)}]`);
        }
      } else if (msg[0] === 'REQ') {
        subsOf.get(this)?.set(msg[1], msg.slice(2));
        this.#deliver(JSON.stringify(['EOSE', msg[1]]));
      } else if (msg[0] === 'CLOSE') subsOf.get(this)?.delete(msg[1]);
    });
  }
  close(code = 1005, reason = '') {
    if (this.readyState >= 2) return;
    this.readyState = 3; subsOf.delete(this);
    hop(() => this.#emit('close', new CloseEvent('close', { code, reason, wasClean: true })));
  }
}
globalThis.WebSocket = FloorWebSocket;
globalThis.CloseEvent ??= class CloseEvent extends Event {
  constructor(type, init) { super(type); this.code = init?.code; this.reason = init?.reason; this.wasClean = init?.wasClean; }
};

// With FLOOR_ENCODER=host: the host's realm-local TextEncoder fast path (a JS encoder for strings
// of up to 64 UTF-16 units, lib/prelude.js `utf8Short`), so that host / floor compares the
// host's machinery alone (the SDK encodes one character at a time when it splits CEP-22
// payloads, and node's native TextEncoder is slower than JS for that).
if (process.env.FLOOR_ENCODER === 'host') {
  const { readFileSync } = await import('node:fs');
  const src = readFileSync(new URL('../../lib/prelude.js', import.meta.url), 'utf8');
  const body = src.slice(src.indexOf('function utf8Short(s) {'), src.indexOf('const SHORT = 64;'));
  const utf8Short = new Function('U8', `${body}; return utf8Short;`)(Uint8Array);
  const Native = globalThis.TextEncoder;
  globalThis.TextEncoder = class TextEncoder extends Native {
    encode(input = '') { const s = String(input); return s.length <= 64 ? utf8Short(s) : super.encode(s); }
  };
}
const cpuMs = (c) => (c.user + c.system) / 1000;
export async function floorRun(seeds = 1, calls = workload(), options = {}) {
  const t0 = process.cpuUsage();
  const program = await import(PROGRAM);
  const loadMs = cpuMs(process.cpuUsage(t0));
  const serverPubkey = await pubkeyOf(SERVER_SK);
  const perSeed = [];
  const wall = [];
  for (let s = 0; s < seeds; s++) {
    const c0 = process.cpuUsage();
    const w0 = performance.now();
    const log = () => {};
    const server = await program.server({ peer: 0, name: 'server', role: 'server', secretKey: SERVER_SK, relays: [RELAY_URL], options, log });
    const client = await program.client({ peer: 1, name: 'client', role: 'client', secretKey: CLIENT_SK, relays: [RELAY_URL], serverPubkey, options, log });
    for (const c of calls) {
      try { await client.call({ name: c.name, arguments: c.arguments, progress: !!c.progress, stream: !!c.stream }); } catch (e) { if (c.name !== 'fail') throw e; }
    }
    await client.close?.().catch(() => {});
    await server.close?.().catch(() => {});
    perSeed.push(cpuMs(process.cpuUsage(c0)));
    wall.push(performance.now() - w0);
  }
  return { load_cpu_ms: loadMs, cpu_ms_per_seed: perSeed, wall_ms_per_seed: wall };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [seeds = '1', content = 'ascii', n = '5'] = process.argv.slice(2);
  const r = await floorRun(Number(seeds), workload(content).slice(0, Number(n)));
  console.log(JSON.stringify(r));
  process.exit(0);
}
