// The real @contextvm/sdk (interop/ts-sdk/program.mjs) in the host, on the mini relay world:
// outcomes, determinism across processes, seeds and isolation between worlds.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Host, workloadWorld, workload, killHosts } from './lib/driver.mjs';

after(killHosts);

const sha = (s) => 'sha256:' + createHash('sha256').update(s, 'utf8').digest('hex');
const textOf = (o) => o.result?.content?.[0]?.text;
const chunkText = (i, n) => { const l = `chunk ${i}:`; return l + 'x'.repeat(Math.max(0, n - l.length)); };

/** Every outcome of the standard workload is what relaysim's oracle would accept. */
function checkOutcomes(run, calls) {
  const [echo, large, stream, upload, fail] = run.outcomes;
  assert.deepEqual(run.errors, [], 'no error outputs');

  assert.equal(echo.ok, true);
  assert.equal(textOf(echo), calls[0].arguments.text);
  assert.equal(echo.result.isError, false);

  assert.equal(large.ok, true, large.error);
  const text = textOf(large);
  assert.equal(Buffer.byteLength(text, 'utf8'), calls[1].arguments.bytes, 'exactly `bytes` UTF-8 bytes');
  assert.equal(large.result._meta.sha256, sha(text), 'the result carries its own digest');
  assert.equal(run.frames.oversized.start, 1, 'one CEP-22 start frame');
  assert.equal(run.frames.oversized.end, 1, 'one CEP-22 end frame');
  assert.ok(run.frames.oversized.chunk > 20, `CEP-22 chunk frames: ${run.frames.oversized.chunk}`);

  assert.equal(stream.ok, true, stream.error);
  const { chunks, chunk_bytes: n } = calls[2].arguments;
  assert.equal(stream.chunks.length, chunks);
  stream.chunks.forEach((c, i) => assert.equal(c, chunkText(i, n), `chunk ${i}`));
  assert.equal(textOf(stream), `streamed ${chunks} chunks`);
  assert.equal(run.frames.streamChunks, chunks, 'one CEP-41 chunk frame per chunk');

  assert.equal(upload.ok, true, upload.error);
  assert.equal(textOf(upload), sha(calls[3].arguments.data));

  assert.equal(fail.ok, false);
  assert.equal(fail.error, `MCP error -32000: ${calls[4].arguments.reason}`);
}

/** The signed events the host's peers published in a transcript, by position. */
function publishedEvents(lines) {
  const events = [];
  for (const line of lines) {
    const m = JSON.parse(line);
    for (const o of m.outputs ?? []) {
      if (o.kind !== 'send') continue;
      const f = JSON.parse(o.text);
      if (f[0] === 'EVENT') events.push(f[1]);
    }
  }
  return events;
}

const ESCAPES = workload('escape-heavy');
const ASCII = workload('ascii');
let first; // the transcript of seed 1 in a fresh process (escape-heavy workload)

test('the workload completes correctly through the real SDK (1 MiB escape-heavy CEP-22 result, 100-chunk stream)', async () => {
  const host = new Host();
  const hello = await host.hello();
  assert.equal(hello.type, 'hello');
  assert.equal(hello.protocol, 1);
  const run = await workloadWorld(host, 1, ESCAPES);
  checkOutcomes(run, ESCAPES);
  assert.equal(await host.close(), 0);
  first = host.lines;
});

test('determinism: the same seed in another process gives a byte-identical transcript', async () => {
  assert.ok(first, 'needs the previous test');
  const host = new Host();
  await host.hello();
  const run = await workloadWorld(host, 1, ESCAPES);
  checkOutcomes(run, ESCAPES);
  assert.equal(await host.close(), 0);
  assert.equal(host.lines.length, first.length);
  for (let i = 0; i < first.length; i++) assert.equal(host.lines[i], first[i], `line ${i} differs`);
});

