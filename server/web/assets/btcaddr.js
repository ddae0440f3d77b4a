// Bitcoin address validation for the BTC faucet: bech32 and bech32m
// (BIP-173, BIP-350) and base58check, the types the server pays (P2WPKH,
// P2WSH, P2TR, P2PKH, P2SH), as server/chain/bitcoin reads them.
//
// A hint as the user types, not a verdict: the server checks every address
// again. An ES module for the page and for Node (hack/pagetest runs it on
// the BIP vectors and on addresses it encodes itself).

import { sha256 } from './sha256.js';
import { validateAddress as validateStacks } from './c32.js';

const BECH32_CHARSET = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';
const BECH32_INDEX = new Map([...BECH32_CHARSET].map((c, i) => [c, i]));
const BASE58_ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const BASE58_INDEX = new Map([...BASE58_ALPHABET].map((c, i) => [c, i]));

// The checksum constants of BIP-173 (bech32) and BIP-350 (bech32m).
const BECH32_CONST = 1;
const BECH32M_CONST = 0x2bc830a3;

// BIP-173's limit; base58 addresses are at most 35 characters.
const MAX_ADDRESS_CHARS = 90;

// Base58 version bytes: testnet, signet and regtest share theirs.
const VERSION_TEST_P2PKH = 111; // m… or n…
const VERSION_TEST_P2SH = 196; // 2…
const VERSION_MAIN_P2PKH = 0; // 1…
const VERSION_MAIN_P2SH = 5; // 3…

// Each network's bech32 prefix (the part before the last "1"). Regtest also
// takes testnet's: wallets show that form, and it pays the same script.
const HRP = { regtest: 'bcrt', signet: 'tb', testnet: 'tb' };
const ALSO_HRP = { regtest: 'tb' };
const MAINNET_HRP = 'bc';

/** knownNetwork is net when the page knows it, else null (any test network). */
function knownNetwork(net) {
  return Object.hasOwn(HRP, net) ? net : null;
}

/** btcPrefixes is how a network's addresses start, for the messages. */
export function btcPrefixes(net) {
  const n = knownNetwork(net);
  const bech = n ? [HRP[n], ALSO_HRP[n]].filter(Boolean).map((h) => `${h}1`).join(', ') : 'bcrt1 or tb1';
  return `${bech}, m, n or 2`;
}

/** btcNetworkName names the network in a sentence: "regtest", "test network". */
function networkName(net) {
  return knownNetwork(net) || 'test network';
}

export function btcMainnetMessage(net) {
  const name = networkName(net);
  return `This is a Bitcoin mainnet address; this faucet pays ${name} BTC, which has no value. ` +
    `Use a ${name} address (it starts with ${btcPrefixes(net)}).`;
}

function polymod(values) {
  const gen = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    for (let i = 0; i < 5; i++) {
      if ((top >>> i) & 1) chk ^= gen[i];
    }
  }
  return chk >>> 0;
}

function hrpExpand(hrp) {
  const out = [];
  for (const c of hrp) out.push(c.charCodeAt(0) >> 5);
  out.push(0);
  for (const c of hrp) out.push(c.charCodeAt(0) & 31);
  return out;
}

/** convertBits regroups from-bit values into to-bit values (BIP-173). */
function convertBits(data, from, to, pad) {
  let acc = 0;
  let bits = 0;
  const out = [];
  const max = (1 << to) - 1;
  for (const v of data) {
    acc = (acc << from) | v;
    bits += from;
    while (bits >= to) {
      bits -= to;
      out.push((acc >> bits) & max);
    }
    acc &= (1 << bits) - 1;
  }
  if (pad) {
    if (bits > 0) out.push((acc << (to - bits)) & max);
  } else if (bits >= from || ((acc << (to - bits)) & max) !== 0) {
    return null;
  }
  return out;
}

function fail(code, message, extra = {}) {
  return { ok: false, code, message, ...extra };
}

function describeChar(ch) {
  if (ch === ' ') return 'A space';
  if (ch === '\t') return 'A tab';
  if (/\s/.test(ch)) return 'A line break or other blank';
  return `“${ch}”`;
}

const UNSUPPORTED =
  'This address type is not paid by the faucet: use a P2WPKH, P2WSH or P2TR (bech32) or a P2PKH or P2SH (base58) address.';
const CHECKSUM =
  'The checksum does not match: typo? Check the address character by character, or copy it again.';

