// relaysim-node-host's main program (started by ../host.mjs, under --experimental-vm-modules):
// runs a JavaScript peer program inside relaysim's simulated world, in virtual time, speaking
// the line protocol of PROTOCOL.md on stdin/stdout. stdout carries protocol lines only;
// everything human goes to stderr.
process.env.TZ = 'UTC'; // local-time Date methods of every context: before any Date is used

import { parseArgs } from 'node:util';
import path from 'node:path';
import fs from 'node:fs';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { bundleProgram, bundlePolyfills, closedModuleKeys, CachedScript } from './bundle.mjs';
import { World } from './world.mjs';

const PROTOCOL = 1;
const here = path.dirname(path.dirname(fileURLToPath(import.meta.url))); // the package's directory
const VERSION = JSON.parse(fs.readFileSync(path.join(here, 'package.json'), 'utf8')).version;
const HOST_NAME = `relaysim-node-host ${VERSION}`;

// Real clocks, kept for the host's own statistics (stderr only) before the realm is locked down.
const hrtimeNs = process.hrtime.bigint;
const realNowMs = Date.now; // for the test-only real-clock plant
const cpuUsage = process.cpuUsage.bind(process);
const ms = (t0) => Number(hrtimeNs() - t0) / 1e6;
const STATS = process.env.RELAYSIM_NODE_HOST_STATS === '1';
const PLANT = process.env.RELAYSIM_HOST_PLANT || null; // test only: see PROTOCOL.md

const collectGarbage = typeof globalThis.gc === 'function' ? globalThis.gc : null;
const stderrLog = (text) => { process.stderr.write(text + '\n'); };
const stat = (obj) => { if (STATS) stderrLog(`stats ${JSON.stringify(obj)}`); };
const writeLine = (text) => { process.stdout.write(text + '\n'); };
function fatal(message, code = 2) {
  writeLine(JSON.stringify({ type: 'fatal', error: message }));
  process.exitCode = code;
  // Let stdout flush (a pipe write is synchronous on Linux, but be safe), then stop.
  setImmediate(() => process.exit(code));
  throw new FatalExit();
}
class FatalExit extends Error {}

// ---- arguments --------------------------------------------------------------------------------
let args;
try {
  args = parseArgs({ options: { program: { type: 'string' } }, strict: true }).values;
} catch (e) {
  writeLine(JSON.stringify({ type: 'fatal', error: e.message }));
  process.exit(2);
}
if (!args.program) {
  writeLine(JSON.stringify({ type: 'fatal', error: 'usage: node host.mjs --program PATH' }));
  process.exit(2);
}
const programPath = path.resolve(args.program);
if (PLANT !== null && !['real-clock', 'real-random', 'host-object'].includes(PLANT)) {
  writeLine(JSON.stringify({ type: 'fatal', error: `RELAYSIM_HOST_PLANT must be real-clock, real-random or host-object, got ${JSON.stringify(PLANT)}` }));
  process.exit(2);
}

// ---- bundle and compile -----------------------------------------------------------------------------
const host = { plant: PLANT, log: stderrLog, programName: programPath, clock: hrtimeNs, realNowMs };
{
  const t0 = hrtimeNs();
  let bundled;
  try {
    bundled = await bundleProgram(programPath);
  } catch (e) {
    writeLine(JSON.stringify({ type: 'fatal', error: `bundling ${programPath} failed: ${e.message}` }));
    process.exit(1);
  }
  const polyfills = await bundlePolyfills();
  const bundleMs = ms(t0);
  for (const w of bundled.warnings) stderrLog(`relaysim-node-host: esbuild: ${w}`);
  const t1 = hrtimeNs();
  const wrapped = `(function (exports, require, module, __filename, __dirname) {${bundled.code}\n})`;
  const onImport = (specifier) => {
    const msg = `relaysim-node-host: nondeterminism: import(${JSON.stringify(specifier)}) (loading code from outside the bundle) (closed in relaysim's simulated world)`;
    if (world && !world.dead) world.error(world.current, msg);
    throw msg; // a primitive: no object of the host's realm reaches the program
  };
  host.onImport = onImport;
  host.bundleScript = new CachedScript(wrapped, 'relaysim-program.js', onImport);
  host.preludeScript = new CachedScript(fs.readFileSync(path.join(here, 'lib', 'prelude.js'), 'utf8'), 'relaysim-prelude.js', onImport);
  host.polyfillScripts = Object.fromEntries(Object.entries(polyfills).map(([k, v]) => [k, new CachedScript(v, `relaysim-${k}.js`, onImport)]));
  host.closedModules = closedModuleKeys();
  host.bundleSha256 = createHash('sha256').update(bundled.code).digest('hex');
  stat({ event: 'bundle', bundle_ms: bundleMs, compile_ms: ms(t1), bundle_bytes: Buffer.byteLength(bundled.code), code_cache_used: host.bundleScript.cacheUsed });
  const esbuild = await import('esbuild');
  await esbuild.stop?.();
}

