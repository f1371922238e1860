// Bundling a program (esbuild) and compiling the scripts every peer context evaluates.
import * as esbuild from 'esbuild';
import vm from 'node:vm';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const hostRequire = createRequire(import.meta.url);

/**
 * Packages whose node build does real I/O at load time (pino opens a SonicBoom on fd 1/2 and may
 * start a worker thread; debug probes the tty), replaced by the package's own `browser` build,
 * which logs through `console` (captured by the host).
 */
export const BROWSER_BUILDS = ['pino', 'debug'];
/** Packages replaced by host shims. */
export const SHIMS = { ws: path.join(here, 'shims', 'ws.cjs') };

/** Node built-ins a program may `require` that are closed (every function fails loudly). */
export const CLOSED_MODULES = [
  'net', 'tls', 'http', 'https', 'http2', 'dgram', 'dns', 'dns/promises', 'child_process', 'cluster',
  'worker_threads', 'fs', 'fs/promises', 'readline', 'inspector', 'v8', 'vm', 'module', 'os',
  'async_hooks', 'diagnostics_channel', 'tty', 'zlib', 'repl',
];

function browserBuildPlugin() {
  return {
    name: 'relaysim-browser-builds',
    setup(build) {
      const filter = new RegExp(`^(${BROWSER_BUILDS.join('|')})$`);
      build.onResolve({ filter }, async (args) => {
        if (args.pluginData === 'relaysim-inner') return undefined;
        const pkg = await build.resolve(`${args.path}/package.json`, {
          resolveDir: args.resolveDir, kind: args.kind, pluginData: 'relaysim-inner',
        });
        if (pkg.errors.length) return undefined; // let esbuild report its own error
        const json = JSON.parse(fs.readFileSync(pkg.path, 'utf8'));
        if (typeof json.browser !== 'string') return undefined;
        return { path: path.join(path.dirname(pkg.path), json.browser) };
      });
      for (const [name, file] of Object.entries(SHIMS)) {
        build.onResolve({ filter: new RegExp(`^${name}$`) }, () => ({ path: file }));
      }
    },
  };
}

/** Bundles the program at `programPath` (resolving from its own directory). */
export async function bundleProgram(programPath) {
  const abs = path.resolve(programPath);
  const result = await esbuild.build({
    entryPoints: [abs],
    absWorkingDir: path.dirname(abs),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    write: false,
    logLevel: 'silent',
    legalComments: 'none',
    charset: 'utf8',
    plugins: [browserBuildPlugin()],
  });
  const warnings = result.warnings.map((w) => `${w.location?.file ?? ''}:${w.location?.line ?? ''}: ${w.text}`);
  return { code: result.outputFiles[0].text, warnings };
}

/** The `buffer` and `events` packages as scripts returning their module, for lazy per-context use. */
export async function bundlePolyfills() {
  const out = {};
  for (const [name, spec] of Object.entries({ buffer: 'buffer/', events: 'events/' })) {
    const entry = hostRequire.resolve(spec);
    const r = await esbuild.build({
      stdin: { contents: `module.exports = require(${JSON.stringify(entry)});`, resolveDir: here, loader: 'js' },
      bundle: true, platform: 'neutral', format: 'cjs', write: false, logLevel: 'silent', legalComments: 'none',
      mainFields: ['main'],
    });
    out[name] = `(function () { var module = { exports: {} }, exports = module.exports;\n${r.outputFiles[0].text}\nreturn module.exports; })()`;
  }
  return out;
}

/** Key shapes of the closed built-ins, taken from the real modules (no module is used). */
export function closedModuleKeys() {
  const out = {};
  for (const name of CLOSED_MODULES) {
    let real;
    try { real = hostRequire(`node:${name}`); } catch { continue; }
    const keys = {};
    for (const k of Object.keys(real)) {
      let v;
      try { v = real[k]; } catch { keys[k] = 'object'; continue; }
      if (typeof v === 'function') keys[k] = 'function';
      else if (v === null || typeof v !== 'object') keys[k] = { value: v === undefined ? null : v };
      else keys[k] = 'object';
    }
    out[name] = keys;
  }
  return out;
}

/**
 * A vm.Script compiled once per process; its V8 code cache is kept on disk (keyed by the
 * source's digest and node's version) so later processes skip compiling too.
 */
export class CachedScript {
  /** `onImport(specifier)` is called for a dynamic import() in the script; it must throw. */
  constructor(source, filename, onImport) {
    this.digest = createHash('sha256').update(process.version).update('\0').update(source).digest('hex');
    this.dir = process.env.RELAYSIM_NODE_HOST_CACHE ?? path.join(os.tmpdir(), 'relaysim-node-host-cache');
    this.file = path.join(this.dir, `${this.digest}.v8cache`);
    let cachedData;
    try { cachedData = fs.readFileSync(this.file); } catch { /* no cache yet */ }
    // A dynamic import() that esbuild could not resolve at bundle time would load code from
    // outside the bundle; node would also reject it with an error object of the host's realm.
    // Such an import is refused by the host instead (with a primitive, realm-free rejection).
    this.script = new vm.Script(source, {
      filename, cachedData,
      importModuleDynamically: onImport ? (specifier) => onImport(String(specifier)) : undefined,
    });
    this.cacheUsed = cachedData !== undefined && !this.script.cachedDataRejected;
    this.saved = this.cacheUsed;
  }
  /** Writes the code cache once, after the script has run (so lazily compiled functions are in). */
  save() {
    if (this.saved) return;
    this.saved = true;
    try {
      fs.mkdirSync(this.dir, { recursive: true });
      const tmp = `${this.file}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, this.script.createCachedData());
      fs.renameSync(tmp, this.file);
    } catch { /* a cache is only a cache */ }
  }
}
