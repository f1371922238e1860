// A tiny stand-in for relaysim: spawns a host, speaks the line protocol to it, and plays one
// ideal relay (OK for every EVENT, live fan-out to matching REQs of other sockets, EOSE at once,
// nothing stored) with a fixed latency per hop, in virtual time.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
export const HOST = path.resolve(here, '..', '..', 'host.mjs');
export const TS_SDK = path.resolve(here, '..', '..', '..', 'ts-sdk');
export const PROGRAM = path.join(TS_SDK, 'program.mjs');
export const RELAY_URL = 'ws://relay.relaysim.invalid/';

// Fixed keys (those of ts-sdk/peers.mjs).
export const SERVER_SK = '52ba0c7a1e5b9f8c2ce1af5c4977d6d2046aab89620bc4ad3338f514db3f1fb4';
export const CLIENT_SK = 'baf3964b39d7878d9e282f0ec71807d674c2b3863a7c6cad19578104e5a4a22a';
export async function pubkeyOf(sk) {
  const req = createRequire(path.join(TS_SDK, 'package.json'));
  const m = await import(req.resolve('nostr-tools/pure'));
  const getPublicKey = m.getPublicKey ?? m.default.getPublicKey;
  return getPublicKey(Uint8Array.from(Buffer.from(sk, 'hex')));
}

const live = new Set();
/** Kills every host process still running (use in an `after` hook: a failed test leaves its host). */
export function killHosts() {
  for (const h of live) {
    h.proc.stdin.destroy(); // EOF ends the host
    h.proc.kill('SIGTERM'); // passed on to the re-executed host by host.mjs
    h.proc.stdout.destroy(); h.proc.stderr.destroy();
  }
  live.clear();
}

/** A host process: send() writes one line and resolves with the parsed reply (and its raw text). */
export class Host {
  constructor(program = PROGRAM, env = {}, nodeArgs = []) {
    live.add(this);
    this.proc = spawn(process.execPath, [...nodeArgs, HOST, '--program', program], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    this.lines = [];        // every line the host wrote on stdout (the transcript)
    this.waiters = [];
    this.stderr = '';
    this.buf = [];
    this.proc.stdout.on('data', (b) => {
      let from = 0;
      for (let nl = b.indexOf(10); nl !== -1; nl = b.indexOf(10, from)) {
        this.buf.push(b.subarray(from, nl));
        const line = Buffer.concat(this.buf).toString('utf8');
        this.buf = [];
        from = nl + 1;
        this.lines.push(line);
        const w = this.waiters.shift();
        if (w) w.resolve(line);
        else this.early = line;
      }
      if (from < b.length) this.buf.push(b.subarray(from));
    });
    this.proc.stderr.on('data', (b) => { this.stderr += b.toString('utf8'); });
    this.exited = new Promise((resolve) => this.proc.on('exit', (code) => {
      live.delete(this);
      this.exitCode = code;
      for (const w of this.waiters.splice(0)) w.reject(new Error(`host exited (${code}); stderr:\n${this.stderr.slice(-4000)}`));
      resolve(code);
    }));
  }
  nextLine() {
    if (this.early !== undefined) { const l = this.early; this.early = undefined; return Promise.resolve(l); }
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }
  async hello() { return JSON.parse(await this.nextLine()); }
  async send(obj) {
    const p = this.nextLine();
    this.proc.stdin.write(JSON.stringify(obj) + '\n');
    return JSON.parse(await p);
  }
  async close() {
    this.proc.stdin.end();
    return this.exited;
  }
  /** `stats {...}` lines the host wrote on stderr (RELAYSIM_NODE_HOST_STATS=1). */
  stats() {
    return this.stderr.split('\n').filter((l) => l.startsWith('stats ')).map((l) => JSON.parse(l.slice(6)));
  }
}

/** Binary heap by (t, seq). */
class Queue {
  constructor() { this.a = []; this.seq = 0; }
  get size() { return this.a.length; }
  less(x, y) { return x.t < y.t || (x.t === y.t && x.seq < y.seq); }
  push(t, item) {
    const a = this.a; a.push({ t, seq: this.seq++, item });
    for (let i = a.length - 1; i > 0;) { const p = (i - 1) >> 1; if (!this.less(a[i], a[p])) break; [a[i], a[p]] = [a[p], a[i]]; i = p; }
  }
  peek() { return this.a[0]; }
  pop() {
    const a = this.a, top = a[0], last = a.pop();
    if (a.length) {
      a[0] = last;
      for (let i = 0; ;) {
        const l = 2 * i + 1, r = l + 1; let m = i;
        if (l < a.length && this.less(a[l], a[m])) m = l;
        if (r < a.length && this.less(a[r], a[m])) m = r;
        if (m === i) break; [a[i], a[m]] = [a[m], a[i]]; i = m;
      }
    }
    return top;
  }
}

function matches(filter, ev) {
  if (filter.ids && !filter.ids.includes(ev.id)) return false;
  if (filter.authors && !filter.authors.includes(ev.pubkey)) return false;
  if (filter.kinds && !filter.kinds.includes(ev.kind)) return false;
  if (filter.since !== undefined && ev.created_at < filter.since) return false;
  if (filter.until !== undefined && ev.created_at > filter.until) return false;
  for (const [k, vals] of Object.entries(filter)) {
    if (k[0] !== '#' || !Array.isArray(vals)) continue;
    const tag = k.slice(1);
    if (!ev.tags.some((t) => t[0] === tag && vals.includes(t[1]))) return false;
  }
  return true;
}

/**
 * One world on one ideal relay. `run(script)` drives it until `script` says it is done.
 * Counts what the relay saw (`frames`: CEP-22 frame types and CEP-41 chunk frames, by sender).
 */
export class RelayWorld {
  constructor(host, { seed, epochMs = 1_700_000_000_000, latencyUs = 1000, peers, env = { LOG_LEVEL: 'warn' } }) {
    this.host = host;
    this.seed = seed; this.epochMs = epochMs; this.latencyUs = latencyUs;
    this.peerSpecs = peers; this.env = env;
    this.q = new Queue();
    this.now = 0;
    this.nextTimer = null;
    this.conns = new Map(); // "peer/socket" -> { peer, socket, subs: Map }
    this.outcomes = new Map();
    this.ready = new Map();
    this.errors = [];
    this.logs = [];
    this.frames = { oversized: {}, streamChunks: 0, events: 0, bytesPublished: 0, progress: [] };
    this.steps = 0;
  }
  key(p, s) { return `${p}/${s}`; }

