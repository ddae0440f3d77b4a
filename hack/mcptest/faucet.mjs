// The faucet under test: a real `bin/faucet serve --devnet` on a free port,
// its log kept for failures, always stopped; and random Stacks addresses.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

import { c32address } from 'c32check';

/** freePort is a TCP port on 127.0.0.1 the kernel just said is free. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** testnetAddress is a fresh random standard testnet address (ST…, version 26). */
export function testnetAddress() {
  return c32address(26, randomBytes(20).toString('hex'));
}

/** mainnetAddress is a random standard mainnet address (SP…, version 22). */
export function mainnetAddress() {
  return c32address(22, randomBytes(20).toString('hex'));
}

/**
 * Faucet runs `faucet serve --devnet … --listen 127.0.0.1:port` and keeps
 * the last lines of its log.
 */
export class Faucet {
  constructor(bin, port, extraArgs = []) {
    this.bin = bin;
    this.base = `http://127.0.0.1:${port}`;
    this.args = ['serve', '--devnet', '--listen', `127.0.0.1:${port}`, '--log-format', 'text', ...extraArgs];
    this.command = [bin, ...this.args].join(' ');
    this.lines = [];
    this.exit = null;
  }

  start() {
    this.proc = spawn(this.bin, this.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk) => {
      this.lines.push(...chunk.toString().split('\n').filter((l) => l.trim() !== ''));
      if (this.lines.length > 200) this.lines.splice(0, this.lines.length - 200);
    };
    this.proc.stdout.on('data', keep);
    this.proc.stderr.on('data', keep);
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

  running() {
    return this.proc !== undefined && this.exit === null;
  }

  /** tail is the last n log lines, indented. */
  tail(n = 60) {
    return this.lines.slice(-n).map((l) => `    | ${l}`).join('\n');
  }

  /** waitReady polls /readyz until it answers 200. */
  async waitReady(timeoutMs = 30_000) {
    const deadline = Date.now() + timeoutMs;
    let last = 'no answer';
    while (Date.now() < deadline) {
      if (!this.running()) {
        throw new Error(`the faucet exited (${JSON.stringify(this.exit)}): ${this.command}\n${this.tail()}`);
      }
      try {
        const r = await fetch(`${this.base}/readyz`, { signal: AbortSignal.timeout(2000) });
        await r.arrayBuffer();
        if (r.status === 200) return;
        last = `HTTP ${r.status}`;
      } catch (err) {
        last = err.message;
      }
      await sleep(100);
    }
    throw new Error(`${this.command}: not ready within ${timeoutMs / 1000} s (/readyz: ${last})\n${this.tail()}`);
  }

  /** stop sends SIGTERM and, after timeoutMs without an exit, SIGKILL. */
  async stop(timeoutMs = 8000) {
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
