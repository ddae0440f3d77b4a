// Proof-of-work solver, run as a module Web Worker by app.js (and imported
// by the Node tests for solve()).
//
// Find the smallest decimal counter s = 0, 1, 2, … such that
// SHA-256(UTF-8(token + ":" + s)) starts with at least `difficulty` zero bits
// ("sha256-leading-zero-bits").
//
// Messages in:  {type: "solve", token, difficulty}
// Messages out: {type: "progress", tried}  (about every 100 ms)
//               {type: "solved", solution, tried}
//               {type: "error", message}
// The page cancels by terminating the worker.

import { PrefixHasher, utf8 } from './sha256.js';

const MAX_DIFFICULTY = 40;

/**
 * solve searches counters from `from` for count attempts at most; it returns
 * {solution, tried} with solution a decimal string, or null when none of
 * them qualifies. onBatch(tried) is called every `batch` attempts; when it
 * returns false the search stops early.
 */
export function solve(token, difficulty, { from = 0, count = Infinity, batch = 4096, onBatch } = {}) {
  if (typeof token !== 'string' || token === '') throw new Error('empty challenge token');
  if (!Number.isInteger(difficulty) || difficulty < 0 || difficulty > MAX_DIFFICULTY) {
    throw new Error(`unsupported difficulty ${difficulty}`);
  }
  const hasher = new PrefixHasher(utf8(token + ':'));
  const digits = new Uint8Array(20);
  let tried = 0;
  for (let n = from; tried < count; n++) {
    // The counter's decimal digits, written into digits[0:len].
    const str = String(n);
    const len = str.length;
    for (let i = 0; i < len; i++) digits[i] = str.charCodeAt(i);
    tried++;
    if (hasher.zeroBits(digits, len) >= difficulty) {
      return { solution: str, tried };
    }
    if (onBatch && tried % batch === 0 && onBatch(tried) === false) {
      return null;
    }
  }
  return null;
}

// Worker entry point: only when running as a dedicated worker.
if (typeof WorkerGlobalScope !== 'undefined' && globalThis instanceof WorkerGlobalScope) {
  globalThis.onmessage = (ev) => {
    const { type, token, difficulty } = ev.data || {};
    if (type !== 'solve') return;
    try {
      let last = Date.now();
      const res = solve(token, difficulty, {
        batch: 2048,
        onBatch(tried) {
          const now = Date.now();
          if (now - last >= 100) {
            last = now;
            globalThis.postMessage({ type: 'progress', tried });
          }
          return true;
        },
      });
      globalThis.postMessage({ type: 'solved', solution: res.solution, tried: res.tried });
    } catch (err) {
      globalThis.postMessage({ type: 'error', message: String(err && err.message ? err.message : err) });
    }
  };
}