// ---- lock the host's own realm down ---------------------------------------------------------------
// No object of this realm is reachable from a peer's context by design; should one leak anyway
// (through a path not thought of), its clock and randomness fail loudly too.
let world = null;
function hostLeak(what) {
  const msg = `relaysim-node-host: nondeterminism: ${what} of the host's realm was reached from the program`;
  if (world && !world.dead) world.error(world.current, msg);
  throw msg; // a primitive: no further object of this realm for the program
}
function lockdown() {
  const RealDate = Date;
  const LockedDate = new Proxy(RealDate, {
    apply() { return hostLeak('Date()'); },
    construct(target, a, nt) { return a.length === 0 ? hostLeak('new Date()') : Reflect.construct(target, a, nt); },
    get(target, key, recv) { return key === 'now' ? () => hostLeak('Date.now()') : Reflect.get(target, key, recv); },
  });
  Object.defineProperty(RealDate.prototype, 'constructor', { value: LockedDate, writable: true, configurable: true });
  globalThis.Date = LockedDate;
  Math.random = () => hostLeak('Math.random()');
  const perf = globalThis.performance;
  try { Object.defineProperty(perf, 'now', { value: () => hostLeak('performance.now()'), configurable: true }); } catch { /* */ }
  try { Object.defineProperty(perf, 'timeOrigin', { get: () => hostLeak('performance.timeOrigin'), configurable: true }); } catch { /* */ }
  const hr = () => hostLeak('process.hrtime()');
  hr.bigint = () => hostLeak('process.hrtime.bigint()');
  process.hrtime = hr;
  const wc = globalThis.crypto;
  try {
    Object.defineProperty(wc, 'getRandomValues', { value: () => hostLeak('crypto.getRandomValues()'), configurable: true });
    Object.defineProperty(wc, 'randomUUID', { value: () => hostLeak('crypto.randomUUID()'), configurable: true });
  } catch { /* */ }
}
lockdown();

// A rejection nobody handled: the program's (the host has none of its own).
process.on('unhandledRejection', (reason, promise) => {
  const w = world;
  if (!w || w.dead) return;
  const peer = w.current;
  if (peer?.api && peer.api.processListeners('unhandledRejection') > 0) {
    peer.api.emitProcess('unhandledRejection', reason, promise);
    return;
  }
  let text;
  try { text = peer?.api ? peer.api.messageOf(reason) : String(reason); } catch { text = '<unprintable>'; }
  w.error(peer, `unhandled rejection: ${text}`);
});

// ---- protocol ------------------------------------------------------------------------------------
function reply(w) {
  const outs = w.takeOutputs();
  const next = w.dead ? null : w.nextTimerUs();
  writeLine(`{"type":"out","outputs":[${outs.join(',')}],"next_timer_us":${next === null ? 'null' : next}}`);
}
const isInt = (v) => Number.isSafeInteger(v);
function need(cond, what) { if (!cond) fatal(`protocol: ${what}`); }

