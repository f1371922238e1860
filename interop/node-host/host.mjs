#!/usr/bin/env node
// relaysim-node-host: runs a JavaScript peer program inside relaysim's simulated world, in
// virtual time, speaking the line protocol of PROTOCOL.md on stdin/stdout.
//
//   node host.mjs --program PATH
//
// The host needs node's --experimental-vm-modules: without it, a dynamic import() inside a
// peer's context is rejected by node with an error object of the host's own realm (a way out of
// the simulated world). It also wants --expose-gc, to collect a world's contexts when it ends
// (V8 otherwise lets dead contexts pile up: ~11 MB each). Started without the first, this file
// runs itself again with both (stdin, stdout and stderr are inherited; signals are passed on;
// the exit status is passed back).
import { fileURLToPath } from 'node:url';

const FLAG = '--experimental-vm-modules';
if (process.execArgv.includes(FLAG)) {
  await import('./lib/main.mjs');
} else {
  const { spawn } = await import('node:child_process');
  const child = spawn(process.execPath, [FLAG, '--expose-gc', '--disable-warning=ExperimentalWarning', ...process.execArgv,
    fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}
