// Node tests of the page's pure modules: the address validator against
// c32check on random vectors, SHA-256 against node:crypto, the proof-of-work
// solver and the text formatting.

import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';

import { c32address, c32addressDecode } from 'c32check';

import { c32Address, C32_ALPHABET, MAINNET_MESSAGE, validateAddress } from '../../server/web/assets/c32.js';
import { explorerURL, formatAmount, formatSTX, formatWait, formatWindow, limitSentence } from '../../server/web/assets/format.js';
import { solve } from '../../server/web/assets/pow-worker.js';
import { hex, leadingZeroBits, PrefixHasher, sha256, utf8 } from '../../server/web/assets/sha256.js';

const TESTNET = 'ST3M7N9Q9HDRM7RVP1Q26P0EE69358PZZAZD7KMXQ';
const MAINNET = 'SP3FBR2AGK5H9QBDH3EEN6DF8EK8JY7RX8QJ5SVTE';

/** A seeded PRNG (mulberry32), so a failing vector can be reproduced. */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** randomTestnetAddress is a fresh ST… address from 20 random bytes (c32check). */
export function randomTestnetAddress() {
  return c32address(26, randomBytes(20).toString('hex'));
}

/**
 * reference classifies input the way the server does, from c32check:
 * "testnet" (valid ST/SN principal), "mainnet" (valid SP/SM), or "invalid".
 */
function reference(input) {
  const s = input.trim();
  const dot = s.indexOf('.');
  const addr = dot < 0 ? s : s.slice(0, dot);
  const name = dot < 0 ? null : s.slice(dot + 1);
  let version;
  let hash;
  try {
    [version, hash] = c32addressDecode(addr);
  } catch {
    return { kind: 'invalid' };
  }
  if (hash.length !== 40) return { kind: 'invalid' };
  if (name !== null && !/^[a-zA-Z][a-zA-Z0-9_-]{0,39}$/.test(name)) return { kind: 'invalid' };
  if (version === 26 || version === 21) return { kind: 'testnet', version, hash };
  if (version === 22 || version === 20) return { kind: 'mainnet', version, hash };
  return { kind: 'invalid' };
}

function compare(input) {
  const want = reference(input);
  const got = validateAddress(input);
  const where = `input ${JSON.stringify(input)}: page says ${JSON.stringify(got.ok ? 'ok' : got.code)}, c32check says ${want.kind}`;
  if (want.kind === 'testnet') {
    assert.equal(got.ok, true, where);
    assert.equal(got.version, want.version, where);
    assert.equal(hex(got.hash160), want.hash, where);
    // The page sends the canonical form, which must read back the same.
    assert.deepEqual(reference(got.address), want, where);
  } else {
    assert.equal(got.ok, false, where);
    assert.ok(typeof got.message === 'string' && got.message.length > 10, where);
    if (want.kind === 'mainnet') assert.equal(got.code, 'mainnet', where);
  }
  return want.kind;
}

// Characters a corruption draws from: the alphabet, lower case, the letters
// c32 reads as digits, U, and a few that never belong.
const NOISE = C32_ALPHABET + C32_ALPHABET.toLowerCase() + 'OILoilUu!-_ .:é';

function corrupt(addr, rand) {
  const pick = (s) => s[Math.floor(rand() * s.length)];
  const pos = 1 + Math.floor(rand() * (addr.length - 1));
  switch (Math.floor(rand() * 5)) {
    case 0: { // substitute one character
      let c = pick(NOISE);
      while (c === addr[pos]) c = pick(NOISE);
      return addr.slice(0, pos) + c + addr.slice(pos + 1);
    }
    case 1: // delete one
      return addr.slice(0, pos) + addr.slice(pos + 1);
    case 2: // insert one
      return addr.slice(0, pos) + pick(C32_ALPHABET) + addr.slice(pos);
    case 3: { // swap two neighbours
      const p = Math.min(pos, addr.length - 2);
      return addr.slice(0, p) + addr[p + 1] + addr[p] + addr.slice(p + 2);
    }
    default: // change the version character
      return addr[0] + pick(C32_ALPHABET) + addr.slice(2);
  }
}

