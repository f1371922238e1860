// One simulated world: its virtual clock, its timer queue and its peers, each peer in its own
// fresh vm context. Outputs are kept as serialized JSON texts, in the order they happen.
import vm from 'node:vm';
import util from 'node:util';
import { createHash, createHmac, createCipheriv, randomFillSync } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';

const J = JSON.stringify;
/** Timer callbacks fired in one step at most: beyond, an `error` output (the environment
 * variable RELAYSIM_NODE_HOST_MAX_FIRINGS changes it, for tests). */
export const MAX_FIRINGS_PER_STEP = Number(process.env.RELAYSIM_NODE_HOST_MAX_FIRINGS) || 1_000_000;
const ZEROS = new Uint8Array(4096);
const FORMAT_OPTIONS = { colors: false, customInspect: false, depth: 6, maxArrayLength: 100, maxStringLength: 10000, breakLength: Infinity, compact: 3 };

/** A macrotask boundary: every microtask (of every context: they share the isolate's queue) has run. */
const drain = () => new Promise((resolve) => setImmediate(resolve));

/** Binary min-heap of timer entries by (due, seq). */
class TimerHeap {
  constructor() { this.a = []; }
  get size() { return this.a.length; }
  static less(x, y) { return x.due < y.due || (x.due === y.due && x.seq < y.seq); }
  push(e) {
    const a = this.a;
    a.push(e);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!TimerHeap.less(a[i], a[p])) break;
      [a[i], a[p]] = [a[p], a[i]];
      i = p;
    }
  }
  peek() { return this.a[0]; }
  pop() {
    const a = this.a;
    const top = a[0];
    const last = a.pop();
    if (a.length) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1, r = l + 1;
        let m = i;
        if (l < a.length && TimerHeap.less(a[l], a[m])) m = l;
        if (r < a.length && TimerHeap.less(a[r], a[m])) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m], a[i]];
        i = m;
      }
    }
    return top;
  }
}

/** The peer's keystream: ChaCha20 (RFC 8439 block function, counter 0, nonce 0) under
 * key = SHA-256("relaysim-node-host/prng/v1" 0x00 seed-decimal 0x00 peer-name). */
export function peerKeystream(seed, name) {
  const key = createHash('sha256').update('relaysim-node-host/prng/v1\0').update(String(seed)).update('\0').update(name).digest();
  return createCipheriv('chacha20', key, Buffer.alloc(16));
}

export class World {
  /**
   * @param {object} host  { preludeScript, bundleScript, polyfillScripts, closedModules, programName, plant, log }
   * @param {object} msg   the `world` message
   */
  constructor(host, msg) {
    this.host = host;
    this.seed = msg.seed;
    this.epochMs = msg.epoch_ms;
    this.nowUs = msg.now_us ?? 0;
    this.env = msg.env ?? {};
    // `true`: every line; a list: the lines of those levels (e.g. ["program"]: env.log only).
    this.logOutputs = msg.log_outputs === true
      ? () => true
      : Array.isArray(msg.log_outputs)
        ? ((levels) => (level) => levels.has(level))(new Set(msg.log_outputs))
        : () => false;
    this.heap = new TimerHeap();
    this.seq = 0;
    this.outputs = [];
    this.peers = [];
    this.current = null; // the peer whose code runs now (for errors without a peer of their own)
    this.dead = false;
    this.firings = 0;
    this.stepLimitHit = false;
  }

  // ---- outputs ---------------------------------------------------------------------------
  out(text) { if (!this.dead) this.outputs.push(text); }
  error(peer, message) {
    this.out(`{"kind":"error","peer":${peer === null || peer === undefined ? 'null' : peer.index},"error":${J(message)}}`);
  }
  takeOutputs() { const o = this.outputs; this.outputs = []; return o; }
  nextTimerUs() {
    const h = this.heap;
    while (h.size && !h.peek().live) h.pop();
    return h.size ? h.peek().due : null;
  }

