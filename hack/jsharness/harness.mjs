// What the Node test runners under hack/ (pagetest, mcptest) share: the
// node:test entry point and flags, the prerequisite checks, and the
// servers a test starts (bin/faucet, bin/oidc-provider) on free ports,
// their log kept for failures, always stopped.
//
// Only node: built-ins here: this file resolves its imports the same from
// whichever runner imports it, whatever that runner's node_modules hold.

import { execFile, spawn } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs, promisify } from 'node:util';

/**
 * runTests runs main, which registers node:test tests, under the spec
 * reporter. node:test prints TAP when its output is not a terminal (make,
 * CI); the spec reporter reads better in a log, so a run without a
 * reporter starts itself once more with it and exits as that run does.
 */
export async function runTests(main) {
  if (process.execArgv.some((a) => a.startsWith('--test-reporter'))) {
    await main();
    return;
  }
  const child = spawn(process.execPath, ['--test-reporter=spec', ...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
  });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}

/**
 * parseFlags is the command line's flags (parseArgs options, to which
 * -h/--help is added): a bad flag exits 2 with the error, --help prints
 * `usage: ${usage}` and exits 0.
 */
export function parseFlags(tool, usage, options) {
  let values;
  try {
    ({ values } = parseArgs({ options: { ...options, help: { type: 'boolean', short: 'h', default: false } } }));
  } catch (err) {
    console.error(`${tool}: ${err.message}`);
    process.exit(2);
  }
  if (values.help) {
    console.log(`usage: ${usage}`);
    process.exit(0);
  }
  return values;
}

/**
 * registerUnlessMissing calls register once preflight passes. When it
 * fails, one test named title fails with its error instead: a missing or
 * old tool then fails once, clearly, not in every scenario.
 */
export async function registerUnlessMissing(title, preflight, register) {
  const missing = await preflight().then(() => null, (err) => err);
  if (missing) {
    const { test } = await import('node:test');
    test(title, () => {
      throw missing;
    });
    return;
  }
  await register();
}

/** mustExecute throws an Error with problem unless file is an executable. */
export async function mustExecute(file, problem) {
  try {
    await access(file, constants.X_OK);
  } catch {
    throw new Error(problem);
  }
}

/**
 * serveHelp checks that faucet is an executable and returns the text of
 * `faucet serve --help`, whose flags tell whether the binary predates what
 * a test needs.
 */
export async function serveHelp(faucet) {
  await mustExecute(faucet, `no faucet binary at ${faucet}: run make build (or pass --faucet)`);
  try {
    const r = await promisify(execFile)(faucet, ['serve', '--help']);
    return r.stdout + r.stderr;
  } catch (err) {
    return `${err.stdout ?? ''}${err.stderr ?? ''}`;
  }
}

/** freePort is a TCP port on 127.0.0.1 the kernel just said is free. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * ServerProcess runs bin with args, a server that listens on
 * 127.0.0.1:port and answers 200 on readyPath once it is up, and keeps the
 * last lines of its output.
 */
export class ServerProcess {
  constructor(bin, port, args, { readyPath = '/readyz', env = process.env } = {}) {
    this.bin = bin;
    this.port = port;
    this.base = `http://127.0.0.1:${port}`;
    this.args = args;
    this.readyPath = readyPath;
    this.env = env;
    this.command = [bin, ...args].join(' ');
    this.lines = [];
    this.proc = null;
    this.exit = null;
    this.stopping = false; // stop was called: its exit is no failure
  }

  start() {
    this.proc = spawn(this.bin, this.args, { stdio: ['ignore', 'pipe', 'pipe'], env: this.env });
    const onData = (chunk) => {
      for (const line of chunk.toString().split('\n')) {
        if (line.trim() !== '') this.keep(line);
      }
      if (this.lines.length > 400) this.lines.splice(0, this.lines.length - 400);
    };
    this.proc.stdout.on('data', onData);
    this.proc.stderr.on('data', onData);
    this.exited = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve();
      });
    });
    this.proc.on('error', (err) => {
      this.exit = { error: err.message };
    });
  }

  /** keep records one line of output; a subclass may read more from it. */
  keep(line) {
    this.lines.push(line);
  }

  running() {
    return this.proc !== null && this.exit === null;
  }

  /** tail is the last n lines of output, indented. */
  tail(n = 60) {
    return this.lines.slice(-n).map((l) => `    | ${l}`).join('\n');
  }

  /** waitReady polls readyPath until it answers 200. */
  async waitReady(timeoutMs = 30_000) {
    const deadline = Date.now() + timeoutMs;
    let last = 'no answer';
    while (Date.now() < deadline) {
      if (!this.running()) {
        throw new Error(`${path.basename(this.bin)} exited early (${JSON.stringify(this.exit)}): ${this.command}\n${this.tail()}`);
      }
      try {
        const r = await fetch(`${this.base}${this.readyPath}`, { signal: AbortSignal.timeout(2000) });
        await r.arrayBuffer();
        if (r.status === 200) return;
        last = `HTTP ${r.status}`;
      } catch (err) {
        last = err.message;
      }
      await sleep(100);
    }
    throw new Error(`${this.command} was not ready within ${timeoutMs / 1000} s (${this.readyPath}: ${last})\n${this.tail()}`);
  }

  /** stop sends SIGTERM and, after timeoutMs without an exit, SIGKILL. */
  async stop(timeoutMs = 8000) {
    this.stopping = true;
    if (!this.running()) return;
    this.proc.kill('SIGTERM');
    // An unref'd timer: a pending one would hold the test run open.
    const exited = await Promise.race([this.exited.then(() => true), sleep(timeoutMs, false, { ref: false })]);
    if (!exited && this.running()) {
      this.proc.kill('SIGKILL');
      await this.exited;
    }
  }

  /** killNow is for process exit, where nothing can be awaited. */
  killNow() {
    if (this.running()) this.proc.kill('SIGKILL');
  }
}

/**
 * killOnExit kills every ServerProcess in procs (a Set the test adds to)
 * when this process exits, or on SIGINT or SIGTERM, which then exit 130.
 */
export function killOnExit(procs) {
  const killAll = () => {
    for (const p of procs) p.killNow();
  };
  process.on('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.once(sig, () => {
      killAll();
      process.exit(130);
    });
  }
}