async function onWorld(msg) {
  if (world) finishWorld(world); // a new world replaces the old one (no `ended` line)
  world = null;
  const seed = typeof msg.seed === 'string' ? msg.seed : isInt(msg.seed) ? String(msg.seed) : null;
  need(seed !== null && /^[0-9]+$/.test(seed), 'world.seed must be a decimal string');
  need(isInt(msg.epoch_ms), 'world.epoch_ms must be an integer');
  need(msg.now_us === undefined || (isInt(msg.now_us) && msg.now_us >= 0), 'world.now_us must be a non-negative integer');
  need(Array.isArray(msg.peers) && msg.peers.length > 0, 'world.peers must be a non-empty array');
  need(msg.env === undefined || (msg.env && typeof msg.env === 'object' && !Array.isArray(msg.env)), 'world.env must be an object');
  for (const v of Object.values(msg.env ?? {})) need(typeof v === 'string', 'world.env values must be strings');
  const names = new Set();
  msg.peers.forEach((p, i) => {
    need(p && typeof p === 'object', `peers[${i}] must be an object`);
    need(p.peer === i, `peers[${i}].peer must be ${i}`);
    need(typeof p.role === 'string' && /^[A-Za-z_$][\w$]*$/.test(p.role), `peers[${i}].role must be the name of an exported function`);
    need(typeof p.name === 'string' && p.name.length > 0 && !names.has(p.name), `peers[${i}].name must be a unique non-empty string`);
    names.add(p.name);
    need(typeof p.secret_key === 'string', `peers[${i}].secret_key must be a string`);
    need(Array.isArray(p.relays) && p.relays.every((r) => typeof r === 'string'), `peers[${i}].relays must be an array of strings`);
    need(p.server_pubkey === undefined || typeof p.server_pubkey === 'string', `peers[${i}].server_pubkey must be a string`);
    need(p.start_us === undefined || p.start_us === null || (isInt(p.start_us) && p.start_us >= 0), `peers[${i}].start_us must be a non-negative integer or null`);
  });
  const t0 = hrtimeNs();
  const c0 = cpuUsage();
  const w = new World(host, { ...msg, seed });
  world = w;
  const perPeerMs = [];
  for (const [i, spec] of msg.peers.entries()) perPeerMs.push(w.addPeer(spec, i).setupMs);
  host.preludeScript.save();
  host.bundleScript.save();
  const createMs = ms(t0);
  w.stats = { t0, c0, createMs, perPeerMs };
  for (const peer of w.peers) {
    const at = peer.spec.start_us;
    if (at === undefined || (at !== null && at <= w.nowUs)) await w.run(peer, () => w.startPeer(peer));
    else if (at !== null) w.scheduleStart(peer, at);
  }
  w.firings = 0;
  w.stepLimitHit = false;
  await w.runDue(w.nowUs);
  reply(w);
}