  // ---- peers -------------------------------------------------------------------------------
  /** Creates the peer's context, its environment and evaluates the program bundle in it. */
  addPeer(spec, index) {
    const world = this;
    const host = this.host;
    const peer = {
      index, name: spec.name, role: spec.role, spec,
      timers: new Map(), nextSocket: 0, sockets: new Map(), api: null, ctx: null,
      keystream: peerKeystream(this.seed, spec.name),
      ready: false,
    };
    const clock = host.clock;
    const t0 = clock();
    const ctx = vm.createContext({}, { name: `peer ${index} (${spec.name})`, importModuleDynamically: host.onImport });
    const t1 = clock();
    peer.ctx = ctx;
    const encoder = new TextEncoder();
    const live = () => !world.dead;
    const bridge = {
      now: host.plant === 'real-clock'
        ? () => (host.realNowMs() - world.epochMs) * 1000 // PLANTED LEAK (test only): the real clock
        : () => world.nowUs,
      random: host.plant === 'real-random'
        ? (u8) => { randomFillSync(u8); } // PLANTED LEAK (test only): OS randomness
        : (u8) => {
          for (let at = 0; at < u8.length; at += ZEROS.length) {
            const n = Math.min(ZEROS.length, u8.length - at);
            u8.set(peer.keystream.update(n === ZEROS.length ? ZEROS : ZEROS.subarray(0, n)), at);
          }
        },
      timerSet: (id, delayUs, repeatUs) => { if (live()) world.timerSet(peer, id, delayUs, repeatUs); },
      timerClear: (id) => { if (live()) world.timerClear(peer, id); },
      wsConnect: (url, protocols) => {
        const id = peer.nextSocket++;
        peer.sockets.set(id, 'connecting');
        world.out(`{"kind":"connect","peer":${index},"socket":${id},"url":${J(url)}${protocols.length ? `,"protocols":${J(Array.from(protocols, String))}` : ''}}`);
        return id;
      },
      wsSend: (id, text) => { world.out(`{"kind":"send","peer":${index},"socket":${id},"text":${J(text)}}`); },
      wsClose: (id, code, reason) => {
        peer.sockets.set(id, 'closed');
        world.out(`{"kind":"close","peer":${index},"socket":${id},"code":${code === null ? 'null' : code},"reason":${J(reason)}}`);
      },
      log: (level, text) => {
        if (world.dead) return;
        host.log(`[${peer.name}] ${level === 'program' || level === 'log' ? '' : level + ': '}${text}`);
        if (world.logOutputs(level)) world.out(`{"kind":"log","peer":${index},"level":${J(level)},"text":${J(text)}}`);
      },
      format: (args) => util.formatWithOptions(FORMAT_OPTIONS, ...args),
      nondeterminism: (msg) => world.error(peer, msg),
      unsupported: (msg) => world.error(peer, msg),
      report: (msg) => world.error(peer, msg),
      uncaught: (msg) => world.error(peer, `uncaught exception: ${msg}`),
      ready: (ok, message) => {
        peer.ready = ok;
        world.out(ok ? `{"kind":"ready","peer":${index},"ok":true}` : `{"kind":"ready","peer":${index},"ok":false,"error":${J(String(message))}}`);
      },
      outcome: (callId, ok, a, b) => {
        if (ok) world.out(`{"kind":"outcome","peer":${index},"call":${callId},"ok":true,"result":${a}${b === undefined ? '' : `,"chunks":${b}`}}`);
        else world.out(`{"kind":"outcome","peer":${index},"call":${callId},"ok":false,"error":${J(String(a))}}`);
      },
      byteLength: (s) => Buffer.byteLength(s, 'utf8'),
      encodeInto: (s, u8, rw) => { const r = encoder.encodeInto(s, u8); if (rw) { rw[0] = r.read; rw[1] = r.written; } },
      newTextDecoder: (fatal, ignoreBOM) => new TextDecoder('utf-8', { fatal, ignoreBOM }),
      atob: (s) => { try { return atob(s); } catch { return null; } },
      btoa: (s) => { try { return btoa(s); } catch { return null; } },
      newURL: (input, base) => new URL(input, base),
      canParseURL: (input, base) => URL.canParse(input, base),
      newSearchParams: (arg, isJson) => new URLSearchParams(isJson ? JSON.parse(arg) : arg),
      createHash: (alg) => createHash(alg),
      createHmac: (alg, key) => createHmac(alg, key),
      fileURLToPath: (u) => fileURLToPath(u),
      pathToFileURL: (p) => pathToFileURL(p).href,
      polyfill: (name) => host.polyfillScripts[name].script.runInContext(ctx),
      // PLANTED HOLE (test only): an object of the host's realm, handed to the program as
      // env.hostObject, to show that the host realm's own clock and randomness fail loudly.
      plantedHostObject: host.plant === 'host-object' ? {} : undefined,
    };
    const setup = host.preludeScript.script.runInContext(ctx);
    peer.api = setup(bridge, J({
      peer: index, name: spec.name, role: spec.role, epochMs: this.epochMs, env: this.env,
      secretKey: spec.secret_key, relays: spec.relays ?? [], serverPubkey: spec.server_pubkey,
      options: spec.options ?? {}, programName: host.programName, closedModules: host.closedModules,
    }));
    const t2 = clock();
    const fn = host.bundleScript.script.runInContext(ctx);
    this.current = peer;
    peer.loaded = peer.api.runBundle(fn);
    this.current = null;
    const t3 = clock();
    const msOf = (a, b) => Number(b - a) / 1e6;
    peer.setupMs = { context: msOf(t0, t1), prelude: msOf(t1, t2), program: msOf(t2, t3) };
    this.peers.push(peer);
    return peer;
  }