  handleOutputs(outputs) {
    for (const o of outputs) {
      switch (o.kind) {
        case 'connect':
          this.q.push(this.now + this.latencyUs, { relay: 'connect', peer: o.peer, socket: o.socket, url: o.url });
          break;
        case 'send':
          this.q.push(this.now + this.latencyUs, { relay: 'frame', peer: o.peer, socket: o.socket, text: o.text });
          break;
        case 'close':
          this.q.push(this.now + this.latencyUs, { relay: 'gone', peer: o.peer, socket: o.socket });
          break;
        case 'outcome': this.outcomes.set(o.call, o); break;
        case 'ready': this.ready.set(o.peer, o); break;
        case 'error': this.errors.push(o); break;
        case 'log': this.logs.push(o); break;
        default: throw new Error(`unknown output kind ${o.kind}`);
      }
    }
  }

  /** The relay's work when a frame reaches it (at this.now); deliveries arrive a hop later. */
  relay(item) {
    const at = this.now + this.latencyUs;
    const deliver = (peer, socket, text) => this.q.push(at, { input: { kind: 'message', peer, socket, text } });
    if (item.relay === 'connect') {
      if (item.url === RELAY_URL) {
        this.conns.set(this.key(item.peer, item.socket), { peer: item.peer, socket: item.socket, subs: new Map() });
        this.q.push(at, { input: { kind: 'open', peer: item.peer, socket: item.socket } });
      } else {
        this.q.push(at, { input: { kind: 'close', peer: item.peer, socket: item.socket, code: 1006, reason: '' } });
      }
      return;
    }
    const conn = this.conns.get(this.key(item.peer, item.socket));
    if (item.relay === 'gone') { this.conns.delete(this.key(item.peer, item.socket)); return; }
    if (!conn) return;
    const msg = JSON.parse(item.text);
    if (msg[0] === 'EVENT') {
      const ev = msg[1];
      this.frames.events += 1;
      this.frames.bytesPublished += Buffer.byteLength(item.text);
      this.countFrame(ev);
      deliver(item.peer, item.socket, JSON.stringify(['OK', ev.id, true, '']));
      for (const other of this.conns.values()) {
        if (other === conn) continue;
        for (const [subId, filters] of other.subs) {
          if (filters.some((f) => matches(f, ev))) {
            deliver(other.peer, other.socket, `["EVENT",${JSON.stringify(subId)},${JSON.stringify(ev)}]`);
          }
        }
      }
    } else if (msg[0] === 'REQ') {
      conn.subs.set(msg[1], msg.slice(2));
      deliver(item.peer, item.socket, JSON.stringify(['EOSE', msg[1]]));
    } else if (msg[0] === 'CLOSE') {
      conn.subs.delete(msg[1]);
    }
  }
  countFrame(ev) {
    let msg, cvm;
    try { msg = JSON.parse(ev.content); cvm = msg?.params?.cvm; } catch { return; }
    if (msg?.method === 'notifications/progress' && !cvm) this.frames.progress.push(msg.params);
    if (cvm?.type === 'oversized-transfer') this.frames.oversized[cvm.frameType] = (this.frames.oversized[cvm.frameType] ?? 0) + 1;
    if (cvm?.type === 'open-stream' && cvm.frameType === 'chunk') this.frames.streamChunks += 1;
  }

