// Node tests of the page's pure modules: the address validator against
// c32check on random vectors, the Bitcoin address validator on the BIP and
// Bitcoin Core vectors and on addresses encoded here, SHA-256 against
// node:crypto, the proof-of-work solver and the text formatting.

import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';

import { c32address, c32addressDecode } from 'c32check';

import { btcMainnetMessage, validateBtcAddress } from '../../server/web/assets/btcaddr.js';
import { c32Address, C32_ALPHABET, MAINNET_MESSAGE, validateAddress } from '../../server/web/assets/c32.js';
import {
  bitcoinExplorerURL, budgetPeriod, explorerURL, formatAbout, formatAmount, formatAssetAmount, formatLeft, formatSTX, formatTimes, formatWait,
  formatWindow, joinNames, limitSentence,
} from '../../server/web/assets/format.js';
import { authorization, CODE_MAX_CHARS, CODE_TEXTS, codeRefusal, readCode } from '../../server/web/assets/eventcode.js';
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

// ------------------------------------------------------ Bitcoin addresses
//
// The test's own encoders, written apart from the page's decoder
// (btcaddr.js): bech32/bech32m after BIP-173 and BIP-350, base58check with
// node:crypto and BigInt. The browser test pays a fresh regtest address
// made here, so the server checks these encoders too.

const BECH32_CHARS = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';
const BASE58_CHARS = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

function bech32Checksum(hrp, data, m) {
  const values = [...[...hrp].map((c) => c.charCodeAt(0) >> 5), 0, ...[...hrp].map((c) => c.charCodeAt(0) & 31), ...data, 0, 0, 0, 0, 0, 0];
  let chk = 1;
  for (const v of values) {
    const b = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3].forEach((g, i) => {
      if ((b >>> i) & 1) chk ^= g;
    });
  }
  chk = (chk ^ (m ? 0x2bc830a3 : 1)) >>> 0;
  return [0, 1, 2, 3, 4, 5].map((i) => (chk >>> (5 * (5 - i))) & 31);
}

/**
 * segwitAddress encodes a witness program under hrp: bech32 for version 0,
 * bech32m after (BIP-350), or the other one when wrongVariant is set.
 */
export function segwitAddress(hrp, version, program, wrongVariant = false) {
  const five = [];
  let acc = 0;
  let bits = 0;
  for (const byte of program) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      five.push((acc >>> bits) & 31);
    }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) five.push((acc << (5 - bits)) & 31);
  const data = [version, ...five];
  const m = (version !== 0) !== wrongVariant;
  return `${hrp}1${[...data, ...bech32Checksum(hrp, data, m)].map((v) => BECH32_CHARS[v]).join('')}`;
}

/** base58check encodes version ‖ payload with its double-SHA-256 checksum. */
export function base58check(version, payload) {
  const body = Buffer.concat([Buffer.from([version]), Buffer.from(payload)]);
  const sum = createHash('sha256').update(createHash('sha256').update(body).digest()).digest().subarray(0, 4);
  const all = Buffer.concat([body, sum]);
  let n = BigInt('0x' + all.toString('hex'));
  let out = '';
  while (n > 0n) {
    out = BASE58_CHARS[Number(n % 58n)] + out;
    n /= 58n;
  }
  for (const b of all) {
    if (b !== 0) break;
    out = '1' + out;
  }
  return out;
}

/** randomRegtestAddress is a fresh P2WPKH regtest address (bcrt1q…) of 20 random bytes. */
export function randomRegtestAddress() {
  return segwitAddress('bcrt', 0, randomBytes(20));
}