  // ---- timers ---------------------------------------------------------------------------------
  timerSet(peer, id, delayUs, repeatUs) {
    const old = peer.timers.get(id);
    if (old) old.live = false;
    const e = { due: this.nowUs + delayUs, seq: this.seq++, peer, id, repeat: repeatUs, live: true, kind: 'timer' };
    peer.timers.set(id, e);
    this.heap.push(e);
  }
  timerClear(peer, id) {
    const e = peer.timers.get(id);
    if (e) { e.live = false; peer.timers.delete(id); }
  }
  scheduleStart(peer, atUs) {
    this.heap.push({ due: atUs, seq: this.seq++, peer, id: 0, repeat: 0, live: true, kind: 'start' });
  }

  /** Runs `fn` as peer code, then drains every microtask. */
  async run(peer, fn) {
    this.current = peer;
    try { fn(); } finally { await drain(); this.current = null; }
  }

  /** Fires every timer due at or before `limitUs`, in (due, creation) order, each followed by a drain. */
  async runDue(limitUs) {
    for (;;) {
      if (this.dead || this.stepLimitHit) return;
      const due = this.nextTimerUs();
      if (due === null || due > limitUs) break;
      if (++this.firings > MAX_FIRINGS_PER_STEP) {
        this.stepLimitHit = true;
        this.error(this.heap.peek().peer, `runaway timers: more than ${MAX_FIRINGS_PER_STEP} timer callbacks in one step (virtual time ${this.nowUs} us); the rest of the step was not run`);
        return;
      }
      const e = this.heap.pop();
      if (e.due > this.nowUs) this.nowUs = e.due;
      if (e.kind === 'start') {
        await this.run(e.peer, () => this.startPeer(e.peer));
        continue;
      }
      const { peer, id } = e;
      await this.run(peer, () => peer.api.fire(id));
      // A timer is done once fired; an interval is due again `repeat` after this firing, unless
      // its callback cleared (or refreshed) it.
      if (peer.timers.get(id) === e) {
        if (e.repeat > 0 && !this.dead) {
          const next = { ...e, due: e.due + e.repeat, seq: this.seq++ };
          peer.timers.set(id, next);
          this.heap.push(next);
        } else {
          peer.timers.delete(id);
        }
      }
      e.live = false;
    }
  }

  startPeer(peer) {
    if (peer.started) return;
    peer.started = true;
    if (!peer.loaded) {
      this.out(`{"kind":"ready","peer":${peer.index},"ok":false,"error":"the program failed to load"}`);
      return;
    }
    peer.api.start();
  }

  end() {
    this.dead = true;
    this.heap = new TimerHeap();
    for (const p of this.peers) { p.api = null; p.ctx = null; p.timers.clear(); }
    this.peers = [];
  }
}