async function onStep(msg) {
  need(world, 'step before any world');
  const w = world;
  need(isInt(msg.now_us), 'step.now_us must be an integer');
  need(Array.isArray(msg.inputs), 'step.inputs must be an array');
  if (msg.now_us < w.nowUs) {
    w.error(null, `step now_us ${msg.now_us} is before the world's virtual time ${w.nowUs}; step ignored`);
    reply(w);
    return;
  }
  w.firings = 0;
  w.stepLimitHit = false;
  await w.runDue(msg.now_us);
  if (msg.now_us > w.nowUs) w.nowUs = msg.now_us;
  for (const [i, input] of msg.inputs.entries()) {
    if (w.stepLimitHit) break;
    need(input && typeof input === 'object', `inputs[${i}] must be an object`);
    const peer = w.peers[input.peer];
    need(isInt(input.peer) && peer, `inputs[${i}].peer ${input.peer} is not a peer of this world`);
    switch (input.kind) {
      case 'open': case 'message': case 'close': {
        need(isInt(input.socket), `inputs[${i}].socket must be an integer`);
        const state = peer.sockets.get(input.socket);
        if (state === undefined) {
          w.error(peer, `input ${input.kind} for socket ${input.socket} of peer ${input.peer}, which never connected it`);
          break;
        }
        if (state === 'closed') break; // closed by the program or dropped before: ignored
        if (input.kind === 'message') need(typeof input.text === 'string', `inputs[${i}].text must be a string`);
        if (input.kind === 'close') need(input.code === undefined || input.code === null || isInt(input.code), `inputs[${i}].code must be an integer`);
        if (input.kind === 'open') peer.sockets.set(input.socket, 'open');
        if (input.kind === 'close') peer.sockets.set(input.socket, 'closed');
        await w.run(peer, () => peer.api.socket(input.socket, input.kind, input.text, input.code ?? undefined,
          input.reason === undefined ? undefined : String(input.reason), input.protocol === undefined ? undefined : String(input.protocol)));
        break;
      }
      case 'call':
        need(isInt(input.call), `inputs[${i}].call must be an integer`);
        need(typeof input.name === 'string', `inputs[${i}].name must be a string`);
        await w.run(peer, () => peer.api.call(input.call, input.name, JSON.stringify(input.arguments ?? {}), input.progress === true, input.stream === true));
        break;
      case 'start':
        await w.run(peer, () => w.startPeer(peer));
        break;
      default:
        fatal(`protocol: inputs[${i}].kind ${JSON.stringify(input.kind)} is not open, message, close, call or start`);
    }
  }
  await w.runDue(w.nowUs);
  reply(w);
}

/** Drops a world: its contexts are collected at once (see host.mjs), its statistics written. */
function finishWorld(w) {
  w.end();
  const g0 = hrtimeNs();
  if (collectGarbage) collectGarbage();
  const gcMs = ms(g0);
  const c = cpuUsage(w.stats.c0);
  stat({ event: 'world', seed: w.seed, create_ms: w.stats.createMs, per_peer_ms: w.stats.perPeerMs,
    wall_ms: ms(w.stats.t0), cpu_ms: (c.user + c.system) / 1000, virtual_us: w.nowUs,
    gc_ms: gcMs, rss_mb: Math.round(process.memoryUsage.rss() / 2 ** 20) });
}

function onEnd() {
  if (world) finishWorld(world);
  world = null;
  writeLine('{"type":"ended"}');
}

async function handle(line) {
  let msg;
  try { msg = JSON.parse(line); } catch (e) { fatal(`protocol: a line is not JSON: ${e.message}`); }
  need(msg && typeof msg === 'object', 'a line must be a JSON object');
  switch (msg.type) {
    case 'world': return onWorld(msg);
    case 'step': return onStep(msg);
    case 'end': return onEnd();
    default: return fatal(`protocol: unknown message type ${JSON.stringify(msg.type)}`);
  }
}

// ---- framing: newline-delimited JSON on stdin ----------------------------------------------------------
const queue = [];
let parts = [];
let running = false;
let eof = false;
async function pump() {
  if (running) return;
  running = true;
  try {
    while (queue.length) await handle(queue.shift());
  } catch (e) {
    if (e instanceof FatalExit) return;
    writeLine(JSON.stringify({ type: 'fatal', error: `host error: ${e?.stack ?? e}` }));
    process.exit(3);
  }
  running = false;
  if (eof) process.exit(0);
}
process.stdin.on('data', (buf) => {
  let from = 0;
  for (let nl = buf.indexOf(10, from); nl !== -1; nl = buf.indexOf(10, from)) {
    parts.push(buf.subarray(from, nl));
    const line = parts.length === 1 ? parts[0].toString('utf8') : Buffer.concat(parts).toString('utf8');
    parts = [];
    from = nl + 1;
    if (line.trim().length) queue.push(line);
  }
  if (from < buf.length) parts.push(buf.subarray(from));
  pump();
});
process.stdin.on('end', () => { eof = true; if (!running) process.exit(0); });

writeLine(JSON.stringify({ type: 'hello', protocol: PROTOCOL, program: programPath, host: HOST_NAME,
  node: process.version, bundle_sha256: host.bundleSha256 }));
