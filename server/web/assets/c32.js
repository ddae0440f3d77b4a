// Stacks address validation: c32check encoding and checksum, as the faucet
// server (server/chain/stacks) and the c32check npm package read addresses.
//
// An ES module for the page and for Node (hack/pagetest compares it with
// c32check on random vectors).

import { sha256 } from './sha256.js';

export const C32_ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

export const VERSION_MAINNET_SINGLE = 22; // SP…
export const VERSION_MAINNET_MULTI = 20; // SM…
export const VERSION_TESTNET_SINGLE = 26; // ST…
export const VERSION_TESTNET_MULTI = 21; // SN…

// The server refuses longer input before decoding (server/chain/stacks maxC32Input).
const MAX_ADDRESS_CHARS = 256;
// Clarity's limit on new contract names, which the server enforces
// (stacks.ValidateContractName); a longer name would only fail there.
export const MAX_CONTRACT_NAME = 40;

export const MAINNET_MESSAGE =
  'This is a mainnet address; this faucet sends testnet STX. Use your testnet address (it starts with ST).';

const INDEX = new Map([...C32_ALPHABET].map((c, i) => [c, i]));

/**
 * c32Encode encodes bytes as c32: the big-endian value in base 32 without
 * leading zero digits, after one '0' per leading zero byte.
 */
export function c32Encode(bytes) {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  const out = [];
  let acc = 0;
  let bits = 0;
  for (let i = bytes.length - 1; i >= zeros; i--) {
    acc |= bytes[i] << bits;
    bits += 8;
    while (bits >= 5) {
      out.push(C32_ALPHABET[acc & 31]);
      acc >>>= 5;
      bits -= 5;
    }
  }
  if (bits > 0) out.push(C32_ALPHABET[acc & 31]);
  while (out.length > 0 && out[out.length - 1] === '0') out.pop();
  for (let i = 0; i < zeros; i++) out.push('0');
  return out.reverse().join('');
}

/** c32Decode reverses c32Encode; s holds alphabet characters only. */
export function c32Decode(s) {
  let zeros = 0;
  while (zeros < s.length && s[zeros] === '0') zeros++;
  const out = [];
  let acc = 0;
  let bits = 0;
  for (let i = s.length - 1; i >= zeros; i--) {
    acc |= INDEX.get(s[i]) << bits;
    bits += 5;
    if (bits >= 8) {
      out.push(acc & 0xff);
      acc >>>= 8;
      bits -= 8;
    }
  }
  if (bits > 0 && acc !== 0) out.push(acc & 0xff);
  while (out.length > 0 && out[out.length - 1] === 0) out.pop();
  for (let i = 0; i < zeros; i++) out.push(0);
  return Uint8Array.from(out.reverse());
}

/** c32Checksum is the first 4 bytes of SHA-256(SHA-256(version ‖ data)). */
export function c32Checksum(version, data) {
  const buf = new Uint8Array(data.length + 1);
  buf[0] = version;
  buf.set(data, 1);
  return sha256(sha256(buf)).subarray(0, 4);
}

/** c32Address renders a version (0..31) and a 20-byte hash160 as an address. */
export function c32Address(version, hash160) {
  const buf = new Uint8Array(hash160.length + 4);
  buf.set(hash160);
  buf.set(c32Checksum(version, hash160), hash160.length);
  return 'S' + C32_ALPHABET[version] + c32Encode(buf);
}

// normalizeChar maps one typed character the way c32check does (JavaScript
// toUpperCase, then O→0 and I, L→1); null when the result is not c32.
function normalizeChar(ch) {
  const up = ch.toUpperCase().replace(/O/g, '0').replace(/[IL]/g, '1');
  for (const c of up) if (!INDEX.has(c)) return null;
  return up;
}

function describeChar(ch) {
  if (ch === ' ') return 'A space';
  if (ch === '\t') return 'A tab';
  if (/\s/.test(ch)) return 'A line break or other blank';
  return `“${ch}”`;
}

function fail(code, message, extra = {}) {
  return { ok: false, code, message, ...extra };
}

