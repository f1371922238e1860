// The environment of one peer, built inside that peer's own vm context (so every object and
// function the program can reach belongs to the context's realm, and nothing is shared with
// other peers or worlds). Evaluated once per context; its completion value is `setup`, which
// the host calls with the peer's bridge (host functions, captured here in closures and never
// exposed) and the peer's configuration (a JSON string, parsed here so it is realm-local).
//
// Everything that could make a run depend on anything but the host's input lines is either
// virtual (clock, timers, randomness, sockets) or closed: touching it throws an Error whose
// message starts with "relaysim-node-host: nondeterminism:" and reports an `error` output at
// once (even if the program catches the exception).
(function () {
  'use strict';
  // Intrinsics, taken before the program can change them.
  const O = Object, R = Reflect, A = Array, J = JSON, S = String, N = Number, P = Promise;
  const U8 = Uint8Array, AB = ArrayBuffer, DV = DataView, ERR = Error, TE = TypeError, RE = RangeError;
  const MathObj = Math, floor = Math.floor, min = Math.min, max = Math.max;
  const freeze = O.freeze, defineProperty = O.defineProperty, defineProperties = O.defineProperties;
  const promiseResolve = (v) => P.resolve(v);
  const promiseThen = (p, f, r) => P.prototype.then.call(p, f, r);
  const isView = AB.isView;
  const hasOwn = (o, k) => O.prototype.hasOwnProperty.call(o, k);
  const RealDate = Date;
  const realDateProto = RealDate.prototype;

  return function setup(bridge, configJson) {
    const cfg = J.parse(configJson);
    const g = globalThis;
    // node --expose-gc puts a gc() in every context (writable, not configurable): the program
    // gets no say in collection.
    if (typeof g.gc === 'function') g.gc = undefined;
    const PEER = cfg.name;
    const EPOCH_MS = cfg.epochMs;
    const HOST = 'relaysim-node-host';

    // ---- loud failures, uncaught errors --------------------------------------------------
    const messageOf = (e) => {
      try {
        if (e && typeof e === 'object' && typeof e.message === 'string') return e.message;
        return S(e);
      } catch (_) { return '<unprintable error>'; }
    };
    /** Real clock, OS randomness, real network, real processes or files: report and throw. */
    function loud(what) {
      const msg = `${HOST}: nondeterminism: ${what} (closed in relaysim's simulated world)`;
      bridge.nondeterminism(msg);
      throw new ERR(msg);
    }
    /** Something the host does not offer (not a nondeterminism leak, but still an error). */
    function unsupported(what) {
      const msg = `${HOST}: not provided: ${what}`;
      bridge.unsupported(msg);
      throw new ERR(msg);
    }
    function uncaught(e, where) {
      let text = messageOf(e);
      try { if (e && typeof e.stack === 'string') text = e.stack; } catch (_) { /* keep message */ }
      bridge.uncaught(`${where}: ${text}`);
    }
    const guard = (fn, where) => function () {
      try { return R.apply(fn, this, arguments); } catch (e) { uncaught(e, where); }
    };

    // An exception thrown by host code is an object of the host's realm: never let one reach the
    // program (its constructor chain leads to the host's globals). Rebuild it in this realm.
    function realmError(e) {
      if (e instanceof ERR) return e; // already this realm's (e.g. thrown by program code)
      let name = 'Error', message = '', code;
      try { name = S(e?.name ?? 'Error'); message = S(e?.message ?? e); code = e?.code; } catch (_) { /* keep defaults */ }
      const C = name === 'TypeError' ? TE : name === 'RangeError' ? RE : name === 'SyntaxError' ? SyntaxError : ERR;
      const x = new C(message);
      if (code !== undefined) x.code = S(code);
      return x;
    }
    const hc = (fn) => { try { return fn(); } catch (e) { throw realmError(e); } };
    const fmt = (args) => hc(() => bridge.format(args));

    // Stack traces: frames of the host's own code (its files, node's internals) would put the
    // host's installation path and line numbers into the program's error texts; they show as
    // one "at <relaysim-node-host>" line instead. V8's format otherwise.
    const errToString = ERR.prototype.toString;
    ERR.prepareStackTrace = function prepareStackTrace(error, frames) {
      let head;
      try { head = R.apply(errToString, error, []); } catch (_) { head = 'Error'; }
      let out = head, hidden = false;
      for (const f of frames) {
        const file = S(f.getFileName?.() ?? '');
        if (file.startsWith('file:') || file.startsWith('node:') || file.startsWith('/')) {
          if (!hidden) out += '\n    at <relaysim-node-host>';
          hidden = true;
          continue;
        }
        hidden = false;
        out += '\n    at ' + f.toString();
      }
      return out;
    };

    // ---- virtual clock ---------------------------------------------------------------------
    const nowUs = bridge.now; // virtual microseconds since virtual 0
    const nowMs = () => EPOCH_MS + floor(nowUs() / 1000);
    function Date(...args) {
      if (new.target === undefined) return new RealDate(nowMs()).toString();
      if (args.length === 0) return R.construct(RealDate, [nowMs()], new.target);
      return R.construct(RealDate, args, new.target);
    }
    defineProperty(Date, 'length', { value: 7 });
    Date.prototype = realDateProto;
    defineProperty(realDateProto, 'constructor', { value: Date, writable: true, configurable: true, enumerable: false });
    Date.now = function now() { return nowMs(); };
    Date.parse = RealDate.parse;
    Date.UTC = RealDate.UTC;
    g.Date = Date;

    const performance = {
      now() { return nowUs() / 1000; },
      timeOrigin: EPOCH_MS,
      timing: undefined,
      mark() { return undefined; },
      measure() { return undefined; },
      clearMarks() {}, clearMeasures() {},
      getEntries() { return []; }, getEntriesByName() { return []; }, getEntriesByType() { return []; },
      toJSON() { return { timeOrigin: EPOCH_MS }; },
    };
    defineProperty(performance, 'eventLoopUtilization', { get() { return loud('performance.eventLoopUtilization (real CPU time)'); } });
    g.performance = performance;

    // ---- seeded randomness ------------------------------------------------------------------
    // Bytes come from the peer's own keystream (see PROTOCOL.md "Randomness"), 4 KiB at a time.
    const pool = new U8(4096);
    let poolAt = pool.length;
    function randomInto(bytes) { // bytes: a Uint8Array of this realm
      let at = 0;
      while (at < bytes.length) {
        if (poolAt === pool.length) { bridge.random(pool); poolAt = 0; }
        const n = min(pool.length - poolAt, bytes.length - at);
        bytes.set(pool.subarray(poolAt, poolAt + n), at);
        poolAt += n; at += n;
      }
    }
    const bytesOf = (view) => new U8(view.buffer, view.byteOffset, view.byteLength);
    MathObj.random = function random() {
      const b = new U8(7);
      randomInto(b);
      // 53 bits: 21 from the first three bytes, 32 from the other four.
      const hi = (b[0] << 13) | (b[1] << 5) | (b[2] >>> 3);
      const lo = ((b[3] << 24) | (b[4] << 16) | (b[5] << 8) | b[6]) >>> 0;
      return (hi * 4294967296 + lo) / 9007199254740992;
    };
    function getRandomValues(view) {
      if (!isView(view) || view instanceof DV || view instanceof Float32Array || view instanceof Float64Array)
        throw new DOMException("Failed to execute 'getRandomValues' on 'Crypto': The provided ArrayBufferView is of type not an integer type.", 'TypeMismatchError');
      if (view.byteLength > 65536)
        throw new DOMException(`Failed to execute 'getRandomValues' on 'Crypto': The ArrayBufferView's byte length (${view.byteLength}) exceeds the number of bytes of entropy available via this API (65536).`, 'QuotaExceededError');
      randomInto(bytesOf(view));
      return view;
    }
    function randomUUID() {
      const b = new U8(16);
      randomInto(b);
      b[6] = (b[6] & 0x0f) | 0x40;
      b[8] = (b[8] & 0x3f) | 0x80;
      let h = '';
      for (let i = 0; i < 16; i++) h += (b[i] < 16 ? '0' : '') + b[i].toString(16);
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    }

    // ---- microtasks -------------------------------------------------------------------------
    function queueMicrotask(cb) {
      if (typeof cb !== 'function') throw new TE('The "callback" argument must be of type function. Received ' + typeof cb);
      promiseThen(promiseResolve(undefined), () => { try { cb(); } catch (e) { uncaught(e, 'queueMicrotask callback'); } });
    }
    function nextTick(cb, ...args) {
      if (typeof cb !== 'function') throw new TE('The "callback" argument must be of type function. Received ' + typeof cb);
      promiseThen(promiseResolve(undefined), () => { try { R.apply(cb, undefined, args); } catch (e) { uncaught(e, 'process.nextTick callback'); } });
    }
    g.queueMicrotask = queueMicrotask;

    // ---- virtual timers ---------------------------------------------------------------------
    // The host keeps one queue per world, ordered by (due time, creation order); it calls
    // `fire(id)` when a timer is due. Ids are per peer: 1, 2, 3, ...
    const timers = new Map();
    let nextTimerId = 1;
    const TIMEOUT_MAX = 2147483647;
    const toDelayUs = (delay) => {
      delay = N(delay);
      if (!(delay >= 1 && delay <= TIMEOUT_MAX)) delay = 1; // as node does
      return MathObj.round(delay * 1000);
    };
    class Timeout {
      constructor(id, delayUs, repeat) { this._id = id; this._delayUs = delayUs; this._repeat = repeat; }
      ref() { return this; }
      unref() { return this; }
      hasRef() { return true; }
      refresh() {
        if (timers.has(this._id)) bridge.timerSet(this._id, this._delayUs, this._repeat ? this._delayUs : 0);
        return this;
      }
      close() { clearTimer(this); return this; }
      [Symbol.toPrimitive]() { return this._id; }
    }
    class Immediate {
      constructor(id) { this._id = id; }
      ref() { return this; }
      unref() { return this; }
      hasRef() { return true; }
      [Symbol.toPrimitive]() { return this._id; }
    }
    function addTimer(cb, delayUs, repeat, args, Kind) {
      if (typeof cb !== 'function') throw new TE('The "callback" argument must be of type function. Received ' + typeof cb);
      const id = nextTimerId++;
      timers.set(id, { cb, args, repeat });
      bridge.timerSet(id, delayUs, repeat ? delayUs : 0);
      return Kind === Immediate ? new Immediate(id) : new Timeout(id, delayUs, repeat);
    }
    function clearTimer(t) {
      if (t === null || t === undefined) return;
      const id = typeof t === 'object' ? t._id : N(t);
      if (timers.delete(id)) bridge.timerClear(id);
    }
    const setTimeout = function setTimeout(cb, delay, ...args) { return addTimer(cb, toDelayUs(delay), false, args, Timeout); };
    const setInterval = function setInterval(cb, delay, ...args) { return addTimer(cb, toDelayUs(delay), true, args, Timeout); };
    const setImmediate = function setImmediate(cb, ...args) { return addTimer(cb, 0, false, args, Immediate); };
    const clearTimeout = function clearTimeout(t) { clearTimer(t); };
    O.assign(g, { setTimeout, setInterval, setImmediate, clearTimeout, clearInterval: clearTimeout, clearImmediate: clearTimeout });
    function fire(id) {
      const t = timers.get(id);
      if (!t) return;
      if (!t.repeat) timers.delete(id);
      try { R.apply(t.cb, undefined, t.args); } catch (e) { uncaught(e, 'timer callback'); }
    }

    // ---- DOMException, Event, EventTarget, AbortController ------------------------------------
    const DOM_CODES = { IndexSizeError: 1, HierarchyRequestError: 3, WrongDocumentError: 4, InvalidCharacterError: 5,
      NoModificationAllowedError: 7, NotFoundError: 8, NotSupportedError: 9, InvalidStateError: 11, SyntaxError: 12,
      InvalidModificationError: 13, NamespaceError: 14, InvalidAccessError: 15, TypeMismatchError: 17, SecurityError: 18,
      NetworkError: 19, AbortError: 20, URLMismatchError: 21, QuotaExceededError: 22, TimeoutError: 23,
      InvalidNodeTypeError: 24, DataCloneError: 25 };
    class DOMException extends ERR {
      constructor(message = '', name = 'Error') {
        super(S(message));
        defineProperty(this, 'name', { value: S(name), configurable: true, writable: true, enumerable: false });
      }
      get code() { return DOM_CODES[this.name] ?? 0; }
    }
    for (const [k, v] of O.entries(DOM_CODES)) {
      const c = k.replace(/Error$/, '').replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase() + '_ERR';
      defineProperty(DOMException, c, { value: v, enumerable: true });
    }
    g.DOMException = DOMException;

    class Event {
      constructor(type, init) {
        if (arguments.length === 0) throw new TE('The "type" argument must be specified');
        this.type = S(type);
        this.bubbles = !!init?.bubbles;
        this.cancelable = !!init?.cancelable;
        this.composed = !!init?.composed;
        this.defaultPrevented = false;
        this.timeStamp = performance.now();
        this.target = null;
        this.currentTarget = null;
        this.eventPhase = 0;
        this.isTrusted = false;
        this._stop = false;
      }
      get srcElement() { return this.target; }
      get returnValue() { return !this.defaultPrevented; }
      preventDefault() { if (this.cancelable) this.defaultPrevented = true; }
      stopPropagation() {}
      stopImmediatePropagation() { this._stop = true; }
      composedPath() { return this.currentTarget ? [this.currentTarget] : []; }
    }
    O.assign(Event, { NONE: 0, CAPTURING_PHASE: 1, AT_TARGET: 2, BUBBLING_PHASE: 3 });
    class MessageEvent extends Event {
      constructor(type, init) {
        super(type, init);
        this.data = init?.data ?? null;
        this.origin = init?.origin ?? '';
        this.lastEventId = init?.lastEventId ?? '';
        this.source = init?.source ?? null;
        this.ports = init?.ports ?? [];
      }
    }
    class CloseEvent extends Event {
      constructor(type, init) {
        super(type, init);
        this.code = init?.code ?? 0;
        this.reason = init?.reason ?? '';
        this.wasClean = !!init?.wasClean;
      }
    }
    class ErrorEvent extends Event {
      constructor(type, init) {
        super(type, init);
        this.message = init?.message ?? '';
        this.error = init?.error;
        this.filename = ''; this.lineno = 0; this.colno = 0;
      }
    }
    class CustomEvent extends Event {
      constructor(type, init) { super(type, init); this.detail = init?.detail ?? null; }
    }
    const LISTENERS = Symbol('listeners');
    class EventTarget {
      constructor() { defineProperty(this, LISTENERS, { value: new Map() }); }
      addEventListener(type, listener, options) {
        if (listener === null || listener === undefined) return;
        const capture = typeof options === 'boolean' ? options : !!options?.capture;
        const once = typeof options === 'object' && !!options?.once;
        const signal = typeof options === 'object' ? options?.signal : undefined;
        if (signal?.aborted) return;
        let list = this[LISTENERS].get(type);
        if (!list) this[LISTENERS].set(type, (list = []));
        if (list.some((l) => l.listener === listener && l.capture === capture)) return;
        const entry = { listener, capture, once, removed: false };
        list.push(entry);
        if (signal) signal.addEventListener('abort', () => this.removeEventListener(type, listener, { capture }));
      }
      removeEventListener(type, listener, options) {
        const capture = typeof options === 'boolean' ? options : !!options?.capture;
        const list = this[LISTENERS].get(type);
        if (!list) return;
        const i = list.findIndex((l) => l.listener === listener && l.capture === capture);
        if (i >= 0) { list[i].removed = true; list.splice(i, 1); }
      }
      dispatchEvent(event) {
        if (!(event instanceof Event)) throw new TE('The "event" argument must be an instance of Event. Received ' + typeof event);
        event.target = this; event.currentTarget = this; event.eventPhase = 2;
        const list = this[LISTENERS].get(event.type);
        if (list) {
          for (const l of list.slice()) {
            if (l.removed) continue;
            if (l.once) this.removeEventListener(event.type, l.listener, { capture: l.capture });
            try {
              if (typeof l.listener === 'function') R.apply(l.listener, this, [event]);
              else if (l.listener && typeof l.listener.handleEvent === 'function') l.listener.handleEvent(event);
            } catch (e) { uncaught(e, `'${event.type}' event listener`); }
            if (event._stop) break;
          }
        }
        event.currentTarget = null; event.eventPhase = 0;
        return !event.defaultPrevented;
      }
    }
    /** `on<type>` attributes: a listener registered where the attribute was first set. */
    function eventHandlerAttribute(proto, type) {
      const slot = Symbol('on' + type);
      defineProperty(proto, 'on' + type, {
        configurable: true, enumerable: true,
        get() { return this[slot]?.value ?? null; },
        set(v) {
          const value = typeof v === 'function' || (v && typeof v === 'object') ? v : null;
          if (!this[slot]) {
            const holder = { value: null };
            defineProperty(this, slot, { value: holder });
            this.addEventListener(type, function (ev) {
              const h = holder.value;
              if (typeof h === 'function') return R.apply(h, this, [ev]);
            });
          }
          this[slot].value = value;
        },
      });
    }
    class AbortSignal extends EventTarget {
      constructor(key) {
        if (key !== ABORT_KEY) throw new TE('Illegal constructor');
        super();
        this._aborted = false;
        this._reason = undefined;
      }
      get aborted() { return this._aborted; }
      get reason() { return this._reason; }
      throwIfAborted() { if (this._aborted) throw this._reason; }
      static abort(reason) {
        const s = new AbortSignal(ABORT_KEY);
        s._aborted = true;
        s._reason = reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
        return s;
      }
      static timeout(ms) {
        const s = new AbortSignal(ABORT_KEY);
        setTimeout(() => abortSignal(s, new DOMException('The operation was aborted due to timeout', 'TimeoutError')), ms);
        return s;
      }
      static any(signals) {
        const s = new AbortSignal(ABORT_KEY);
        for (const x of signals) {
          if (x.aborted) { s._aborted = true; s._reason = x.reason; return s; }
        }
        for (const x of signals) x.addEventListener('abort', () => abortSignal(s, x.reason), { once: true });
        return s;
      }
    }
    const ABORT_KEY = Symbol('abort');
    eventHandlerAttribute(AbortSignal.prototype, 'abort');
    function abortSignal(s, reason) {
      if (s._aborted) return;
      s._aborted = true;
      s._reason = reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
      s.dispatchEvent(new Event('abort'));
    }
    class AbortController {
      constructor() { this._signal = new AbortSignal(ABORT_KEY); }
      get signal() { return this._signal; }
      abort(reason) { abortSignal(this._signal, reason); }
    }
    O.assign(g, { Event, EventTarget, MessageEvent, CloseEvent, ErrorEvent, CustomEvent, AbortController, AbortSignal });

    // ---- encoding ---------------------------------------------------------------------------------
    // UTF-8 of a short string, in this realm (the SDK encodes one character at a time when it
    // splits CEP-22 payloads: a call into the host per character would cost more than the work).
    // Lone surrogates become U+FFFD, as TextEncoder does.
    function utf8Short(s) {
      const n = s.length;
      let len = 0;
      for (let i = 0; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c < 0x80) len += 1;
        else if (c < 0x800) len += 2;
        else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) { len += 4; i++; }
        else len += 3;
      }
      const out = new U8(len);
      let j = 0;
      for (let i = 0; i < n; i++) {
        let c = s.charCodeAt(i);
        if (c < 0x80) { out[j++] = c; continue; }
        if (c < 0x800) { out[j++] = 0xc0 | (c >> 6); out[j++] = 0x80 | (c & 63); continue; }
        if (c >= 0xd800 && c <= 0xdfff) {
          const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
          if (c <= 0xdbff && (d & 0xfc00) === 0xdc00) {
            const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
            out[j++] = 0xf0 | (cp >> 18); out[j++] = 0x80 | ((cp >> 12) & 63);
            out[j++] = 0x80 | ((cp >> 6) & 63); out[j++] = 0x80 | (cp & 63);
            i++;
            continue;
          }
          c = 0xfffd;
        }
        out[j++] = 0xe0 | (c >> 12); out[j++] = 0x80 | ((c >> 6) & 63); out[j++] = 0x80 | (c & 63);
      }
      return out;
    }
    const SHORT = 64;
    class TextEncoder {
      get encoding() { return 'utf-8'; }
      encode(input = '') {
        const s = S(input);
        if (s.length <= SHORT) return utf8Short(s);
        const out = new U8(bridge.byteLength(s));
        bridge.encodeInto(s, out, null);
        return out;
      }
      encodeInto(input, dest) {
        if (!(dest instanceof U8)) throw new TE('The "dest" argument must be an instance of Uint8Array.');
        const rw = new Uint32Array(2);
        bridge.encodeInto(S(input), dest, rw);
        return { read: rw[0], written: rw[1] };
      }
    }
    class TextDecoder {
      #d; #enc; #fatal; #bom;
      constructor(label = 'utf-8', options) {
        const l = S(label).trim().toLowerCase();
        if (l !== 'utf-8' && l !== 'utf8' && l !== 'unicode-1-1-utf-8')
          throw new RE(`The "${label}" encoding is not supported by ${HOST}`);
        this.#fatal = !!options?.fatal; this.#bom = !!options?.ignoreBOM; this.#enc = 'utf-8';
        this.#d = bridge.newTextDecoder(this.#fatal, this.#bom);
      }
      get encoding() { return this.#enc; }
      get fatal() { return this.#fatal; }
      get ignoreBOM() { return this.#bom; }
      decode(input, options) {
        if (input !== undefined && !isView(input) && !(input instanceof AB) && !(typeof SharedArrayBuffer !== 'undefined' && input instanceof SharedArrayBuffer))
          throw new TE('The "input" argument must be an instance of ArrayBuffer or ArrayBufferView');
        try { return this.#d.decode(input, options ? { stream: !!options.stream } : undefined); }
        catch (e) { throw toTypeError(e); }
      }
    }
    const atob = (s) => {
      const r = bridge.atob(S(s));
      if (r === null) throw new DOMException('The string to be decoded is not correctly encoded.', 'InvalidCharacterError');
      return r;
    };
    const btoa = (s) => {
      const r = bridge.btoa(S(s));
      if (r === null) throw new DOMException('Invalid character', 'InvalidCharacterError');
      return r;
    };
    O.assign(g, { TextEncoder, TextDecoder, atob, btoa });

    // ---- URL ----------------------------------------------------------------------------------------
    // A realm-local wrapper around the host's WHATWG URL parser (the host object stays private).
    const URL_PARTS = ['href', 'origin', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'hash'];
    const toTypeError = (e) => { const t = new TE(messageOf(e)); try { if (e.code !== undefined) t.code = S(e.code); if (e.input !== undefined) t.input = S(e.input); } catch (_) { /* */ } return t; };
    const hostOf = new WeakMap(); // wrapper -> the host's URL / URLSearchParams (never exposed)
    const spOf = new WeakMap();
    const hp = (w) => { const h = hostOf.get(w); if (!h) throw new TE('Illegal invocation'); return h; };
    class URLSearchParams {
      constructor(init) {
        let arg = init;
        if (arg === HOST_PARAMS) return;
        if (arg && typeof arg === 'object') {
          if (arg instanceof URLSearchParams) arg = arg.toString();
          else if (typeof arg[Symbol.iterator] === 'function') arg = J.stringify(A.from(arg, (p) => A.from(p, S)));
          else arg = J.stringify(O.keys(arg).map((k) => [k, S(arg[k])]));
          hostOf.set(this, bridge.newSearchParams(arg, true));
        } else {
          hostOf.set(this, bridge.newSearchParams(arg === undefined ? '' : S(arg), false));
        }
      }
      append(k, v) { hp(this).append(S(k), S(v)); }
      delete(k, v) { if (v === undefined) hp(this).delete(S(k)); else hp(this).delete(S(k), S(v)); }
      get(k) { return hp(this).get(S(k)); }
      getAll(k) { return A.from(hp(this).getAll(S(k)), S); }
      has(k, v) { return v === undefined ? hp(this).has(S(k)) : hp(this).has(S(k), S(v)); }
      set(k, v) { hp(this).set(S(k), S(v)); }
      sort() { hp(this).sort(); }
      get size() { return hp(this).size; }
      toString() { return hp(this).toString(); }
      *entries() { for (const [k, v] of A.from(hp(this).entries(), (e) => [S(e[0]), S(e[1])])) yield [k, v]; }
      *keys() { for (const [k] of this.entries()) yield k; }
      *values() { for (const [, v] of this.entries()) yield v; }
      forEach(cb, thisArg) { for (const [k, v] of this.entries()) R.apply(cb, thisArg, [v, k, this]); }
      [Symbol.iterator]() { return this.entries(); }
    }
    const HOST_PARAMS = Symbol('host params');
    class URL {
      constructor(input, base) {
        if (arguments.length === 0) throw new TE('The "url" argument must be specified');
        try { hostOf.set(this, bridge.newURL(S(input), base === undefined ? undefined : S(base))); }
        catch (e) { throw toTypeError(e); }
      }
      static canParse(input, base) { return bridge.canParseURL(S(input), base === undefined ? undefined : S(base)); }
      static createObjectURL() { return unsupported('URL.createObjectURL'); }
      static revokeObjectURL() { return unsupported('URL.revokeObjectURL'); }
      get searchParams() {
        let sp = spOf.get(this);
        if (!sp) {
          sp = new URLSearchParams(HOST_PARAMS);
          hostOf.set(sp, hp(this).searchParams);
          spOf.set(this, sp);
        }
        return sp;
      }
      toString() { return S(hp(this).href); }
      toJSON() { return S(hp(this).href); }
    }
    for (const k of URL_PARTS) {
      const d = { configurable: true, enumerable: true, get() { return S(hp(this)[k]); } };
      if (k !== 'origin') d.set = function (v) { try { hp(this)[k] = S(v); } catch (e) { throw toTypeError(e); } };
      defineProperty(URL.prototype, k, d);
    }
    O.assign(g, { URL, URLSearchParams });

    // ---- console ----------------------------------------------------------------------------------------
    const counts = new Map(), timersLabel = new Map();
    let groupIndent = '';
    const emit = (level, args) => bridge.log(level, groupIndent + fmt(args));
    const console = {
      log: (...a) => emit('log', a), info: (...a) => emit('info', a), debug: (...a) => emit('debug', a),
      warn: (...a) => emit('warn', a), error: (...a) => emit('error', a), trace: (...a) => emit('trace', a),
      dir: (o) => emit('log', [o]), dirxml: (...a) => emit('log', a), table: (...a) => emit('log', a),
      assert: (cond, ...a) => { if (!cond) emit('error', ['Assertion failed' + (a.length ? ':' : ''), ...a]); },
      count: (label = 'default') => { const n = (counts.get(label) ?? 0) + 1; counts.set(label, n); emit('info', [`${label}: ${n}`]); },
      countReset: (label = 'default') => { counts.delete(label); },
      group: (...a) => { if (a.length) emit('log', a); groupIndent += '  '; },
      groupCollapsed: (...a) => { if (a.length) emit('log', a); groupIndent += '  '; },
      groupEnd: () => { groupIndent = groupIndent.slice(2); },
      time: (label = 'default') => { timersLabel.set(label, performance.now()); },
      timeLog: (label = 'default', ...a) => { const t = timersLabel.get(label); if (t !== undefined) emit('info', [`${label}: ${(performance.now() - t).toFixed(3)}ms`, ...a]); },
      timeEnd: (label = 'default') => { const t = timersLabel.get(label); if (t !== undefined) { timersLabel.delete(label); emit('info', [`${label}: ${(performance.now() - t).toFixed(3)}ms`]); } },
      clear: () => {}, profile: () => {}, profileEnd: () => {}, timeStamp: () => {},
    };
    g.console = console;

    // ---- process -----------------------------------------------------------------------------------------
    const listeners = new Map();
    const on = (ev, fn) => { const l = listeners.get(ev) ?? []; l.push(fn); listeners.set(ev, l); return process; };
    function hrtime(prev) {
      const us = nowUs();
      let s = floor(us / 1e6), ns = (us % 1e6) * 1000;
      if (prev) { s -= prev[0]; ns -= prev[1]; if (ns < 0) { s -= 1; ns += 1e9; } }
      return [s, ns];
    }
    hrtime.bigint = function bigint() { return BigInt(nowUs()) * 1000n; };
    const stdStream = (level, fd) => ({
      fd, isTTY: false, writable: true,
      write(chunk, encoding, cb) {
        const text = typeof chunk === 'string' ? chunk : new TextDecoder().decode(chunk);
        for (const line of text.replace(/\n$/, '').split('\n')) bridge.log(level, line);
        const done = typeof encoding === 'function' ? encoding : cb;
        if (typeof done === 'function') nextTick(done);
        return true;
      },
      on() { return this; }, once() { return this; }, off() { return this; }, end() {}, removeListener() { return this; },
    });
    const process = {
      title: 'node', version: '', versions: {}, arch: 'x64', platform: 'linux', release: { name: HOST },
      argv: ['node', cfg.programName], argv0: 'node', execArgv: [], execPath: '/usr/bin/node',
      env: cfg.env, pid: 1, ppid: 0, exitCode: undefined, config: { variables: {} }, features: {},
      browser: false,
      cwd: () => '/',
      chdir: () => loud('process.chdir'),
      umask: () => 0o22,
      uptime: () => nowUs() / 1e6,
      hrtime,
      nextTick,
      emitWarning: (w) => bridge.log('warn', 'Warning: ' + messageOf(w)),
      on, addListener: on, prependListener: on,
      once: (ev, fn) => on(ev, fn),
      off: (ev, fn) => { const l = listeners.get(ev); if (l) { const i = l.indexOf(fn); if (i >= 0) l.splice(i, 1); } return process; },
      removeListener(ev, fn) { return process.off(ev, fn); },
      removeAllListeners: (ev) => { if (ev === undefined) listeners.clear(); else listeners.delete(ev); return process; },
      listeners: (ev) => (listeners.get(ev) ?? []).slice(),
      listenerCount: (ev) => (listeners.get(ev) ?? []).length,
      emit: (ev, ...args) => { const l = listeners.get(ev); if (!l || !l.length) return false; for (const f of l.slice()) R.apply(f, process, args); return true; },
      setMaxListeners: () => process, getMaxListeners: () => 10,
      exit: (code) => { const msg = `${HOST}: the program called process.exit(${code ?? ''})`; bridge.report(msg); throw new ERR(msg); },
      abort: () => loud('process.abort'),
      kill: () => loud('process.kill (real processes)'),
      cpuUsage: () => loud('process.cpuUsage (real CPU time)'),
      resourceUsage: () => loud('process.resourceUsage (real CPU time)'),
      memoryUsage: Object.assign(() => loud('process.memoryUsage (real memory)'), { rss: () => loud('process.memoryUsage.rss (real memory)') }),
      binding: (name) => loud(`process.binding(${J.stringify(name)})`),
      _linkedBinding: (name) => loud(`process._linkedBinding(${J.stringify(name)})`),
      dlopen: () => loud('process.dlopen (native code)'),
      getuid: () => 0, geteuid: () => 0, getgid: () => 0, getegid: () => 0, getgroups: () => [],
      stdout: stdStream('stdout', 1), stderr: stdStream('stderr', 2),
      stdin: { fd: 0, isTTY: false, on() { return loud('process.stdin (real input)'); }, read: () => loud('process.stdin (real input)') },
      getBuiltinModule: (name) => requireBuiltin(S(name), true),
    };
    g.process = process;
    g.global = g;

    // ---- Web Crypto ---------------------------------------------------------------------------------------
    const toBytes = (data, what) => {
      if (data instanceof AB) return new U8(data);
      if (isView(data)) return bytesOf(data);
      throw new TE(`${what}: data must be an ArrayBuffer or an ArrayBufferView`);
    };
    const DIGESTS = { 'SHA-1': 'sha1', 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' };
    function digestSync(alg, bytes) {
      const out = hc(() => { const h = bridge.createHash(alg); h.update(bytes); return h.digest(); });
      const copy = new U8(out.length);
      copy.set(out);
      return copy;
    }
    const subtle = {
      // Synchronous, returning an already settled promise: the real one completes on libuv's
      // thread pool, at a time no input line determines.
      digest(algorithm, data) {
        try {
          const name = S(typeof algorithm === 'object' ? algorithm?.name : algorithm).toUpperCase();
          const alg = DIGESTS[name];
          if (!alg) throw new DOMException(`Unrecognized algorithm name`, 'NotSupportedError');
          return promiseResolve(digestSync(alg, toBytes(data, 'crypto.subtle.digest')).buffer);
        } catch (e) { return P.reject(e); }
      },
    };
    for (const m of ['encrypt', 'decrypt', 'sign', 'verify', 'generateKey', 'deriveKey', 'deriveBits', 'importKey', 'exportKey', 'wrapKey', 'unwrapKey']) {
      subtle[m] = () => loud(`crypto.subtle.${m} (completes on a real thread pool, and may use OS randomness)`);
    }
    const crypto = { getRandomValues, randomUUID, subtle };
    g.crypto = crypto;

    // ---- WebSocket ------------------------------------------------------------------------------------------
    const sockets = new Map();
    const utf8Length = (s) => bridge.byteLength(s);
    class WebSocket extends EventTarget {
      constructor(url, protocols) {
        super();
        if (arguments.length === 0) throw new TE("Failed to construct 'WebSocket': 1 argument required, but only 0 present.");
        let u;
        try { u = new URL(S(url)); } catch (_) { throw new DOMException(`Failed to construct 'WebSocket': The URL '${url}' is invalid.`, 'SyntaxError'); }
        if (u.protocol === 'http:') u.protocol = 'ws:';
        else if (u.protocol === 'https:') u.protocol = 'wss:';
        if (u.protocol !== 'ws:' && u.protocol !== 'wss:')
          throw new DOMException(`Failed to construct 'WebSocket': The URL's scheme must be either 'http', 'https', 'ws', or 'wss'. '${u.protocol}' is not allowed.`, 'SyntaxError');
        if (u.hash) throw new DOMException(`Failed to construct 'WebSocket': The URL contains a fragment identifier ('${u.hash}'). Fragment identifiers are not allowed in WebSocket URLs.`, 'SyntaxError');
        const list = protocols === undefined ? [] : (typeof protocols === 'string' ? [protocols] : A.from(protocols, S));
        this._url = u.href;
        this._origin = u.origin;
        this._readyState = 0;
        this._protocol = '';
        this.binaryType = 'blob';
        this._id = bridge.wsConnect(this._url, list);
        sockets.set(this._id, this);
      }
      get url() { return this._url; }
      get readyState() { return this._readyState; }
      get protocol() { return this._protocol; }
      get extensions() { return ''; }
      get bufferedAmount() { return 0; }
      send(data) {
        if (this._readyState === 0) throw new DOMException("Failed to execute 'send' on 'WebSocket': Still in CONNECTING state.", 'InvalidStateError');
        if (this._readyState !== 1) return;
        if (typeof data !== 'string') {
          if (data instanceof AB || isView(data)) return unsupported('binary WebSocket frames');
          data = S(data);
        }
        bridge.wsSend(this._id, data);
      }
      close(code, reason) {
        if (code !== undefined) {
          code = N(code);
          if (!(code === 1000 || (code >= 3000 && code <= 4999) && N.isInteger(code)))
            throw new DOMException(`Failed to execute 'close' on 'WebSocket': The code must be either 1000, or between 3000 and 4999. ${code} is neither.`, 'InvalidAccessError');
        }
        reason = reason === undefined ? '' : S(reason);
        if (utf8Length(reason) > 123) throw new DOMException("Failed to execute 'close' on 'WebSocket': The message must not be greater than 123 bytes.", 'SyntaxError');
        if (this._readyState >= 2) return;
        const connecting = this._readyState === 0;
        this._readyState = 2;
        bridge.wsClose(this._id, code === undefined ? null : code, reason);
        // The close completes locally, in a later task at the same virtual time.
        setImmediate(() => this._finish(connecting ? 1006 : code ?? 1005, connecting ? '' : reason, !connecting, connecting));
      }
      _finish(code, reason, wasClean, withError) {
        if (this._readyState === 3) return;
        this._readyState = 3;
        sockets.delete(this._id);
        if (withError) this.dispatchEvent(new Event('error'));
        this.dispatchEvent(new CloseEvent('close', { code, reason, wasClean }));
      }
    }
    O.assign(WebSocket, { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 });
    O.assign(WebSocket.prototype, { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 });
    for (const t of ['open', 'message', 'error', 'close']) eventHandlerAttribute(WebSocket.prototype, t);
    g.WebSocket = WebSocket;
    function socketInput(id, kind, text, code, reason, protocol) {
      const ws = sockets.get(id);
      if (!ws) return; // closed by the program meanwhile: dropped, as a real socket would
      if (kind === 'open') {
        if (ws._readyState !== 0) return;
        ws._readyState = 1;
        ws._protocol = protocol ?? '';
        ws.dispatchEvent(new Event('open'));
      } else if (kind === 'message') {
        if (ws._readyState !== 1) return;
        ws.dispatchEvent(new MessageEvent('message', { data: text, origin: ws._origin }));
      } else if (kind === 'close') {
        if (ws._readyState === 0) ws._finish(1006, '', false, true); // refused
        else {
          const c = code ?? 1006;
          ws._finish(c, reason ?? '', c !== 1006, c === 1006);
        }
      }
    }

    // ---- fetch ---------------------------------------------------------------------------------------------
    // HTTP to a relay of this world (e.g. applesauce-relay's NIP-11 information request) is
    // simulated as "no HTTP service there": a TypeError('fetch failed'), as undici gives for a
    // refused connection. Any other URL is real network: loud.
    const relayOrigins = new Set(cfg.relays.map((r) => {
      try { const u = new URL(r); u.protocol = u.protocol === 'wss:' ? 'https:' : 'http:'; return u.origin; } catch (_) { return ''; }
    }));
    g.fetch = function fetch(input) {
      let href;
      try { href = typeof input === 'string' ? input : S(input?.url ?? input?.href ?? input); } catch (_) { href = '?'; }
      let origin = '';
      try { origin = new URL(href).origin; } catch (_) { /* not a URL */ }
      if (relayOrigins.has(origin)) {
        const e = new TE('fetch failed');
        e.cause = new ERR(`${HOST}: simulated relays serve no HTTP (${href})`);
        return P.reject(e);
      }
      return loud(`fetch(${J.stringify(href)}) (real network)`);
    };

    // ---- GC-timing-dependent APIs, structuredClone, locale defaults ------------------------------------
    g.WeakRef = class WeakRef {
      #t;
      constructor(target) {
        if (target === null || (typeof target !== 'object' && typeof target !== 'function' && typeof target !== 'symbol'))
          throw new TE('WeakRef: target must be an object');
        this.#t = target; // strong: collection timing must not show through
      }
      deref() { return this.#t; }
    };
    g.FinalizationRegistry = class FinalizationRegistry {
      constructor(cb) { if (typeof cb !== 'function') throw new TE('FinalizationRegistry: cleanup must be callable'); }
      register() {} // never collected, never called back
      unregister() { return false; }
    };
    g.structuredClone = function structuredClone(value) {
      const seen = new Map();
      const clone = (v) => {
        if (v === null || typeof v !== 'object') {
          if (typeof v === 'function' || typeof v === 'symbol') throw new DOMException(`${S(v)} could not be cloned.`, 'DataCloneError');
          return v;
        }
        if (seen.has(v)) return seen.get(v);
        let out;
        if (A.isArray(v)) { out = []; seen.set(v, out); for (let i = 0; i < v.length; i++) out[i] = clone(v[i]); return out; }
        if (v instanceof RealDate) return new RealDate(v.getTime());
        if (v instanceof RegExp) return new RegExp(v.source, v.flags);
        if (v instanceof AB) return v.slice(0);
        if (isView(v)) { const C = v.constructor; return new C(v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength)); }
        if (v instanceof Map) { out = new Map(); seen.set(v, out); for (const [k, x] of v) out.set(clone(k), clone(x)); return out; }
        if (v instanceof Set) { out = new Set(); seen.set(v, out); for (const x of v) out.add(clone(x)); return out; }
        if (v instanceof ERR) { out = new ERR(v.message); out.name = v.name; if (v.stack) out.stack = v.stack; return out; }
        out = {}; seen.set(v, out);
        for (const k of O.keys(v)) out[k] = clone(v[k]);
        return out;
      };
      return clone(value);
    };
    // Locale and time zone must not come from the machine: default them (the host also runs
    // with TZ=UTC).
    const LOCALE = 'en-US';
    if (typeof Intl === 'object') {
      for (const name of ['DateTimeFormat', 'NumberFormat', 'Collator', 'PluralRules', 'RelativeTimeFormat', 'ListFormat', 'DisplayNames', 'Segmenter']) {
        const C = Intl[name];
        if (typeof C !== 'function') continue;
        const W = function (locales, options) {
          const l = locales === undefined ? LOCALE : locales;
          const o = name === 'DateTimeFormat' && (options === undefined || options?.timeZone === undefined) ? { ...options, timeZone: 'UTC' } : options;
          return new.target ? R.construct(C, [l, o], new.target) : C(l, o);
        };
        W.prototype = C.prototype;
        W.supportedLocalesOf = C.supportedLocalesOf;
        defineProperty(C.prototype, 'constructor', { value: W, writable: true, configurable: true });
        Intl[name] = W;
      }
      const dtfFormat = O.getOwnPropertyDescriptor(Intl.DateTimeFormat.prototype, 'format');
      if (dtfFormat?.get) {
        defineProperty(Intl.DateTimeFormat.prototype, 'format', {
          configurable: true,
          get() { const f = dtfFormat.get.call(this); return (d) => f(d === undefined ? nowMs() : d); },
        });
      }
      const dtfParts = Intl.DateTimeFormat.prototype.formatToParts;
      Intl.DateTimeFormat.prototype.formatToParts = function formatToParts(d) { return R.apply(dtfParts, this, [d === undefined ? nowMs() : d]); };
      const localeDefault = (proto, names) => {
        for (const n of names) {
          const f = proto[n];
          if (typeof f !== 'function') continue;
          proto[n] = { [n](locales, options, ...rest) {
            const o = proto === realDateProto && (options === undefined || options?.timeZone === undefined) ? { ...options, timeZone: 'UTC' } : options;
            return R.apply(f, this, [locales === undefined ? LOCALE : locales, o, ...rest]);
          } }[n];
        }
      };
      localeDefault(realDateProto, ['toLocaleString', 'toLocaleDateString', 'toLocaleTimeString']);
      localeDefault(N.prototype, ['toLocaleString']);
      localeDefault(BigInt.prototype, ['toLocaleString']);
      const lc = S.prototype.localeCompare;
      S.prototype.localeCompare = function localeCompare(that, locales, options) { return R.apply(lc, this, [that, locales === undefined ? LOCALE : locales, options]); };
      for (const n of ['toLocaleUpperCase', 'toLocaleLowerCase']) {
        const f = S.prototype[n];
        S.prototype[n] = { [n](locales) { return R.apply(f, this, [locales === undefined ? LOCALE : locales]); } }[n];
      }
    }

    // ---- Buffer (lazily: the `buffer` package, evaluated in this context on first use) ---------
    let bufferModule;
    const loadBuffer = () => (bufferModule ??= bridge.polyfill('buffer'));
    defineProperty(g, 'Buffer', {
      configurable: true, enumerable: false,
      get() { const B = loadBuffer().Buffer; defineProperty(g, 'Buffer', { value: B, writable: true, configurable: true }); return B; },
      set(v) { defineProperty(g, 'Buffer', { value: v, writable: true, configurable: true }); },
    });

    // ---- node: built-in modules ---------------------------------------------------------------
    const modules = new Map();
    const closedKeys = cfg.closedModules; // name -> { key: "function" | "value", ... } from the real module
    const CLOSED_WHY = {
      net: 'real network', tls: 'real network', http: 'real network', https: 'real network', http2: 'real network',
      dgram: 'real network', dns: 'real network', 'dns/promises': 'real network',
      child_process: 'real processes', cluster: 'real processes', worker_threads: 'real threads',
      fs: 'real files', 'fs/promises': 'real files', readline: 'real input', inspector: 'real debugger',
      v8: 'real heap', vm: 'contexts outside the simulated world', module: 'loading code outside the bundle',
      os: 'the real machine', async_hooks: 'real async resources', diagnostics_channel: 'real diagnostics',
      tty: 'real terminals', perf_hooks: 'real clock', zlib: 'real thread pool', repl: 'real input',
    };
    function closedModule(name) {
      const why = CLOSED_WHY[name] ?? 'outside the simulated world';
      const m = {};
      const keys = closedKeys[name] ?? {};
      for (const k of O.keys(keys)) {
        if (keys[k] === 'function') {
          m[k] = { [k]: function () { return loud(`node:${name}.${k} (${why})`); } }[k]; // constructible too: `new Worker()` fails loudly
        } else if (typeof keys[k] === 'object' && keys[k] !== null && 'value' in keys[k]) {
          m[k] = keys[k].value; // a primitive constant (e.g. os.EOL): harmless
        } else {
          defineProperty(m, k, { enumerable: true, configurable: true, get() { return loud(`node:${name}.${k} (${why})`); } });
        }
      }
      m.default = m;
      return m;
    }
    function cryptoModule() {
      const Buffer = () => loadBuffer().Buffer;
      const toBuf = (u8) => { const B = Buffer(); return B.from(u8.buffer, u8.byteOffset, u8.length); };
      const dataBytes = (data, enc) => {
        if (typeof data === 'string') return Buffer().from(data, enc ?? 'utf8');
        if (data instanceof AB) return new U8(data);
        if (isView(data)) return bytesOf(data);
        throw new TE('The "data" argument must be of type string or an instance of Buffer, TypedArray, or DataView.');
      };
      const wrapHash = (h) => {
        const obj = {
          update(data, enc) {
            if (typeof data === 'string') hc(() => h.update(data, enc ?? 'utf8')); // a string is no object: straight to the host
            else { const b = dataBytes(data); hc(() => h.update(b)); }
            return obj;
          },
          digest(enc) {
            if (typeof enc === 'string' && enc !== 'buffer') return S(hc(() => h.digest(enc)));
            const out = hc(() => h.digest());
            const copy = new U8(out.length); copy.set(out);
            return toBuf(copy);
          },
          copy() { return wrapHash(hc(() => h.copy())); },
        };
        return obj;
      };
      const randomBytes = (n, cb) => {
        if (!N.isSafeInteger(n) || n < 0 || n > 2 ** 31 - 1) throw new RE(`The value of "size" is out of range. Received ${n}`);
        const u = new U8(n); randomInto(u);
        const b = toBuf(u);
        if (typeof cb === 'function') { nextTick(cb, null, b); return undefined; }
        return b;
      };
      const randomFillSync = (buf, offset = 0, size) => {
        const all = buf instanceof AB ? new U8(buf) : bytesOf(buf);
        const end = size === undefined ? all.length : offset + size;
        randomInto(all.subarray(offset, end));
        return buf;
      };
      const randomFill = (buf, offset, size, cb) => {
        if (typeof offset === 'function') { cb = offset; offset = 0; size = undefined; }
        else if (typeof size === 'function') { cb = size; size = undefined; }
        randomFillSync(buf, offset, size);
        nextTick(cb, null, buf);
      };
      const randomInt = (a, b, cb) => {
        if (typeof b === 'function' || b === undefined) { cb = b; b = a; a = 0; }
        const range = b - a;
        if (!(range > 0) || !N.isSafeInteger(a) || !N.isSafeInteger(b)) throw new RE('The value of "max" is out of range.');
        const limit = 2 ** 48 - (2 ** 48 % range);
        let x;
        do { const u = new U8(6); randomInto(u); x = u.reduce((acc, v) => acc * 256 + v, 0); } while (x >= limit);
        const r = a + (x % range);
        if (typeof cb === 'function') { nextTick(cb, null, r); return undefined; }
        return r;
      };
      const m = {
        randomBytes, pseudoRandomBytes: randomBytes, randomFillSync, randomFill, randomInt, randomUUID, getRandomValues,
        webcrypto: crypto, subtle,
        createHash: (alg) => wrapHash(hc(() => bridge.createHash(S(alg)))),
        createHmac: (alg, key) => { const k = typeof key === 'string' ? key : dataBytes(key); return wrapHash(hc(() => bridge.createHmac(S(alg), k))); },
        timingSafeEqual: (a, b) => {
          const x = dataBytes(a), y = dataBytes(b);
          if (x.length !== y.length) throw new RE('Input buffers must have the same byte length');
          let d = 0; for (let i = 0; i < x.length; i++) d |= x[i] ^ y[i];
          return d === 0;
        },
        getHashes: () => ['sha1', 'sha256', 'sha384', 'sha512'],
        constants: {},
      };
      for (const k of ['generateKeyPair', 'generateKeyPairSync', 'generateKey', 'generateKeySync', 'generatePrime', 'generatePrimeSync',
        'pbkdf2', 'scrypt', 'hkdf', 'randomPrime', 'createDiffieHellman', 'createECDH', 'getDiffieHellman', 'diffieHellman']) {
        m[k] = () => loud(`node:crypto.${k} (OS randomness or a real thread pool)`);
      }
      for (const k of ['createCipheriv', 'createDecipheriv', 'createSign', 'createVerify', 'sign', 'verify', 'pbkdf2Sync',
        'scryptSync', 'hkdfSync', 'publicEncrypt', 'privateDecrypt', 'createPublicKey', 'createPrivateKey', 'createSecretKey',
        'checkPrime', 'checkPrimeSync', 'getCiphers', 'getCurves', 'hash']) {
        m[k] = () => unsupported(`node:crypto.${k}`);
      }
      m.default = m;
      return m;
    }
    function utilModule() {
      const format = (...a) => fmt(a);
      const promisify = (fn) => function (...args) {
        return new P((resolve, reject) => R.apply(fn, this, [...args, (err, ...vals) => (err ? reject(err) : resolve(vals.length > 1 ? vals : vals[0]))]));
      };
      const m = {
        format, formatWithOptions: (_o, ...a) => fmt(a), inspect: (v) => fmt([v]),
        promisify, deprecate: (fn) => fn, debuglog: () => () => {}, inherits: (c, s) => { O.setPrototypeOf(c.prototype, s.prototype); O.setPrototypeOf(c, s); },
        TextEncoder, TextDecoder, isDeepStrictEqual: () => unsupported('node:util.isDeepStrictEqual'),
        types: {
          isUint8Array: (v) => v instanceof U8, isArrayBufferView: isView, isPromise: (v) => v instanceof P,
          isDate: (v) => v instanceof RealDate, isRegExp: (v) => v instanceof RegExp, isNativeError: (v) => v instanceof ERR,
        },
      };
      m.inspect.custom = Symbol.for('nodejs.util.inspect.custom');
      m.promisify.custom = Symbol.for('nodejs.util.promisify.custom');
      m.default = m;
      return m;
    }
    function requireBuiltin(spec, soft) {
      const name = spec.startsWith('node:') ? spec.slice(5) : spec;
      if (modules.has(name)) return modules.get(name);
      let m;
      switch (name) {
        case 'crypto': m = cryptoModule(); break;
        case 'buffer': m = loadBuffer(); break;
        case 'events': m = bridge.polyfill('events'); break;
        case 'timers': m = { setTimeout, setInterval, setImmediate, clearTimeout, clearInterval: clearTimeout, clearImmediate: clearTimeout }; break;
        case 'timers/promises': m = {
          setTimeout: (ms, v) => new P((r) => setTimeout(r, ms, v)),
          setImmediate: (v) => new P((r) => setImmediate(r, v)),
        }; break;
        case 'process': m = process; break;
        case 'perf_hooks': m = { performance,
          monitorEventLoopDelay: () => loud('node:perf_hooks.monitorEventLoopDelay (real clock)'),
          PerformanceObserver: function PerformanceObserver() { return loud('node:perf_hooks.PerformanceObserver (real clock)'); } }; break;
        case 'util': m = utilModule(); break;
        case 'url': m = { URL, URLSearchParams,
          fileURLToPath: (u) => hc(() => bridge.fileURLToPath(S(u))), pathToFileURL: (p) => new URL(hc(() => bridge.pathToFileURL(S(p)))) }; break;
        case 'string_decoder': case 'assert': case 'path': case 'stream': case 'querystring': case 'punycode':
          return soft ? undefined : unsupported(`node:${name}`);
        default:
          if (hasOwn(closedKeys, name)) { m = closedModule(name); break; }
          if (soft) return undefined;
          return unsupported(`node:${name} (not a module ${HOST} knows)`);
      }
      if (m && typeof m === 'object' && !('default' in m)) m.default = m;
      modules.set(name, m);
      return m;
    }
    function require(spec) {
      return requireBuiltin(S(spec), false);
    }
    require.resolve = (s) => unsupported(`require.resolve(${J.stringify(s)})`);
    require.cache = {};

    // ---- the program --------------------------------------------------------------------------------
    let program = null, role = null, roleObject = null, state = 'idle', startError = null;
    const pendingCalls = [];
    function runBundle(fn) {
      const module = { exports: {} };
      try {
        fn(module.exports, require, module, cfg.programName, '/');
      } catch (e) {
        uncaught(e, 'evaluating the program');
        return false;
      }
      program = module.exports;
      return true;
    }
    const env = {
      peer: cfg.peer, name: cfg.name, role: cfg.role, secretKey: cfg.secretKey, relays: cfg.relays,
      serverPubkey: cfg.serverPubkey, options: cfg.options,
      log: (...a) => bridge.log('program', fmt(a)),
    };
    if (bridge.plantedHostObject !== undefined) env.hostObject = bridge.plantedHostObject; // test only
    function start() {
      role = cfg.role;
      const fn = program?.[role];
      if (typeof fn !== 'function') {
        const msg = `${HOST}: the program has no exported function "${role}"`;
        bridge.report(msg);
        state = 'failed'; startError = msg;
        bridge.ready(false, msg);
        return;
      }
      state = 'starting';
      let p;
      try { p = promiseResolve(R.apply(fn, program, [env])); } catch (e) { p = P.reject(e); }
      promiseThen(p, (obj) => {
        roleObject = obj;
        if (role === 'client' && (!obj || typeof obj.call !== 'function')) {
          const msg = `${HOST}: client(env) must resolve to an object with a call() method`;
          bridge.report(msg);
          state = 'failed'; startError = msg;
          bridge.ready(false, msg);
        } else {
          state = 'ready';
          bridge.ready(true);
        }
        for (const c of pendingCalls.splice(0)) call(...c);
      }, (e) => {
        state = 'failed'; startError = messageOf(e);
        bridge.ready(false, startError);
        for (const c of pendingCalls.splice(0)) call(...c);
      });
    }
    function call(callId, name, argsJson, progress, stream) {
      if (state === 'idle' || state === 'starting') { pendingCalls.push([callId, name, argsJson, progress, stream]); return; }
      if (state === 'failed') { bridge.outcome(callId, false, startError); return; }
      if (!roleObject || typeof roleObject.call !== 'function') {
        const msg = `${HOST}: a call for peer ${cfg.peer} (${cfg.name}), whose ${role}(env) gave no object with a call() method`;
        bridge.report(msg);
        bridge.outcome(callId, false, msg);
        return;
      }
      let p;
      try {
        p = promiseResolve(roleObject.call({ name, arguments: J.parse(argsJson), progress, stream }));
      } catch (e) { p = P.reject(e); }
      promiseThen(p, (r) => {
        let result, chunks;
        try {
          if (!r || typeof r !== 'object' || !('result' in r)) throw new TE('call() must resolve to { result, chunks? }');
          result = J.stringify(r.result);
          if (result === undefined) throw new TE('call(): the result is not JSON');
          chunks = r.chunks === undefined ? undefined : J.stringify(r.chunks);
        } catch (e) {
          const msg = `${HOST}: ${messageOf(e)}`;
          bridge.report(msg);
          bridge.outcome(callId, false, msg);
          return;
        }
        bridge.outcome(callId, true, result, chunks);
      }, (e) => bridge.outcome(callId, false, messageOf(e)));
    }
    function processListeners(ev) { return (listeners.get(ev) ?? []).length; }
    function emitProcess(ev, a, b) {
      for (const f of (listeners.get(ev) ?? []).slice()) {
        try { R.apply(f, process, [a, b]); } catch (e) { uncaught(e, `process '${ev}' listener`); }
      }
    }

    return freeze({
      runBundle, start, call, fire: fire,
      socket: guard(socketInput, 'WebSocket input'),
      processListeners, emitProcess, messageOf,
    });
  };
})()
