// Measures (and prints) what the host costs: start (bundling), per-world context creation, and
// CPU per seed of the standard workload (echo + a 1 MiB CEP-22 result + a 100-chunk stream)
// through the host, against the "floor": the same program, calls and ideal relay in one plain
// node realm (test/lib/floor.mjs: real timers, no vm contexts, no line protocol).
// PERF_SEEDS (default 3) and PERF_CONTENT (ascii | escape-heavy | utf8 | random; default ascii)
// choose the size of the run. Nothing here fails on speed: the machine may be busy.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Host, workloadWorld, workload, killHosts } from './lib/driver.mjs';

after(killHosts);
const here = path.dirname(fileURLToPath(import.meta.url));
const SEEDS = Number(process.env.PERF_SEEDS ?? 3);
const CONTENT = process.env.PERF_CONTENT ?? 'ascii';
const CALLS = workload(CONTENT).slice(0, 3);
const mean = (a) => a.reduce((x, y) => x + y, 0) / a.length;
const f1 = (x) => x.toFixed(1);

test(`host vs floor: CPU per seed of echo + 1 MiB ${CONTENT} CEP-22 result + 100-chunk stream (${SEEDS} seeds)`, async (t) => {
  const t0 = performance.now();
  const host = new Host(undefined, { RELAYSIM_NODE_HOST_STATS: '1' });
  await host.hello();
  const helloMs = performance.now() - t0;
  for (let s = 1; s <= SEEDS; s++) {
    const run = await workloadWorld(host, 1000 + s, CALLS);
    assert.ok(run.outcomes.every((o) => o.ok), JSON.stringify(run.outcomes.map((o) => o.error)));
  }
  await host.close();
  const stats = host.stats();
  const bundle = stats.find((x) => x.event === 'bundle');
  const worlds = stats.filter((x) => x.event === 'world');
  const hostCpu = worlds.map((w) => w.cpu_ms);
  const perPeer = worlds.flatMap((w) => w.per_peer_ms);

  const floorRun = async (env) => {
    const { stdout } = await promisify(execFile)(process.execPath, [path.join(here, 'lib', 'floor.mjs'), String(SEEDS), CONTENT, '3'],
      { maxBuffer: 1 << 20, env: { ...process.env, ...env } });
    return JSON.parse(stdout.trim().split('\n').at(-1));
  };
  const floor = await floorRun({});
  const floorCpu = floor.cpu_ms_per_seed;
  const floorFast = (await floorRun({ FLOOR_ENCODER: 'host' })).cpu_ms_per_seed;

  const ratio = mean(hostCpu) / mean(floorCpu);
  const machinery = mean(hostCpu) / mean(floorFast);
  const lines = [
    `host start: ${f1(helloMs)} ms to hello (node start, re-exec with --experimental-vm-modules, bundling ${f1(bundle.bundle_ms)} ms, compiling ${f1(bundle.compile_ms)} ms, ${bundle.bundle_bytes} bytes, code cache ${bundle.code_cache_used ? 'used' : 'cold'})`,
    `world creation: ${worlds.map((w) => f1(w.create_ms)).join(', ')} ms per world (2 peers)`,
    `per peer: context ${f1(mean(perPeer.map((p) => p.context)))} ms + environment ${f1(mean(perPeer.map((p) => p.prelude)))} ms + program evaluation ${f1(mean(perPeer.map((p) => p.program)))} ms`,
    `host CPU per seed: ${hostCpu.map(f1).join(', ')} ms (mean ${f1(mean(hostCpu))}); rss after each world: ${worlds.map((w) => w.rss_mb).join(', ')} MB`,
    `floor CPU per seed: ${floorCpu.map(f1).join(', ')} ms (mean ${f1(mean(floorCpu))}; loading the SDK once: ${f1(floor.load_cpu_ms)} ms)`,
    `floor CPU per seed with the host's TextEncoder fast path: ${floorFast.map(f1).join(', ')} ms (mean ${f1(mean(floorFast))})`,
    `host / floor: ${ratio.toFixed(2)}; host / floor with the same TextEncoder (the host's machinery alone): ${machinery.toFixed(2)}`,
    `200 seeds, 2 processes on 2 cores: about ${f1(mean(hostCpu) * 200 / 2 / 1000)} s wall through the host (floor: ${f1(mean(floorCpu) * 200 / 2 / 1000)} s)`,
  ];
  for (const l of lines) t.diagnostic(l);
  console.log(lines.map((l) => `perf: ${l}`).join('\n'));
});
