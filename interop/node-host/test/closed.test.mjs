// The simulated environment (virtual clock, seeded randomness, timers, sockets), the closed
// channels (real clock, OS randomness, network, processes, files: each must fail loudly) and the
// test-only plants (a deliberate leak must make two runs differ).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Host, workloadWorld, workload, killHosts } from './lib/driver.mjs';

after(killHosts);

const here = path.dirname(fileURLToPath(import.meta.url));
const PROBE = path.join(here, 'fixtures', 'probe.mjs');
const EPOCH = 1_700_000_000_000;
const RELAY = 'ws://relay.relaysim.invalid/';

/** A host running the probe program with peers `names` (all clients), world `seed`. */
async function probeWorld({ seed = '9', names = ['p'], env = {}, hostEnv = {}, nowUs, logOutputs } = {}) {
  const host = new Host(PROBE, hostEnv);
  await host.hello();
  const peers = names.map((name, i) => ({ peer: i, role: 'client', name, secret_key: '', relays: [RELAY] }));
  const first = await host.send({
    type: 'world', seed, epoch_ms: EPOCH, env, peers,
    ...(nowUs === undefined ? {} : { now_us: nowUs }),
    ...(logOutputs === undefined ? {} : { log_outputs: logOutputs }),
  });
  let now = nowUs ?? 0, callId = 0;
  return {
    host, first,
    /** Calls probe `name` on `peer` at now + 1 ms and steps through timers until its outcome. */
    async call(name, args = {}, peer = 0) {
      now += 1000;
      const id = ++callId;
      const outputs = [];
      let r = await host.send({ type: 'step', now_us: now, inputs: [{ kind: 'call', peer, call: id, name, arguments: args }] });
      outputs.push(...r.outputs);
      while (!outputs.some((o) => o.kind === 'outcome' && o.call === id) && r.next_timer_us !== null) {
        now = r.next_timer_us;
        r = await host.send({ type: 'step', now_us: now, inputs: [] });
        outputs.push(...r.outputs);
      }
      return { outcome: outputs.find((o) => o.kind === 'outcome' && o.call === id), outputs, reply: r, now };
    },
    step: async (t, inputs = []) => { now = t; return host.send({ type: 'step', now_us: t, inputs }); },
    get now() { return now; },
  };
}

test('the clock is virtual: Date, performance, process.hrtime, Intl, from epoch_ms and now_us', async () => {
  const w = await probeWorld({ nowUs: 5_000_000 });
  const { outcome } = await w.call('clock');
  await w.host.close();
  const r = outcome.result;
  const t = EPOCH + 5001; // world starts at 5 s; the call is 1 ms later
  assert.equal(r.dateNow, t);
  assert.equal(r.newDate, new Date(t).toISOString());
  assert.equal(r.viaFunction, t, 'Function("return Date.now()") is this realm\'s, also virtual');
  assert.equal(r.perfNow, 5001);
  assert.equal(r.timeOrigin, EPOCH);
  assert.deepEqual(r.hrtime, [5, 1_000_000]);
  assert.equal(r.hrtimeBigint, '5001000000');
  assert.equal(r.uptime, 5.001);
  assert.equal(r.local, 0, 'local time is UTC');
  assert.equal(r.locale, '1/1/1970, 12:00:00 AM', 'the default locale is en-US');
  assert.equal(r.intl, '11/14/2023');
  assert.equal(r.ctorIsDate, true);
  assert.equal(r.protoCtor, true, 'Date.prototype.constructor is the virtual Date');
});