export function registerValidatorTests() {
  describe('address validator', () => {
    test('the brief\'s vectors', () => {
      assert.equal(validateAddress(TESTNET).ok, true);
      assert.equal(validateAddress(`  ${TESTNET}\n`).address, TESTNET, 'whitespace is trimmed');
      const typo = validateAddress(TESTNET.slice(0, -1) + 'R');
      assert.equal(typo.code, 'checksum');
      assert.match(typo.message, /typo\?/);
      const main = validateAddress(MAINNET);
      assert.equal(main.code, 'mainnet');
      assert.equal(main.message, MAINNET_MESSAGE);
      assert.equal(MAINNET_MESSAGE,
        'This is a mainnet address; this faucet sends testnet STX. Use your testnet address (it starts with ST).');
      const contract = validateAddress(`${TESTNET}.some-contract`);
      assert.equal(contract.ok, true);
      assert.equal(contract.contractName, 'some-contract');
    });

    test('specific messages', () => {
      const cases = [
        ['', 'empty', /starts with ST/],
        ['XT3M7N9Q9HDRM7RVP1Q26P0EE69358PZZAZD7KMXQ', 'prefix', /starts with S/],
        ['ST3M7N9Q9HDRM7RVP1Q26P0EE69358PZZAZD7KMXU', 'character', /“U” at position 41/],
        ['ST3M7N9Q9H DRM7RVP1Q26P0EE69358PZZAZD7KMXQ', 'character', /A space at position 11/],
        ['ST3M7N9Q9HDRM7RVP1Q26P0EE69358PZZ', 'length', /too short/],
        [TESTNET + 'Q', 'length', /too long/],
        ['SA3M7N9Q9HDRM7RVP1Q26P0EE69358PZZAZD7KMXQ', 'version', /starts with ST/],
        ['SM3FBR2AGK5H9QBDH3EEN6DF8EK8JY7RX8QJ5SVTE', 'mainnet', /mainnet/],
        [`${TESTNET}.`, 'contract_name', /missing/],
        [`${TESTNET}.9lives`, 'contract_name', /start with a letter/],
        [`${TESTNET}.a.b`, 'contract_name', /“\.” is not allowed/],
        [`${TESTNET}.${'a'.repeat(41)}`, 'contract_name', /too long/],
      ];
      for (const [input, code, msg] of cases) {
        const v = validateAddress(input);
        assert.equal(v.ok, false, input);
        assert.equal(v.code, code, `${input}: ${v.message}`);
        assert.match(v.message, msg, input);
      }
      // The server and c32check read lower case, O and I/L after the leading S.
      const lower = validateAddress('S' + TESTNET.slice(1).toLowerCase());
      assert.equal(lower.ok, true);
      assert.equal(lower.address, TESTNET);
      assert.equal(validateAddress(`${TESTNET}.${'a'.repeat(40)}`).ok, true);
    });

    test('random vectors agree with c32check (versions 22/26/20/21, corruptions)', () => {
      const seed = Number(process.env.PAGETEST_SEED || Date.now() % 1e9);
      const rand = rng(seed);
      const versions = [22, 26, 20, 21];
      const counts = { testnet: 0, mainnet: 0, invalid: 0 };
      let total = 0;
      for (let i = 0; i < 400; i++) {
        const hash = Buffer.alloc(20);
        for (let j = 0; j < 20; j++) hash[j] = Math.floor(rand() * 256);
        // Some hashes start with zero bytes: c32 writes each as a leading '0'.
        for (let j = 0; j < (i % 10 === 0 ? 1 + (i % 3) : 0); j++) hash[j] = 0;
        const version = versions[i % 4];
        const theirs = c32address(version, hash.toString('hex'));
        assert.equal(c32Address(version, hash), theirs, `seed ${seed}: encoding of version ${version} ${hash.toString('hex')}`);
        const inputs = [theirs, corrupt(theirs, rand), corrupt(theirs, rand), corrupt(corrupt(theirs, rand), rand)];
        if (i % 8 === 0) inputs.push(`${theirs}.c${i}-x_y`, `${theirs}.${i}bad`);
        for (const input of inputs) {
          try {
            counts[compare(input)]++;
          } catch (err) {
            err.message = `seed ${seed} (rerun with PAGETEST_SEED=${seed}): ${err.message}`;
            throw err;
          }
          total++;
        }
      }
      assert.ok(total >= 500, `only ${total} vectors`);
      assert.ok(counts.testnet >= 150 && counts.mainnet >= 150 && counts.invalid >= 500, JSON.stringify(counts));
      console.log(`# validator: ${total} vectors agree with c32check (seed ${seed}): ${JSON.stringify(counts)}`);
    });

    test('every version 0..31 encodes like c32check', () => {
      for (let v = 0; v < 32; v++) {
        const h = randomBytes(20);
        assert.equal(c32Address(v, h), c32address(v, h.toString('hex')));
      }
    });
  });

  describe('sha256', () => {
    test('matches node:crypto on 0..300-byte inputs', () => {
      for (let n = 0; n <= 300; n++) {
        const data = randomBytes(n);
        assert.equal(hex(sha256(new Uint8Array(data))), createHash('sha256').update(data).digest('hex'), `length ${n}`);
      }
      assert.equal(hex(sha256(utf8('abc'))), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    });

    test('PrefixHasher equals hashing prefix ‖ suffix', () => {
      for (const plen of [0, 1, 55, 56, 63, 64, 65, 100, 127, 128, 200]) {
        const prefix = new Uint8Array(randomBytes(plen));
        const h = new PrefixHasher(prefix);
        for (const slen of [0, 1, 7, 8, 9, 20]) {
          const suffix = new Uint8Array(randomBytes(slen));
          const whole = new Uint8Array(plen + slen);
          whole.set(prefix);
          whole.set(suffix, plen);
          assert.equal(h.zeroBits(suffix, slen), leadingZeroBits(sha256(whole)), `prefix ${plen}, suffix ${slen}`);
        }
      }
    });
  });

  describe('proof of work', () => {
    test('solve finds the first counter with enough zero bits', () => {
      const token = 'AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywtLi8wMTIzNA.c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmU';
      for (const d of [0, 1, 8, 12]) {
        const { solution } = solve(token, d);
        const zero = (s) => leadingZeroBits(createHash('sha256').update(`${token}:${s}`).digest());
        assert.ok(zero(solution) >= d, `difficulty ${d}: ${solution}`);
        for (let i = 0; i < Number(solution); i++) assert.ok(zero(String(i)) < d, `difficulty ${d}: ${i} already solves it`);
      }
    });

    test('speed at difficulty 18 (informational)', () => {
      const start = performance.now();
      let tried = 0;
      solve('speed-test-token', 40, { count: 200_000, onBatch: (n) => { tried = n; return true; } });
      const rate = tried / ((performance.now() - start) / 1000);
      console.log(`# pow: ${Math.round(rate / 1000)}k hashes/s in Node; difficulty 18 needs ~${(2 ** 18 / rate).toFixed(2)} s on average`);
    });
  });

  describe('formatting', () => {
    test('amounts, windows, waits, limits, explorer links', () => {
      assert.equal(formatSTX('500000000'), '500 STX');
      assert.equal(formatSTX('90000000000000'), '90,000,000 STX');
      assert.equal(formatSTX('1500001'), '1.500001 STX');
      assert.equal(formatSTX(null), null);
      assert.equal(formatSTX('-1'), null);
      // Other assets by their decimals: sBTC in satoshis (8).
      assert.equal(formatAmount('100000', 8, 'sBTC'), '0.001 sBTC');
      assert.equal(formatAmount('100000000001', 8, 'sBTC'), '1,000.00000001 sBTC');
      assert.equal(formatAmount('0', 8, 'sBTC'), '0 sBTC');
      assert.equal(formatAmount(12, 0, 'T'), '12 T');
      assert.equal(formatAmount('1', 8.5, 'sBTC'), null);
      assert.equal(formatAmount('1', -1, 'sBTC'), null);
      assert.equal(formatAmount('1e5', 8, 'sBTC'), null);
      assert.equal(formatWindow(300), '5 minutes');
      assert.equal(formatWindow(3600), 'hour');
      assert.equal(formatWindow(172800), '2 days');
      assert.equal(formatWait(252), '4 min 12 s');
      assert.equal(formatWait(3599.2), '1 h');
      assert.equal(formatWait(9), '9 s');
      assert.equal(limitSentence({ requests: 5, window_seconds: 300 }, ['drip', 'drips', 'address']),
        '5 drips per address every 5 minutes');
      assert.equal(limitSentence({ requests: 1, window_seconds: 172800 }, ['stacking drip', 'stacking drips', 'address']),
        '1 stacking drip per address every 2 days');
      assert.equal(limitSentence(null, ['a', 'b', 'c']), null);
      const tx = '0x' + 'ab'.repeat(32);
      assert.equal(explorerURL('https://explorer.hiro.so/txid/{txid}?chain=testnet', tx),
        `https://explorer.hiro.so/txid/${tx}?chain=testnet`);
      assert.equal(explorerURL('javascript:alert(1)//{txid}', tx), null);
      assert.equal(explorerURL(null, tx), null);
      assert.equal(explorerURL('https://example.org/no-placeholder', tx), null);
    });
  });
}