test('isolation: world B after world A in one process is exactly world B in a fresh process; another seed signs differently', async () => {
  const fresh = new Host();
  await fresh.hello();
  const alone = await workloadWorld(fresh, 42, ASCII);
  checkOutcomes(alone, ASCII);
  await fresh.close();

  const host = new Host();
  await host.hello();
  const a = await workloadWorld(host, 41, ASCII);
  const b = await workloadWorld(host, 42, ASCII);
  await host.close();
  checkOutcomes(a, ASCII);
  checkOutcomes(b, ASCII);
  assert.deepEqual(b.lines, alone.lines, 'world 42 after world 41 = world 42 alone, byte for byte');

  // Seeds 41 and 42: the same exchange, signed with different BIP-340 auxiliary randomness.
  const ea = publishedEvents(a.lines), eb = publishedEvents(b.lines);
  assert.equal(ea.length, eb.length, 'as many events');
  assert.notDeepEqual(a.lines, b.lines);
  for (let i = 0; i < ea.length; i++) assert.notEqual(ea[i].sig, eb[i].sig, `event ${i}: signatures differ`);
  const differentIds = ea.filter((e, i) => e.id !== eb[i].id).length;
  assert.ok(differentIds > 0, 'some event ids differ (random subscription ids, payload drawn from the seed)');
  // ... yet the same outcomes, but for the large result's text, which is drawn from the seed.
  for (const i of [0, 2, 3, 4]) assert.deepEqual(a.outcomes[i], b.outcomes[i]);
  assert.notEqual(textOf(a.outcomes[1]), textOf(b.outcomes[1]));
});

test('the rest of the catalogue: slow with progress, a CEP-22 upload, exact utf8/random sizes, argument errors', async () => {
  const calls = [
    { name: 'slow', arguments: { ms: 1000, progress_ms: 250 }, progress: true },
    { name: 'slow', arguments: { ms: 300, progress_ms: 10 } },
    { name: 'upload', arguments: { data: 'up✓'.repeat(40000) }, progress: true },
    { name: 'large_result', arguments: { bytes: 70001, content: 'utf8' }, progress: true },
    { name: 'large_result', arguments: { bytes: 9999, content: 'random' } },
    { name: 'nope', arguments: {} },
    { name: 'large_result', arguments: { bytes: -1 } },
    { name: 'stream', arguments: { chunks: 3, chunk_bytes: 2, interval_ms: 0 } },
    { name: 'stream', arguments: { chunks: 3, chunk_bytes: 2, interval_ms: 0 }, stream: true },
  ];
  const host = new Host();
  await host.hello();
  const run = await workloadWorld(host, 3, calls);
  await host.close();
  const [slow, slowNoToken, upload, utf8, random, unknown, bad, streamNoToken, short] = run.outcomes;
  assert.deepEqual(run.errors, []);
  assert.equal(textOf(slow), 'done');
  // progress k of 4 at 250, 500, 750 ms; the one due at 1000 ms comes after the answer (as in relaysim)
  assert.deepEqual(run.frames.progress.map((p) => [p.progress, p.total]), [[1, 4], [2, 4], [3, 4]]);
  assert.equal(textOf(slowNoToken), 'done');
  assert.equal(upload.ok, true, upload.error);
  assert.equal(textOf(upload), sha(calls[2].arguments.data));
  assert.ok(run.frames.oversized.start >= 2, 'the upload and the utf8 result went as CEP-22 transfers');
  for (const [o, n] of [[utf8, 70001], [random, 9999]]) {
    assert.equal(Buffer.byteLength(textOf(o), 'utf8'), n);
    assert.equal(o.result._meta.sha256, sha(textOf(o)));
  }
  assert.equal(unknown.error, 'MCP error -32602: unknown tool "nope"');
  assert.equal(bad.error, 'MCP error -32602: tool large_result: argument `bytes` must be a non-negative integer within limits');
  assert.equal(streamNoToken.error, 'MCP error -32602: stream needs a progressToken');
  assert.deepEqual(short.chunks, ['chunk 0:', 'chunk 1:', 'chunk 2:'], 'a chunk is at least its label');
});