// Regtest, signet and testnet vectors of Bitcoin Core's key_io_valid.json
// and BIP-173/BIP-350, with their output scripts (as server/chain/bitcoin's
// tests have them).
const BTC_VALID = [
  ['regtest', 'bcrt1qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu9', '00146f58bac9506f9bfb821d62e69330410bb56f0085'],
  ['regtest', 'bcrt1qan8gntac7z7me2ejt4hpru42ad2f759fmy0m3ejvs98656znv7eqga4uhv', '0020ecce89afb8f0bdbcab325d6e11f2aaeb549f50a9d91fb8e64c814faa685367b2'],
  ['regtest', 'bcrt1pfwxjqvtt4tcxrtdluukfmy2dv7xd2qzdfy6kajv5nwn4yam3wxkq3553uh', '51204b8d20316baaf061adbfe72c9d914d678cd5004d49356ec9949ba752777171ac'],
  ['regtest', 'bcrt1q65nhlm4hf2ptg3t264al57p7wjxj2c3s6kyt83', '0014d5277feeb74a82b4456ad57bfa783e748d256230'],
  ['regtest', 'n4fajahJrAuKbN7uNsKjLjQkz9Qn5ewJXQ', '76a914fdeca3b08e38af53d7c4c60e3ad208ce5066441088ac'],
  ['regtest', '2MxFajLApXpYk4VodBSZSt7rw8y4ryABkfA', 'a91436e9f191e0b75036a77f65e2eaa4752443233fbe87'],
  ['regtest', 'mfhE6jAUwjUDNZhaX1PAsDTKfneQF2Nshc', '76a91401f15a4cc063dae4f4d56b89bfbc8bcc9ae5387c88ac'],
  ['signet', 'tb1q3vya2h5435jkugq2few7dmktlrwq4ejmfaw7kr', '00148b09d55e958d256e200a4e5de6eecbf8dc0ae65b'],
  ['signet', 'tb1qxkhrl2s6ttrclckldruea0e8anhrehffl8xv7t0pdyrzm08v2hyqy408nf', '002035ae3faa1a5ac78fe2df68f99ebf27ecee3cdd29f9cccf2de169062dbcec55c8'],
  ['signet', 'tb1pae5um27ahn8n73pgexe3kcwlp8dhswpn684h2k2w6t9a7w3eq65qephd5y', '5120ee69cdabddbccf3f4428c9b31b61df09db783833d1eb75594ed2cbdf3a3906a8'],
  ['signet', 'mww4LvqtTMKvmeQvizPz2EQv26xTneWrbg', '76a914b4110ba93ac54afc14da3bdd19614774a2d55d2988ac'],
  ['signet', '2N1r7aC69VHeE7yQJPDLi9T1PYq4wnwvjuT', 'a9145e5a35ab44b3efaea5129ba22b88ba3e2976614587'],
  ['testnet', 'tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7', '00201863143c14c5166804bd19203356da136c985678cd4d27a1b8c6329604903262'],
  ['testnet', 'tb1qqqqqp399et2xygdj5xreqhjjvcmzhxw4aywxecjdzew6hylgvsesrxh6hy', '0020000000c4a5cad46221b2a187905e5266362b99d5e91c6ce24d165dab93e86433'],
  ['testnet', 'tb1pqqqqp399et2xygdj5xreqhjjvcmzhxw4aywxecjdzew6hylgvsesf3hn0c', '5120000000c4a5cad46221b2a187905e5266362b99d5e91c6ce24d165dab93e86433'],
  ['testnet', 'tb1qcrh3yqn4nlleplcez2yndq2ry8h9ncg3qh7n54', '0014c0ef1202759fff90ff19128936814321ee59e111'],
  ['testnet', 'mzK2FFDEhxqHcmrJw1ysqFkVyhUULo45hZ', '76a914ce28b26c57472737f5c3561a1761185bd8589a4388ac'],
  ['testnet', '2NC2hEhe28ULKAJkW5MjZ3jtTMJdvXmByvK', 'a914ce0bba75891ff9ec60148d4bd4a09ee2dc5c933187'],
];

/** scriptOf is the output script a page verdict stands for, as hex. */
function scriptOf(v) {
  const p = Buffer.from(v.program).toString('hex');
  switch (v.type) {
    case 'p2wpkh': return `0014${p}`;
    case 'p2wsh': return `0020${p}`;
    case 'p2tr': return `5120${p}`;
    case 'p2pkh': return `76a914${p}88ac`;
    case 'p2sh': return `a914${p}87`;
    default: return `unknown type ${v.type}`;
  }
}

const BTC_MAINNET = [
  'BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4', // BIP-173 P2WPKH
  'bc1qyucykdlhp62tezs0hagqury402qwhk589q80tqs5myh3rxq34nwqhkdhv7', // key_io P2WSH
  'bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0', // BIP-350 P2TR
  '1FsSia9rv4NeEwvJ2GvXrX7LyxYspbN2mo', // key_io P2PKH
  '36j4NfKv6Akva9amjWrLG6MuSQym1GuEmm', // key_io P2SH
];