test('randomness is seeded per world and per peer, and the same again for the same seed', async () => {
  const run = async (seed) => {
    const w = await probeWorld({ seed, names: ['a', 'b'] });
    const a = (await w.call('random', {}, 0)).outcome.result;
    const b = (await w.call('random', {}, 1)).outcome.result;
    await w.host.close();
    return { a, b };
  };
  const x = await run('1'), y = await run('1'), z = await run('2');
  assert.deepEqual(x, y, 'same seed, same draws');
  assert.notDeepEqual(x.a, x.b, 'two peers draw different streams');
  assert.notDeepEqual(x.a, z.a, 'another seed draws differently');
  assert.match(x.a.uuid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.ok(x.a.math.every((v) => v >= 0 && v < 1));
});

test('timers fire in (due time, creation) order, setTimeout(0) is 1 ms as in node, microtasks first', async () => {
  const w = await probeWorld();
  const { outcome } = await w.call('timers');
  await w.host.close();
  assert.deepEqual(outcome.result, ['tick@0', 'micro@0', 'then@0', 'imm@0', 't0@1', 'iv5@5', 't10@10', 't10b@10', 'iv5@10', 'iv5@15']);
});

test('the realm-local TextEncoder, TextDecoder, digests, URL, WeakRef and env behave as node\'s', async () => {
  const w = await probeWorld({ env: { LOG_LEVEL: 'warn', X: 'y' } });
  const samples = ['', 'a', 'é€😀', 'x\ud800y', '\udc00', '\ud83d', 'a\u0000b', 'é'.repeat(40) + '😀'.repeat(20), 'long '.repeat(50) + '\ud800'];
  for (const s of samples) {
    const { outcome } = await w.call('encode', { s });
    assert.deepEqual(outcome.result.bytes, [...new TextEncoder().encode(s)], JSON.stringify(s));
    assert.equal(outcome.result.back, new TextDecoder().decode(new TextEncoder().encode(s)));
  }
  const d = (await w.call('digest', { s: 'abc' })).outcome.result;
  assert.equal(d.subtle, 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(d.node, d.subtle);
  assert.deepEqual((await w.call('url', { u: 'http://a.b/c?d=1' })).outcome.result, { href: 'http://a.b/c?d=1&q=1+2', host: 'a.b', isURL: true });
  assert.deepEqual((await w.call('weakref')).outcome.result, { same: true });
  assert.deepEqual((await w.call('env')).outcome.result, { env: { LOG_LEVEL: 'warn', X: 'y' }, platform: 'linux', argv0: 'node', hasNodeVersion: false });
  await w.host.close();
});

test('the simulated WebSocket: connect, open, send, message, program close', async () => {
  const w = await probeWorld();
  let r = await w.step(1000, [{ kind: 'call', peer: 0, call: 1, name: 'websocket', arguments: {} }]);
  assert.deepEqual(r.outputs, [{ kind: 'connect', peer: 0, socket: 0, url: RELAY }]);
  r = await w.step(2000, [{ kind: 'open', peer: 0, socket: 0 }]);
  assert.deepEqual(r.outputs, [{ kind: 'send', peer: 0, socket: 0, text: 'hello' }]);
  r = await w.step(3000, [{ kind: 'message', peer: 0, socket: 0, text: 'hi' }]);
  assert.deepEqual(r.outputs, [
    { kind: 'close', peer: 0, socket: 0, code: 1000, reason: 'bye' },
    { kind: 'outcome', peer: 0, call: 1, ok: true, result: ['open', 'message:hi', 'close:1000:true'] },
  ]);
  // Inputs for a socket the program closed are ignored; a socket never connected is an error.
  r = await w.step(4000, [{ kind: 'message', peer: 0, socket: 0, text: 'late' }]);
  assert.deepEqual(r.outputs, []);
  r = await w.step(5000, [{ kind: 'open', peer: 0, socket: 7 }]);
  assert.equal(r.outputs[0].kind, 'error');
  await w.host.close();
});

const LEAKS = ['net', 'http', 'https', 'tls', 'dgram', 'dns', 'child_process', 'worker_threads', 'fs-write', 'fs-read', 'os',
  'fetch', 'subtle-sign', 'node-webcrypto-subtle', 'generateKeyPair', 'cpuUsage', 'memoryUsage', 'eventLoopUtilization',
  'process.binding', 'perf_hooks-observer', 'host-realm-date', 'host-realm-eval-import', 'host-realm-random'];

test('planted nondeterminism is caught: every closed channel fails loudly with an error output', async () => {
  const w = await probeWorld();
  for (const leak of LEAKS) {
    const { outcome, outputs } = await w.call(`leak:${leak}`);
    const errors = outputs.filter((o) => o.kind === 'error');
    assert.ok(errors.length >= 1, `${leak}: an error output (got ${JSON.stringify(outputs)})`);
    assert.match(errors[0].error, /^relaysim-node-host: nondeterminism: /, leak);
    assert.equal(errors[0].peer, 0);
    assert.equal(outcome.ok, false, `${leak}: the access threw`);
  }
  await w.host.close();
});

test('an object of the host\'s realm, if one ever reached the program, has a loud clock too', async () => {
  const w = await probeWorld({ hostEnv: { RELAYSIM_HOST_PLANT: 'host-object' } });
  for (const leak of ['planted-host-object-date', 'planted-host-object-hrtime']) {
    const { outcome, outputs } = await w.call(`leak:${leak}`);
    assert.match(outputs.find((o) => o.kind === 'error')?.error ?? '', /of the host's realm was reached from the program/, leak);
    assert.equal(outcome.ok, false);
  }
  await w.host.close();
});

test('uncaught exceptions, unhandled rejections and runaway timers become error outputs', async () => {
  const w = await probeWorld({ hostEnv: { RELAYSIM_NODE_HOST_MAX_FIRINGS: '1000' } });
  let { outputs } = await w.call('throwInTimer');
  let r = await w.step(w.now + 5000);
  assert.match(r.outputs.find((o) => o.kind === 'error')?.error ?? '', /uncaught exception: timer callback: Error: boom in a timer/);
  ({ outputs } = await w.call('unhandled'));
  assert.match(outputs.find((o) => o.kind === 'error')?.error ?? '', /^unhandled rejection: nobody catches this$/);
  ({ outputs } = await w.call('runaway'));
  r = await w.step(w.now + 10_000_000); // 10 s of a 1 ms interval: 10,000 firings
  assert.match(r.outputs.find((o) => o.kind === 'error')?.error ?? '', /^runaway timers: more than 1000 timer callbacks in one step/);
  await w.host.close();
});

test('protocol errors: time going backwards is an error output; a malformed line is fatal', async () => {
  const w = await probeWorld();
  await w.step(10_000);
  const r = await w.step(5_000);
  assert.match(r.outputs[0].error, /before the world's virtual time/);
  w.host.proc.stdin.write('not json\n');
  const fatal = JSON.parse(await w.host.nextLine());
  assert.equal(fatal.type, 'fatal');
  assert.equal(await w.host.exited, 2);
});

// ---- plants: a deliberate leak must show in the transcripts ------------------------------------
const ECHO = workload().slice(0, 1);
async function echoTranscript(hostEnv) {
  const host = new Host(undefined, hostEnv);
  await host.hello();
  const run = await workloadWorld(host, 5, ECHO);
  await host.close();
  assert.equal(run.outcomes[0].ok, true);
  return host.lines.join('\n');
}

test('a planted real-clock leak (RELAYSIM_HOST_PLANT=real-clock) makes two runs differ', async () => {
  const clean = await echoTranscript({});
  const a = await echoTranscript({ RELAYSIM_HOST_PLANT: 'real-clock' });
  await new Promise((r) => setTimeout(r, 1100)); // event created_at has a resolution of 1 s
  const b = await echoTranscript({ RELAYSIM_HOST_PLANT: 'real-clock' });
  assert.notEqual(a, clean);
  assert.notEqual(a, b, 'a determinism check (two runs, one seed) catches the leak');
  assert.equal(await echoTranscript({}), clean, 'without the plant, the runs agree');
});

test('a planted OS-randomness leak (RELAYSIM_HOST_PLANT=real-random) makes two runs differ', async () => {
  const a = await echoTranscript({ RELAYSIM_HOST_PLANT: 'real-random' });
  const b = await echoTranscript({ RELAYSIM_HOST_PLANT: 'real-random' });
  assert.notEqual(a, b);
});

test('log_outputs reports every line, the lines of the levels it lists, or none', async () => {
  const logs = async (logOutputs) => {
    const w = await probeWorld({ logOutputs });
    const { outcome, outputs } = await w.call('log', { text: 'it went wrong' });
    await w.host.close();
    assert.equal(outcome.result, 'logged');
    return outputs.filter((o) => o.kind === 'log').map((o) => `${o.level}:${o.text}`);
  };
  assert.deepEqual(await logs(true), ['program:it went wrong', 'warn:a console line']);
  assert.deepEqual(await logs(['program']), ['program:it went wrong']);
  assert.deepEqual(await logs(undefined), []);
});