function validateContractName(name) {
  if (name.length === 0) {
    return fail('contract_name', 'The contract name after the “.” is missing.');
  }
  if (name.length > MAX_CONTRACT_NAME) {
    return fail('contract_name',
      `The contract name is too long: ${name.length} characters, at most ${MAX_CONTRACT_NAME}.`);
  }
  if (!/^[a-zA-Z]/.test(name)) {
    return fail('contract_name', 'A contract name must start with a letter.');
  }
  const bad = name.match(/[^a-zA-Z0-9_-]/);
  if (bad) {
    return fail('contract_name',
      `${describeChar(bad[0])} is not allowed in a contract name (letters, digits, “-” and “_” only).`);
  }
  return null;
}

/**
 * validateAddress checks what a user typed as a faucet recipient: a testnet
 * standard principal (ST… or SN…) or contract principal (ST….name).
 *
 * It returns {ok: true, address, version, hash160, contractName} with the
 * address in canonical form, or {ok: false, code, message} where message is
 * a sentence for the user and code one of: empty, prefix, character,
 * length, checksum, version, mainnet, contract_name.
 *
 * Like the server and c32check it accepts lower case after the leading "S"
 * and reads O as 0 and I, L as 1.
 */
export function validateAddress(input) {
  const s = String(input ?? '').trim();
  if (s === '') {
    return fail('empty', 'Enter a testnet address (it starts with ST).');
  }
  const dot = s.indexOf('.');
  const addr = dot < 0 ? s : s.slice(0, dot);
  const name = dot < 0 ? null : s.slice(dot + 1);

  if (addr[0] !== 'S') {
    const hint = addr[0] === 's' ? ' (a capital S)' : '';
    return fail('prefix', `A Stacks address starts with S${hint}; a testnet address starts with ST.`);
  }
  if (addr.length > MAX_ADDRESS_CHARS) {
    return fail('length', `This is far too long for an address (${addr.length} characters).`);
  }

  // Normalise and check every character, reporting the first bad one as typed.
  const chars = [...addr];
  let norm = '';
  for (let i = 1; i < chars.length; i++) {
    const up = normalizeChar(chars[i]);
    if (up === null) {
      return fail('character',
        `${describeChar(chars[i])} at position ${i + 1} cannot be part of an address: ` +
        'addresses use the digits 0–9 and the letters A–Z except U.', { position: i + 1 });
    }
    norm += up;
  }
  if (norm.length === 0) {
    return fail('length', 'This address is too short: a testnet address is 41 characters, starting with ST.');
  }

  const version = INDEX.get(norm[0]);
  if (version === VERSION_MAINNET_SINGLE || version === VERSION_MAINNET_MULTI) {
    return fail('mainnet', MAINNET_MESSAGE);
  }
  if (version !== VERSION_TESTNET_SINGLE && version !== VERSION_TESTNET_MULTI) {
    return fail('version',
      `“S${chars[1]}” is not a testnet address prefix: a testnet address starts with ST (or SN for a multi-signature account).`);
  }

  const raw = c32Decode(norm.slice(1));
  if (raw.length < 24) {
    return fail('length',
      `This address is too short (${chars.length} characters; a testnet address usually has 41). ` +
      'Check that you copied all of it.');
  }
  if (raw.length > 24) {
    return fail('length',
      `This address is too long (${chars.length} characters; a testnet address usually has 41). ` +
      'Check for extra characters.');
  }
  const hash160 = raw.subarray(0, 20);
  const want = c32Checksum(version, hash160);
  for (let i = 0; i < 4; i++) {
    if (raw[20 + i] !== want[i]) {
      return fail('checksum',
        'The checksum does not match: typo? Check the address character by character, or copy it again.');
    }
  }

  if (name !== null) {
    const err = validateContractName(name);
    if (err) return err;
  }
  const address = c32Address(version, hash160);
  return {
    ok: true,
    address: name === null ? address : `${address}.${name}`,
    version,
    hash160: Uint8Array.from(hash160),
    contractName: name,
  };
}