// [input, network, the page's code]: BIP-173/BIP-350's invalid addresses
// and others the server refuses.
const BTC_INVALID = [
  ['tc1qw508d6qejxtdg4y5r3zarvary0c5xw7kg3g4ty', 'testnet', 'prefix'],
  ['bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5', 'testnet', 'checksum'],
  ['BC13W508D6QEJXTDG4Y5R3ZARVARY0C5XW7KN40WF2', 'testnet', 'invalid'], // witness version 17
  ['bc1rw5uspcuh', 'testnet', 'invalid'], // program length
  ['bc10w508d6qejxtdg4y5r3zarvary0c5xw7kw508d6qejxtdg4y5r3zarvary0c5xw7kw5rljs90', 'testnet', 'invalid'],
  ['BC1QR508D6QEJXTDG4Y5R3ZARVARYV98GJ9P', 'testnet', 'invalid'], // v0 program of 16 bytes
  ['tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sL5k7', 'testnet', 'case'],
  ['bc1zw508d6qejxtdg4y5r3zarvaryvqyzf3du', 'testnet', 'invalid'], // padding over 4 bits
  ['tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3pjxtptv', 'testnet', 'invalid'], // non-zero padding
  ['bc1gmk9yu', 'testnet', 'length'], // empty data
  ['tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k8', 'testnet', 'checksum'],
  ['bcrt1qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu8', 'regtest', 'checksum'],
  ['tc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vq5zuyut', 'testnet', 'prefix'],
  ['bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqh2y7hd', 'testnet', 'checksum'], // bech32 for v1
  ['tb1z0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqglt7rf', 'testnet', 'checksum'],
  ['BC1S0XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQ54WELL', 'testnet', 'checksum'],
  ['bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kemeawh', 'testnet', 'checksum'], // bech32m for v0
  ['tb1q0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vq24jc47', 'testnet', 'checksum'],
  ['bc1p38j9r5y49hruaue7wxjce0updqjuyyx0kh56v8s25huc6995vvpql3jow4', 'testnet', 'character'],
  ['BC130XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQ7ZWS8R', 'testnet', 'invalid'], // witness version 17
  ['bc1pw5dgrnzv', 'testnet', 'invalid'], // 1-byte program
  ['bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7v8n0nx0muaewav253zgeav', 'testnet', 'invalid'],
  ['tb1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vq47Zagq', 'testnet', 'case'],
  ['bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7v07qwwzcrf', 'testnet', 'invalid'], // padding over 4 bits
  ['tb1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vpggkg4j', 'testnet', 'invalid'], // non-zero padding
  // Valid, but not a type the faucet pays: witness v2+ and pay-to-anchor.
  ['tb1rgv5m6uvdk3kc7qsuz0c79v88ycr5w4wa', 'testnet', 'unsupported'],
  ['tb1r3ss76jtsuxe8c8c8lxsehnpak55ylrgr345pww076l536ahjr6jsydamx3', 'signet', 'unsupported'],
  ['bcrt1sx6p8njlx7h9mc2agz4yg82dzne23050ncq72cneeecez2pst8mahn8xecsf8g6hzx94420', 'regtest', 'unsupported'],
  [segwitAddress('bcrt', 1, [0x4e, 0x73]), 'regtest', 'unsupported'],
  // Each variant under the other's version.
  [segwitAddress('tb', 1, new Uint8Array(32), true), 'testnet', 'checksum'],
  [segwitAddress('bcrt', 0, new Uint8Array(20), true), 'regtest', 'checksum'],
  // Base58.
  ['n4fajahJrAuKbN7uNsKjLjQkz9Qn5ewJXR', 'regtest', 'checksum'],
  ['2MxFajLApXpYk4VodBSZSt7rw8y4ryABkfB', 'regtest', 'checksum'],
  ['cRez45VGSp5EXNqm89K3NJJPSKKapJg5Kbw3atxr2337x2gtgYed', 'regtest', 'prefix'], // a WIF key
  [base58check(0xef, randomBytes(20)), 'regtest', ['prefix', 'invalid']], // 0xef, a WIF version: 2… or c…
  ['0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798', 'regtest', 'prefix'], // a public key
  ['not-an-address', 'regtest', 'character'], // starts like n…
  ['0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', 'regtest', 'prefix'],
  ['', 'regtest', 'empty'],
  ['   ', 'regtest', 'empty'],
  ['q'.repeat(91), 'regtest', 'length'],
  ['bcrt1', 'regtest', 'length'],
  ['bcrt1 qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu9', 'regtest', 'character'],
  ['mfhE6jAUwjUDNZhaX1PAsDTKfneQF2Nsh', 'regtest', 'checksum'], // one character short
  ['mfhE6jAUwjUDNZhaX1PAsDTKfneQF2NshcQ', 'regtest', 'length'],
  ['mfhE6jAUwjUDNZha01PAsDTKfneQF2Nshc', 'regtest', 'character'],
  [TESTNET, 'regtest', 'stacks'],
  [MAINNET, 'regtest', 'stacks'],
];

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

  describe('Bitcoin address validator', () => {
    test('Bitcoin Core\'s and the BIPs\' valid vectors, on each network', () => {
      for (const [net, addr, script] of BTC_VALID) {
        const v = validateBtcAddress(addr, net);
        assert.equal(v.ok, true, `${addr} on ${net}: ${v.message}`);
        assert.equal(scriptOf(v), script, addr);
        assert.equal(v.address, addr);
        assert.equal(validateBtcAddress(` ${addr}\n`, net).address, addr, 'whitespace is trimmed');
        const base58 = !/^(tb|bcrt)1/.test(addr);
        if (!base58) {
          const up = validateBtcAddress(addr.toUpperCase(), net);
          assert.equal(up.ok && up.address, addr, 'upper-case bech32 is valid, sent in lower case');
        }
        for (const other of ['regtest', 'signet', 'testnet']) {
          // Regtest takes the tb1… form wallets show; signet and testnet
          // refuse bcrt1….
          const accepted = addr.startsWith('tb1') || other === 'regtest';
          const w = validateBtcAddress(addr, other);
          if (base58 || accepted) {
            assert.equal(w.ok, true, `${addr} on ${other}: ${w.message}`);
            assert.equal(scriptOf(w), script, `${addr} on ${other}`);
          } else assert.equal(w.code, 'network', `${addr} on ${other}: ${JSON.stringify(w)}`);
        }
      }
      const w = validateBtcAddress('bcrt1qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu9', 'signet');
      assert.match(w.message, /regtest address.*signet BTC.*tb1, m, n or 2/);
    });

    test('mainnet addresses get the sentence that this faucet pays test BTC', () => {
      for (const net of ['regtest', 'signet', 'testnet']) {
        for (const addr of BTC_MAINNET) {
          const v = validateBtcAddress(addr, net);
          assert.equal(v.code, 'mainnet', `${addr} on ${net}: ${JSON.stringify(v)}`);
          assert.equal(v.message, btcMainnetMessage(net));
        }
      }
      assert.equal(btcMainnetMessage('regtest'),
        'This is a Bitcoin mainnet address; this faucet pays regtest BTC, which has no value. Use a regtest address (it starts with bcrt1, tb1, m, n or 2).');
      assert.match(btcMainnetMessage('signet'), /pays signet BTC.*starts with tb1, m, n or 2/);
    });

    test('invalid vectors: refused with the right kind of message', () => {
      for (const [input, net, code] of BTC_INVALID) {
        const v = validateBtcAddress(input, net);
        assert.equal(v.ok, false, `${JSON.stringify(input)} on ${net} was accepted`);
        assert.ok([code].flat().includes(v.code), `${JSON.stringify(input)} on ${net}: ${v.code}, want ${code}: ${v.message}`);
        assert.ok(typeof v.message === 'string' && v.message.length > 20, input);
      }
      assert.match(validateBtcAddress('', 'regtest').message, /^Enter a Bitcoin regtest address \(it starts with bcrt1, tb1, m, n or 2\)\.$/);
      assert.match(validateBtcAddress('bcrt1 q', 'regtest').message, /A space at position 6/);
      assert.match(validateBtcAddress(TESTNET, 'regtest').message, /Stacks address/);
      // A network the page does not know takes every test network's addresses.
      assert.equal(validateBtcAddress('tb1qcrh3yqn4nlleplcez2yndq2ry8h9ncg3qh7n54', undefined).ok, true);
      assert.equal(validateBtcAddress('bcrt1q65nhlm4hf2ptg3t264al57p7wjxj2c3s6kyt83', 'testnet4').ok, true);
    });

    test('random addresses encoded here: accepted with their program; one changed character: refused', () => {
      const seed = Number(process.env.PAGETEST_SEED || Date.now() % 1e9);
      const rand = rng(seed);
      const bytes = (n) => Uint8Array.from({ length: n }, () => Math.floor(rand() * 256));
      const kinds = [
        ['p2wpkh', (hrp, p) => segwitAddress(hrp, 0, p), 20],
        ['p2wsh', (hrp, p) => segwitAddress(hrp, 0, p), 32],
        ['p2tr', (hrp, p) => segwitAddress(hrp, 1, p), 32],
        ['p2pkh', (_, p) => base58check(111, p), 20],
        ['p2sh', (_, p) => base58check(196, p), 20],
      ];
      let total = 0;
      for (let i = 0; i < 300; i++) {
        const net = ['regtest', 'signet', 'testnet'][i % 3];
        const [type, encode, n] = kinds[i % kinds.length];
        const program = bytes(n);
        if (i % 7 === 0) program.fill(0, 0, 1 + (i % 3)); // leading zero bytes: base58 writes each as '1'
        const addr = encode(net === 'regtest' ? 'bcrt' : 'tb', program);
        const where = `seed ${seed} (rerun with PAGETEST_SEED=${seed}): ${addr} on ${net}`;
        const v = validateBtcAddress(addr, net);
        assert.equal(v.ok, true, `${where}: ${v.message}`);
        assert.deepEqual([v.type, Buffer.from(v.program).toString('hex')], [type, Buffer.from(program).toString('hex')], where);
        const alphabet = type.startsWith('p2w') || type === 'p2tr' ? BECH32_CHARS : BASE58_CHARS;
        for (let k = 0; k < 3; k++) {
          const pos = Math.floor(rand() * addr.length);
          let c = alphabet[Math.floor(rand() * alphabet.length)];
          while (c === addr[pos]) c = alphabet[Math.floor(rand() * alphabet.length)];
          const bad = addr.slice(0, pos) + c + addr.slice(pos + 1);
          assert.equal(validateBtcAddress(bad, net).ok, false, `${where}: ${bad} was accepted`);
          total++;
        }
        total++;
      }
      console.log(`# btc validator: ${total} vectors (seed ${seed})`);
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
      // BTC in satoshis (8), its links by network, and the heading's list.
      assert.equal(formatAmount('10000', 8, 'BTC'), '0.0001 BTC');
      assert.equal(formatAmount('50000000', 8, 'BTC'), '0.5 BTC');
      const btcTx = 'ab'.repeat(32);
      assert.equal(bitcoinExplorerURL('signet', btcTx), `https://mempool.space/signet/tx/${btcTx}`);
      assert.equal(bitcoinExplorerURL('testnet', btcTx), `https://mempool.space/testnet/tx/${btcTx}`);
      assert.equal(bitcoinExplorerURL('regtest', btcTx), null);
      assert.equal(bitcoinExplorerURL('signet', `0x${btcTx}`), null);
      assert.equal(joinNames(['STX']), 'STX');
      assert.equal(joinNames(['STX', 'sBTC']), 'STX or sBTC');
      assert.equal(joinNames(['STX', 'sBTC', 'BTC']), 'STX, sBTC or BTC');
      assert.equal(joinNames(['STX', 'sBTC', 'tUSD', 'BTC']), 'STX, sBTC, tUSD or BTC');
      assert.equal(joinNames(['sBTC', 'tUSD'], 'and'), 'sBTC and tUSD');
      // Any token by its own decimals; base units while they are unknown (null).
      assert.equal(formatAssetAmount('10000000', 6, 'tUSD'), '10 tUSD');
      assert.equal(formatAssetAmount(10000000, 6, 'tUSD'), '10 tUSD');
      assert.equal(formatAssetAmount('100000', null, 'sBTC'), '100,000 base units of sBTC');
      assert.equal(formatAssetAmount(1, null, 'T'), '1 base unit of T');
      assert.equal(formatAssetAmount('0', undefined, 'T'), '0 base units of T');
      assert.equal(formatAssetAmount('1.5', null, 'T'), null);
      assert.equal(formatAssetAmount('1', 2.5, 'T'), null);
      // Budgets: what is left of the total, the window in words, the runway, a tier's factor.
      assert.equal(formatLeft(999500000000, 1000000000000, 6, 'STX'), '999,500 of 1,000,000 STX left');
      assert.equal(formatLeft('0', '1750000000', 6, 'STX'), '0 of 1,750 STX left');
      assert.equal(formatLeft(18990000, 20000000, 8, 'BTC'), '0.1899 of 0.2 BTC left');
      assert.equal(formatLeft('5', '100000', null, 'T'), '5 of 100,000 base units of T left');
      assert.equal(formatLeft('1', null, 6, 'STX'), null);
      assert.equal(budgetPeriod(86400), 'today');
      assert.equal(budgetPeriod(3600), 'this hour');
      assert.equal(budgetPeriod(21600), 'per 6 h');
      assert.equal(budgetPeriod(1800), 'per 30 min');
      assert.equal(budgetPeriod(0), null);
      assert.equal(budgetPeriod(3600.5), null);
      assert.equal(formatAbout(40 * 60), 'about 40 minutes');
      assert.equal(formatAbout(20), 'about 1 minute');
      assert.equal(formatAbout(5 * 3600), 'about 5 hours');
      assert.equal(formatAbout(3 * 86400), 'about 3 days');
      assert.equal(formatAbout(122 * 86400), 'about 4 months');
      assert.equal(formatAbout(10 * 365 * 86400), 'about 10 years');
      assert.equal(formatAbout(-1), null);
      assert.equal(formatTimes(200), '2×');
      assert.equal(formatTimes(150), '1.5×');
      assert.equal(formatTimes(0), null);
    });

    // Assets are data (/faucet/v1/info): the page names none of the
    // configured tokens, the devnet's included.
    test('the page\'s files name no token', async () => {
      const dir = new URL('../../server/web/', import.meta.url);
      const files = [...(await readdir(new URL('assets/', dir))).map((f) => `assets/${f}`), ...(await readdir(dir)).filter((f) => f.endsWith('.go'))];
      assert.ok(files.includes('assets/app.js') && files.includes('web.go'), JSON.stringify(files));
      for (const f of files) {
        const text = await readFile(new URL(f, dir), 'utf8');
        assert.doesNotMatch(text, /sbtc|tusd/i, `server/web/${f} names a token`);
      }
    });
  });

  describe('event code', () => {
    test('event codes: trimmed, refused when no header can carry them; which refusals are the code\'s', () => {
      assert.deepEqual(readCode(''), { code: '', error: null });
      assert.deepEqual(readCode(' \t\n'), { code: '', error: null });
      assert.deepEqual(readCode('  evt-0123456789abcdef\n'), { code: 'evt-0123456789abcdef', error: null });
      assert.deepEqual(readCode('a~!Z9._-+/='), { code: 'a~!Z9._-+/=', error: null });
      assert.deepEqual(readCode('x'.repeat(CODE_MAX_CHARS)), { code: 'x'.repeat(CODE_MAX_CHARS), error: null });
      for (const [bad, want] of [['evt 0123', /no spaces/], ['evt\t0123', /no spaces/], ['évènement', /plain punctuation/],
        ['code\u200b', /plain punctuation/], ['x'.repeat(CODE_MAX_CHARS + 1), /at most 1,024 characters/]]) {
        const r = readCode(bad);
        assert.equal(r.code, '', bad);
        assert.match(r.error, want, bad);
      }
      assert.deepEqual(authorization('evt-0123456789abcdef'), { Authorization: 'Bearer evt-0123456789abcdef' });
      assert.deepEqual(authorization(''), {}, 'no code, no header');
      assert.equal(codeRefusal(401, 'token_invalid', true), 'invalid');
      assert.equal(codeRefusal(200, 'token_invalid', true), 'invalid', 'eligibility says it with a 200');
      assert.equal(codeRefusal(429, 'token_lockout', true), 'lockout');
      assert.equal(codeRefusal(429, 'token_lockout', false), 'lockout', 'the lock-out holds back drips without a code too');
      assert.equal(codeRefusal(403, 'token_not_active', true), 'other');
      assert.equal(codeRefusal(401, 'token_not_active', true), 'other');
      assert.equal(codeRefusal(401, undefined, true), 'other', 'v3 has no reason');
      assert.equal(codeRefusal(401, 'token_invalid', false), null, 'without a code, a sign-in token\'s refusal');
      for (const [status, reason] of [[429, 'rate_limited'], [403, 'disabled'], [403, undefined], [401, 'sign_in_required'], [428, 'challenge_required']]) {
        assert.equal(codeRefusal(status, reason, true), null, `${status} ${reason}`);
      }
      for (const t of Object.values(CODE_TEXTS)) assert.doesNotMatch(JSON.stringify(t), /token|Bearer|API/, 'said in a person\'s words');
    });
  });
}