/** checkBech32 validates s: a known prefix hrp, then "1" at sep, then data. */
function checkBech32(s, hrp, sep, net) {
  if (s !== s.toLowerCase() && s !== s.toUpperCase()) {
    return fail('case', 'A bech32 address is all lower case or all upper case, not mixed.');
  }
  const lower = s.toLowerCase();
  const data = [];
  for (let i = sep + 1; i < lower.length; i++) {
    const v = BECH32_INDEX.get(lower[i]);
    if (v === undefined) {
      return fail('character',
        `${describeChar(s[i])} at position ${i + 1} cannot be part of this address: after “${hrp}1” a bech32 address ` +
        'uses digits except 1 and lower-case letters except b, i and o.', { position: i + 1 });
    }
    data.push(v);
  }
  if (data.length < 6 + 1) {
    return fail('length', 'This address is too short. Check that you copied all of it.');
  }
  const check = polymod([...hrpExpand(hrp), ...data]);
  const variant = check === BECH32_CONST ? 'bech32' : check === BECH32M_CONST ? 'bech32m' : null;
  if (variant === null) return fail('checksum', CHECKSUM);
  const version = data[0];
  const program = convertBits(data.slice(1, -6), 5, 8, false);
  if (version > 16 || program === null || program.length < 2 || program.length > 40 ||
      (version === 0 && program.length !== 20 && program.length !== 32)) {
    return fail('invalid', 'This is not a valid Bitcoin address. Check that you copied all of it.');
  }
  // BIP-350: version 0 keeps bech32's checksum, later versions use bech32m.
  if ((version === 0) !== (variant === 'bech32')) return fail('checksum', CHECKSUM);

  if (hrp === MAINNET_HRP) return fail('mainnet', btcMainnetMessage(net));
  const n = knownNetwork(net);
  if (n && hrp !== HRP[n] && hrp !== ALSO_HRP[n]) {
    const other = hrp === 'bcrt' ? 'regtest' : 'testnet or signet';
    return fail('network',
      `This is a ${other} address (${hrp}1…); this faucet pays ${n} BTC: use a ${n} address (it starts with ${btcPrefixes(n)}).`);
  }
  let type = null;
  if (version === 0) type = program.length === 20 ? 'p2wpkh' : 'p2wsh';
  else if (version === 1 && program.length === 32) type = 'p2tr';
  if (type === null) return fail('unsupported', UNSUPPORTED);
  return { ok: true, address: lower, type, version, program: Uint8Array.from(program) };
}

/** base58Decode decodes s (alphabet characters only) into bytes. */
function base58Decode(s) {
  const bytes = [];
  for (const c of s) {
    let carry = BASE58_INDEX.get(c);
    for (let j = 0; j < bytes.length; j++) {
      carry += bytes[j] * 58;
      bytes[j] = carry & 0xff;
      carry >>= 8;
    }
    while (carry > 0) {
      bytes.push(carry & 0xff);
      carry >>= 8;
    }
  }
  for (let i = 0; i < s.length && s[i] === '1'; i++) bytes.push(0);
  return Uint8Array.from(bytes.reverse());
}

function checkBase58(s, net) {
  const chars = [...s];
  for (let i = 0; i < chars.length; i++) {
    if (!BASE58_INDEX.has(chars[i])) {
      return fail('character',
        `${describeChar(chars[i])} at position ${i + 1} cannot be part of this address: ` +
        'a base58 address uses digits 1–9 and letters except 0, O, I and l.', { position: i + 1 });
    }
  }
  const raw = base58Decode(s);
  if (raw.length < 25) {
    return fail('length', 'This address is too short. Check that you copied all of it.');
  }
  if (raw.length > 25) {
    return fail('length', 'This address is too long. Check for extra characters.');
  }
  const want = sha256(sha256(raw.subarray(0, 21)));
  for (let i = 0; i < 4; i++) {
    if (raw[21 + i] !== want[i]) return fail('checksum', CHECKSUM);
  }
  const version = raw[0];
  const hash160 = Uint8Array.from(raw.subarray(1, 21));
  if (version === VERSION_TEST_P2PKH) return { ok: true, address: s, type: 'p2pkh', version, program: hash160 };
  if (version === VERSION_TEST_P2SH) return { ok: true, address: s, type: 'p2sh', version, program: hash160 };
  if (version === VERSION_MAIN_P2PKH || version === VERSION_MAIN_P2SH) return fail('mainnet', btcMainnetMessage(net));
  return fail('invalid', `This is not a Bitcoin address: a ${networkName(net)} address starts with ${btcPrefixes(net)}.`);
}

/**
 * validateBtcAddress checks what a user typed as a BTC recipient on net
 * ("regtest", "signet" or "testnet"; anything else accepts every test
 * network's addresses and leaves the rest to the server).
 *
 * It returns {ok: true, address, type, version, program} with the address
 * in canonical form (bech32 in lower case), or {ok: false, code, message}
 * where message is a sentence for the user and code one of: empty, stacks,
 * prefix, character, case, length, checksum, invalid, mainnet, network,
 * unsupported.
 */
export function validateBtcAddress(input, net) {
  const s = String(input ?? '').trim();
  const name = networkName(net);
  if (s === '') {
    return fail('empty', `Enter a Bitcoin ${name} address (it starts with ${btcPrefixes(net)}).`);
  }
  if (s.length > MAX_ADDRESS_CHARS) {
    return fail('length', `This is far too long for an address (${s.length} characters).`);
  }
  const sep = s.lastIndexOf('1');
  const hrp = sep > 0 ? s.slice(0, sep).toLowerCase() : '';
  if (hrp === MAINNET_HRP || hrp === 'tb' || hrp === 'bcrt') return checkBech32(s, hrp, sep, net);

  const stacks = validateStacks(s);
  if (stacks.ok || stacks.code === 'mainnet' || stacks.code === 'checksum') {
    return fail('stacks', `This is a Stacks address; for BTC enter a Bitcoin ${name} address (it starts with ${btcPrefixes(net)}).`);
  }
  if (/^(bcrt|tb|bc)1/i.test(s)) {
    // A bech32 prefix, but the "1" found last is not its separator: a
    // character after it is wrong.
    const first = s.indexOf('1');
    return checkBech32(s, s.slice(0, first).toLowerCase(), first, net);
  }
  if (!/^[123mn]/.test(s)) {
    return fail('prefix', `A Bitcoin ${name} address starts with ${btcPrefixes(net)}.`);
  }
  return checkBase58(s, net);
}