  async start() {
    const msg = { type: 'world', seed: String(this.seed), epoch_ms: this.epochMs, env: this.env, peers: this.peerSpecs };
    const r = await this.host.send(msg);
    this.handleReply(r);
  }
  handleReply(r) {
    if (r.type !== 'out') throw new Error(`expected out, got ${JSON.stringify(r).slice(0, 300)}`);
    this.nextTimer = r.next_timer_us;
    this.handleOutputs(r.outputs);
  }
  /** Adds inputs for the next step at virtual time `t` (e.g. calls). */
  inject(t, input) { this.q.push(t, { input }); }

  /** One step: the earliest of (queued relay work/inputs, the host's next timer). False when idle. */
  async step() {
    let t = this.q.size ? this.q.peek().t : null;
    if (this.nextTimer !== null && (t === null || this.nextTimer < t)) t = this.nextTimer;
    if (t === null) return false;
    this.now = Math.max(this.now, t);
    const inputs = [];
    while (this.q.size && this.q.peek().t <= this.now) {
      const { item } = this.q.pop();
      if (item.input) inputs.push(item.input);
      else this.relay(item);
    }
    // Relay work may have queued inputs for later; only inputs due now go in this step.
    const r = await this.host.send({ type: 'step', now_us: this.now, inputs });
    this.steps += 1;
    this.handleReply(r);
    return true;
  }

  /** Steps until `done()` is true; fails past `limitUs` of virtual time or when idle. */
  async runUntil(done, limitUs = 600_000_000) {
    while (!done()) {
      if (this.now > limitUs) throw new Error(`virtual time limit ${limitUs} us reached`);
      if (!(await this.step())) throw new Error('the world went idle before it was done');
    }
  }
  async end() { return this.host.send({ type: 'end' }); }
}

/** The standard two peers: a server and a client of program.mjs on the one relay. */
/** The client is started (a `start` input) once the server is ready: see runCalls. */
export async function standardPeers({ clientStartUs = null, options = {} } = {}) {
  const serverPubkey = await pubkeyOf(SERVER_SK);
  return [
    { peer: 0, role: 'server', name: 'server', secret_key: SERVER_SK, relays: [RELAY_URL], options },
    { peer: 1, role: 'client', name: 'client', secret_key: CLIENT_SK, server_pubkey: serverPubkey, relays: [RELAY_URL], options, start_us: clientStartUs },
  ];
}

/** The standard workload: echo, a 1 MiB CEP-22 result, a 100-chunk stream, upload, fail. */
export function workload(content = 'ascii') {
  return [
    { name: 'echo', arguments: { text: 'hello relaysim, héllo ✓' } },
    { name: 'large_result', arguments: { bytes: 1 << 20, content }, progress: true },
    { name: 'stream', arguments: { chunks: 100, chunk_bytes: 64, interval_ms: 10 }, stream: true },
    { name: 'upload', arguments: { data: 'upload payload ✓ '.repeat(100) } },
    { name: 'fail', arguments: { reason: 'planned failure' } },
  ];
}
export const WORKLOAD = workload(process.env.WL_CONTENT ?? 'ascii');

/** Runs `calls` one after another on the client (peer 1), each once the previous has an outcome. */
export async function runCalls(world, calls, { firstAtUs } = {}) {
  if (world.peerSpecs[1].start_us === null) {
    await world.runUntil(() => world.ready.has(0) || world.errors.length > 0);
    if (!world.ready.get(0)?.ok) throw new Error(`server not ready: ${JSON.stringify(world.ready.get(0))} ${JSON.stringify(world.errors)}`);
    world.inject(world.now, { kind: 'start', peer: 1 });
  }
  await world.runUntil(() => world.ready.has(1) || world.errors.length > 0);
  if (!world.ready.get(1)?.ok) throw new Error(`client not ready: ${JSON.stringify(world.ready.get(1))} ${JSON.stringify(world.errors)}`);
  const ids = [];
  for (const [i, c] of calls.entries()) {
    const id = 100 + i;
    ids.push(id);
    world.inject(i === 0 && firstAtUs !== undefined ? firstAtUs : world.now, { kind: 'call', peer: 1, call: id, name: c.name, arguments: c.arguments, progress: !!c.progress, stream: !!c.stream });
    await world.runUntil(() => world.outcomes.has(id));
  }
  return ids.map((id) => world.outcomes.get(id));
}

/**
 * One world of the standard workload on `host`: returns its outcomes (by workload index), what
 * the relay saw, the host's error outputs and the exact host lines of this world (world → ended).
 */
export async function workloadWorld(host, seed, calls = WORKLOAD, opts = {}) {
  const first = host.lines.length;
  const world = new RelayWorld(host, { seed, peers: await standardPeers(opts), ...opts.world });
  await world.start();
  const outcomes = await runCalls(world, calls);
  await world.end();
  return { outcomes, frames: world.frames, errors: world.errors, lines: host.lines.slice(first), world };
}
