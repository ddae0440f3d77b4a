// SHA-256 (FIPS 180-4) in plain JavaScript, synchronous.
//
// The page cannot rely on crypto.subtle: browsers only expose it on secure
// origins (https or localhost), and a faucet is often reached over plain
// http. A synchronous hash is also much faster for the proof of work than
// awaiting one promise per attempt.
//
// An ES module for the page, the Web Worker and Node (hack/pagetest).

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

const IV = new Int32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);

// The message schedule, shared: JavaScript runs one compression at a time.
const W = new Int32Array(64);

// compress folds the 64-byte block of buf at off into the state h.
function compress(h, buf, off) {
  for (let i = 0; i < 16; i++, off += 4) {
    W[i] = (buf[off] << 24) | (buf[off + 1] << 16) | (buf[off + 2] << 8) | buf[off + 3];
  }
  for (let i = 16; i < 64; i++) {
    const w15 = W[i - 15];
    const w2 = W[i - 2];
    const s0 = ((w15 >>> 7) | (w15 << 25)) ^ ((w15 >>> 18) | (w15 << 14)) ^ (w15 >>> 3);
    const s1 = ((w2 >>> 17) | (w2 << 15)) ^ ((w2 >>> 19) | (w2 << 13)) ^ (w2 >>> 10);
    W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
  }
  let a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const ch = (e & f) ^ (~e & g);
    const t1 = (hh + S1 + ch + K[i] + W[i]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const maj = (a & b) ^ (a & c) ^ (b & c);
    const t2 = (S0 + maj) | 0;
    hh = g; g = f; f = e; e = (d + t1) | 0;
    d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  h[0] = (h[0] + a) | 0; h[1] = (h[1] + b) | 0; h[2] = (h[2] + c) | 0; h[3] = (h[3] + d) | 0;
  h[4] = (h[4] + e) | 0; h[5] = (h[5] + f) | 0; h[6] = (h[6] + g) | 0; h[7] = (h[7] + hh) | 0;
}

// finish hashes the last len bytes of a message of total bytes, taken from
// tail (which must have room for 72 more bytes after len), into h.
function finish(h, tail, len, total) {
  let off = 0;
  while (len - off >= 64) {
    compress(h, tail, off);
    off += 64;
  }
  let n = len - off;
  if (off > 0) tail.copyWithin(0, off, len);
  tail[n++] = 0x80;
  const blocks = n + 8 <= 64 ? 1 : 2;
  tail.fill(0, n, blocks * 64 - 8);
  // The bit length, big-endian over 8 bytes; messages stay below 2^53 bits.
  const bits = total * 8;
  const hi = Math.floor(bits / 0x100000000);
  const lo = bits >>> 0;
  const p = blocks * 64 - 8;
  tail[p] = hi >>> 24; tail[p + 1] = hi >>> 16; tail[p + 2] = hi >>> 8; tail[p + 3] = hi;
  tail[p + 4] = lo >>> 24; tail[p + 5] = lo >>> 16; tail[p + 6] = lo >>> 8; tail[p + 7] = lo;
  compress(h, tail, 0);
  if (blocks === 2) compress(h, tail, 64);
}

function wordsToBytes(h) {
  const out = new Uint8Array(32);
  for (let i = 0; i < 8; i++) {
    out[4 * i] = h[i] >>> 24;
    out[4 * i + 1] = h[i] >>> 16;
    out[4 * i + 2] = h[i] >>> 8;
    out[4 * i + 3] = h[i];
  }
  return out;
}

/** sha256 returns the 32-byte digest of data (a Uint8Array). */
export function sha256(data) {
  const h = new Int32Array(IV);
  const full = data.length - (data.length % 64);
  for (let off = 0; off < full; off += 64) compress(h, data, off);
  const tail = new Uint8Array(128);
  tail.set(data.subarray(full));
  finish(h, tail, data.length - full, data.length);
  return wordsToBytes(h);
}

/** utf8 encodes a string as UTF-8 bytes. */
export function utf8(s) {
  return new TextEncoder().encode(s);
}

/** hex renders bytes as lower-case hex. */
export function hex(bytes) {
  let s = '';
  for (const b of bytes) s += (b < 16 ? '0' : '') + b.toString(16);
  return s;
}

/** leadingZeroBits counts the zero bits at the start of a digest (bytes). */
export function leadingZeroBits(digest) {
  let n = 0;
  for (const b of digest) {
    if (b === 0) {
      n += 8;
      continue;
    }
    return n + Math.clz32(b) - 24;
  }
  return n;
}

/**
 * PrefixHasher hashes prefix ‖ suffix for one fixed prefix and many short
 * suffixes, as the proof of work does (token + ":" then a counter): the
 * prefix's whole 64-byte blocks are compressed once.
 */
export class PrefixHasher {
  constructor(prefix) {
    this.mid = new Int32Array(IV);
    const full = prefix.length - (prefix.length % 64);
    for (let off = 0; off < full; off += 64) compress(this.mid, prefix, off);
    this.done = full;
    this.rest = prefix.slice(full);
    this.h = new Int32Array(8);
    this.buf = new Uint8Array(0);
  }

  /**
   * zeroBits returns the leading zero bits of SHA-256(prefix ‖ suffix[0:len]).
   * suffix is a Uint8Array; only its first len bytes are read.
   */
  zeroBits(suffix, len) {
    const n = this.rest.length + len;
    if (this.buf.length < n + 72) {
      this.buf = new Uint8Array(n + 72 + 64);
    }
    const buf = this.buf;
    buf.set(this.rest, 0);
    for (let i = 0; i < len; i++) buf[this.rest.length + i] = suffix[i];
    const h = this.h;
    h.set(this.mid);
    finish(h, buf, n, this.done + n);
    let z = 0;
    for (let i = 0; i < 8; i++) {
      if (h[i] === 0) {
        z += 32;
        continue;
      }
      return z + Math.clz32(h[i]);
    }
    return z;
  }
}
