#!/usr/bin/env node
// Generates random signed STX token-transfer, send-many contract-call and
// SIP-010 token-transfer test vectors with stacks.js.
//
//   node hack/conformance/gen-vectors.mjs [--count N] [--contract-calls M] [--token-transfers K] [--out FILE] [--golden]
//   node hack/conformance/gen-vectors.mjs [N] [FILE]
//
// N (STX token transfers) defaults to 1000; M (send-many contract calls) and
// K (SIP-010 transfers) each default to N/5 rounded up; the records come in
// that order. FILE defaults to standard output ("-").
// --golden only runs the golden-vector check and exits (0 on match).
// The golden vector is also checked before every generation run.

import { randomBytes, randomInt } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { c32address } from 'c32check';
import { randomPrivateKey } from '@stacks/transactions';
import {
  makeContractCallVector,
  makeSIP010Vector,
  makeVector,
  SBTC_TESTNET,
  SEND_MANY_MAX,
  SEND_MANY_MEMO_TESTNET,
  SIP010_MAX_MEMO,
  TESTNET_CHAIN_ID,
  U64_MAX,
} from './vector.mjs';
import { checkGolden } from './check-golden.mjs';

// ---------------------------------------------------------------- arguments

function usage(msg) {
  if (msg) process.stderr.write(`gen-vectors: ${msg}\n`);
  process.stderr.write('usage: gen-vectors.mjs [--count N] [--contract-calls M] [--token-transfers K] [--out FILE] [--golden] | [N] [FILE]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { count: 1000, contractCalls: undefined, tokenTransfers: undefined, out: '-', golden: false };
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const eq = a.indexOf('=');
    const [name, inline] = a.startsWith('--') && eq > 0 ? [a.slice(0, eq), a.slice(eq + 1)] : [a, undefined];
    const value = () => {
      if (inline !== undefined) return inline;
      if (i + 1 >= argv.length) usage(`${name} needs a value`);
      return argv[++i];
    };
    if (name === '--count' || name === '-n') opts.count = value();
    else if (name === '--contract-calls' || name === '-c') opts.contractCalls = value();
    else if (name === '--token-transfers' || name === '-t') opts.tokenTransfers = value();
    else if (name === '--out' || name === '-o') opts.out = value();
    else if (name === '--golden') opts.golden = true;
    else if (name === '--help' || name === '-h') usage();
    else if (name.startsWith('-') && name !== '-') usage(`unknown flag ${name}`);
    else positional.push(a);
  }
  if (positional.length > 2) usage('too many arguments');
  if (positional[0] !== undefined) opts.count = positional[0];
  if (positional[1] !== undefined) opts.out = positional[1];
  if (!/^\d+$/.test(String(opts.count))) usage(`bad count ${opts.count}`);
  opts.count = Number(opts.count);
  if (opts.contractCalls === undefined) opts.contractCalls = Math.ceil(opts.count / 5);
  if (!/^\d+$/.test(String(opts.contractCalls))) usage(`bad contract-call count ${opts.contractCalls}`);
  opts.contractCalls = Number(opts.contractCalls);
  if (opts.tokenTransfers === undefined) opts.tokenTransfers = Math.ceil(opts.count / 5);
  if (!/^\d+$/.test(String(opts.tokenTransfers))) usage(`bad token-transfer count ${opts.tokenTransfers}`);
  opts.tokenTransfers = Number(opts.tokenTransfers);
  return opts;
}

// ---------------------------------------------------------------- randomness

const rand = n => randomInt(n); // uniform integer in [0, n)
const chance = p => rand(1_000_000) < p * 1_000_000;
const pick = arr => arr[rand(arr.length)];
const randomU64 = () => randomBytes(8).readBigUInt64BE(0);
const randomHex = nBytes => randomBytes(nBytes).toString('hex');

// Notable u64 values: 0, max, and 2^k-1 / 2^k / 2^k+1 for every k.
const POW2_EDGES = [];
for (let k = 0n; k <= 64n; k++) {
  for (const v of [(1n << k) - 1n, 1n << k, (1n << k) + 1n]) {
    if (v <= U64_MAX && !POW2_EDGES.includes(v)) POW2_EDGES.push(v);
  }
}
const U64_SPECIALS = [
  0n, U64_MAX, 1n, U64_MAX - 1n, 1n << 63n, (1n << 63n) - 1n, (1n << 63n) + 1n,
  1n << 32n, (1n << 32n) - 1n, 1n << 53n, (1n << 53n) + 1n, 255n, 256n, 65535n, 65536n,
];

function randomU64Value() {
  const r = rand(100);
  if (r < 25) return BigInt(rand(1_000_001)); // small, realistic
  if (r < 50) return pick(POW2_EDGES);
  if (r < 60) return pick(U64_SPECIALS);
  return randomU64(); // full range
}

// Memo: random UTF-8 text of an exact byte length 0..34, built from
// characters of width 1 to 4 bytes. NUL is never used (stacks.js strips
// trailing NULs on decode, so it would not round-trip).
const CHARS_BY_WIDTH = {
  1: [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 !"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'],
  2: [...'éèüñßçøåΩπЖжאع¢£§ö'],
  3: [...'€中文字✓★☃ア한₿‰…'],
  4: [...'😀🚀🎉💧🌊🦄🔥𝄞'],
};
function randomMemo(byteLen) {
  let s = '';
  let left = byteLen;
  while (left > 0) {
    // Favour ASCII a little, but allow any width that still fits.
    const widths = [1, 1, 2, 3, 4].filter(w => w <= left);
    const w = pick(widths);
    s += pick(CHARS_BY_WIDTH[w]);
    left -= w;
  }
  if (Buffer.byteLength(s, 'utf8') !== byteLen) throw new Error('memo length bug');
  return s;
}
const randomMemoLength = () => (chance(0.15) ? pick([0, 34]) : rand(35));

// Clarity contract name: ^[a-zA-Z][a-zA-Z0-9_-]*$, 1..40 chars.
const NAME_FIRST = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
const NAME_REST = NAME_FIRST + '0123456789_-';
function randomContractName(len = 1 + rand(40)) {
  let s = NAME_FIRST[rand(NAME_FIRST.length)];
  while (s.length < len) s += NAME_REST[rand(NAME_REST.length)];
  return s;
}

// Testnet address versions: 26 = single-sig ("ST"), 21 = multi-sig ("SN").
const randomVersion = () => (chance(0.85) ? 26 : 21);

function randomRecipient({ contract = chance(0.3), hash = randomHex(20), version = randomVersion(), nameLen } = {}) {
  const addr = c32address(version, hash);
  return contract ? `${addr}.${randomContractName(nameLen)}` : addr;
}

// Custom chain ids: any u32 except 1 (mainnet) and 0 (often treated as
// "unset" by callers); a few fixed ones first.
const CHAIN_SPECIALS = [0x87654321, 0xffffffff, 0x80000001, 0x7fffffff, 0x00000002];
function randomChainId() {
  if (chance(0.8)) return TESTNET_CHAIN_ID;
  if (chance(0.2)) return pick(CHAIN_SPECIALS);
  for (;;) {
    const v = randomBytes(4).readUInt32BE(0);
    if (v !== 0 && v !== 1) return v;
  }
}

function randomSenderKey(compressed = chance(0.5)) {
  const k = randomPrivateKey(); // 32-byte valid scalar + "01"
  return compressed ? k : k.slice(0, 64);
}

// ---------------------------------------------------------------- specs

// The first records pin down edge cases so that even a small --count covers
// them; everything after is random.
function edgeSpecs() {
  const at = (i, arr) => arr[i % arr.length];
  const specs = [];
  const n = U64_SPECIALS.length;
  for (let i = 0; i < n; i++) {
    specs.push({
      senderKey: randomSenderKey(i % 2 === 0),
      recipient: randomRecipient({
        contract: i % 3 === 2,
        version: i % 4 === 3 ? 21 : 26,
        hash: i === 0 ? '00'.repeat(20) : i === 1 ? 'ff'.repeat(20) : randomHex(20),
        nameLen: at(Math.floor(i / 3), [1, 40, 20, undefined]), // only used when contract
      }),
      amount: at(i, U64_SPECIALS),
      nonce: at(i + (i % 2), U64_SPECIALS), // records 0 and 1: all-zero / all-max
      fee: at(i + 2 * (i % 2), U64_SPECIALS),
      memo: randomMemo(at(i, [0, 34, 1, 33, 2, 17])),
      chainId: i < 2 ? TESTNET_CHAIN_ID : i < 2 + CHAIN_SPECIALS.length ? CHAIN_SPECIALS[i - 2] : randomChainId(),
    });
  }
  // Records 0 and 1: amount, nonce and fee all 0, then all u64 max.
  specs[0].nonce = specs[0].fee = 0n;
  specs[1].nonce = specs[1].fee = U64_MAX;
  // Fixed multi-byte memos that sit exactly on the 34-byte limit.
  specs[2].memo = 'é'.repeat(17); // 17 x 2 bytes
  specs[3].memo = '€'.repeat(10) + '😀'; // 10 x 3 + 4 bytes
  specs[4].memo = '🚀'.repeat(8) + 'ab'; // 8 x 4 + 2 bytes
  return specs;
}

function randomSpec() {
  return {
    senderKey: randomSenderKey(),
    recipient: randomRecipient(),
    amount: randomU64Value(),
    nonce: randomU64Value(),
    fee: randomU64Value(),
    memo: randomMemo(randomMemoLength()),
    chainId: randomChainId(),
  };
}

// ---------------------------------------------------------------- send-many specs

// Amounts: each from the u64 distribution above; when their sum would not
// fit the u64 post-condition amount, every one is divided by the count.
// Sometimes the last amount is chosen so that the total is exactly u64 max.
function randomAmounts(n) {
  let amounts = Array.from({ length: n }, randomU64Value);
  if (amounts.reduce((a, b) => a + b, 0n) > U64_MAX) amounts = amounts.map(a => a / BigInt(n));
  if (chance(0.05)) {
    const rest = amounts.slice(0, -1).reduce((a, b) => a + b, 0n);
    amounts[n - 1] = U64_MAX - rest;
  }
  return amounts;
}

const randomMemoHex = () => randomHex(chance(0.2) ? pick([0, 34]) : rand(35));

// Recipient counts: small batches most often, and the 1 and 200 edges.
function randomRecipientCount() {
  const r = rand(100);
  if (r < 10) return 1;
  if (r < 20) return SEND_MANY_MAX;
  if (r < 60) return 1 + rand(20);
  return 1 + rand(SEND_MANY_MAX);
}

function randomSendManySpec(n = randomRecipientCount()) {
  const amounts = randomAmounts(n);
  return {
    senderKey: randomSenderKey(),
    nonce: randomU64Value(),
    fee: randomU64Value(),
    chainId: TESTNET_CHAIN_ID, // the send-many-memo contract lives on testnet
    contract: SEND_MANY_MEMO_TESTNET,
    functionName: 'send-many',
    recipients: amounts.map(ustx => ({ to: randomRecipient(), ustx, memo: randomMemoHex() })),
    pcPrincipal: chance(0.8) ? 'sender' : 'origin', // Pc.principal(sender) or Pc.origin()
  };
}

function sendManyEdgeSpecs() {
  const specs = [];
  // One recipient of u64 max (the largest total), to a standard principal.
  const one = randomSendManySpec(1);
  one.recipients[0] = { to: randomRecipient({ contract: false }), ustx: U64_MAX, memo: randomHex(34) };
  specs.push(one);
  // 200 recipients: all contract principals with 40-character names, 34-byte memos.
  const full = randomSendManySpec(SEND_MANY_MAX);
  full.recipients = full.recipients.map(r => ({ ...r, to: randomRecipient({ contract: true, nameLen: 40 }), memo: randomHex(34) }));
  full.pcPrincipal = 'sender';
  specs.push(full);
  // 200 recipients: standard principals, empty memos, zero amounts, zero nonce and fee.
  const zeros = randomSendManySpec(SEND_MANY_MAX);
  zeros.recipients = zeros.recipients.map(r => ({ ...r, to: randomRecipient({ contract: false }), ustx: 0n, memo: '' }));
  zeros.nonce = zeros.fee = 0n;
  zeros.pcPrincipal = 'origin';
  specs.push(zeros);
  // Mixed principals with 1-character contract names; max nonce and fee.
  const mixed = randomSendManySpec(7);
  mixed.recipients = mixed.recipients.map((r, i) => ({ ...r, to: randomRecipient({ contract: i % 2 === 1, nameLen: 1 }) }));
  mixed.nonce = mixed.fee = U64_MAX;
  specs.push(mixed);
  return specs;
}

// ---------------------------------------------------------------- SIP-010 specs

// Token names are Clarity names: a letter then up to 127 letters, digits or
// -_!?+<>=/*, or one of the operator names; stacks.js checks none of this.
const TOKEN_REST = NAME_REST + '!?+<>=/*';
const OPERATOR_NAMES = ['-', '+', '=', '/', '*', '<', '>', '<=', '>='];
function randomTokenName(len) {
  if (len === undefined) {
    const r = rand(100);
    if (r < 5) return pick(OPERATOR_NAMES);
    if (r < 15) len = pick([1, 2, 127, 128]);
    else if (r < 75) len = 1 + rand(32);
    else len = 1 + rand(128);
  }
  let s = NAME_FIRST[rand(NAME_FIRST.length)];
  while (s.length < len) s += TOKEN_REST[rand(TOKEN_REST.length)];
  return s;
}

function randomAssetID({ version = randomVersion(), hash = randomHex(20), contractLen, tokenLen } = {}) {
  return `${c32address(version, hash)}.${randomContractName(contractLen)}::${randomTokenName(tokenLen)}`;
}

// SIP-010 amounts are never 0: the contract refuses them, and so does our
// builder, which is what is under test.
const randomTokenAmount = () => {
  const v = randomU64Value();
  return v === 0n ? 1n : v;
};

const randomTokenMemo = () => (chance(0.3) ? null : randomHex(chance(0.2) ? pick([0, SIP010_MAX_MEMO]) : rand(SIP010_MAX_MEMO + 1)));

const FT_CODE_NAMES = ['eq', 'gt', 'gte', 'lt', 'lte'];

// 70% the faucet's own shape (sender sends exactly amount of the token);
// otherwise any principal type (origin, standard, contract), any code, any
// amount, and sometimes a second post-condition on STX or another token.
function randomTokenPostConditions(asset, amount) {
  if (chance(0.7)) return [{ principal: 'sender', code: 'eq', amount, asset }];
  const one = () => ({
    principal: pick(['sender', 'origin', 'origin', randomRecipient({ contract: false }), randomRecipient({ contract: true })]),
    code: pick(FT_CODE_NAMES),
    amount: chance(0.5) ? amount : randomU64Value(),
    asset: chance(0.8) ? asset : chance(0.5) ? null : randomAssetID(),
  });
  const pcs = [one()];
  if (chance(0.2)) pcs.push(one());
  return pcs;
}

function randomSIP010Spec() {
  const senderKey = randomSenderKey();
  const asset = chance(0.1) ? SBTC_TESTNET : randomAssetID();
  const amount = randomTokenAmount();
  return {
    senderKey,
    nonce: randomU64Value(),
    fee: randomU64Value(),
    chainId: randomChainId(),
    asset,
    amount,
    recipient: randomRecipient(), // a fresh random hash: never the sender
    memoHex: randomTokenMemo(),
    postConditions: randomTokenPostConditions(asset, amount),
  };
}

// Fixed SIP-010 edge cases: name and amount limits, every condition code and
// post-condition principal type, memo none/empty/full, mixed STX and token
// post-conditions.
function sip010EdgeSpecs() {
  const base = overrides => {
    const s = { ...randomSIP010Spec(), ...overrides };
    if (!overrides.postConditions) s.postConditions = [{ principal: 'sender', code: 'eq', amount: s.amount, asset: s.asset }];
    return s;
  };
  const specs = [];
  // sBTC, the smallest amount, no memo, zero nonce and fee, testnet.
  specs.push(base({ asset: SBTC_TESTNET, amount: 1n, memoHex: null, nonce: 0n, fee: 0n, chainId: TESTNET_CHAIN_ID,
    recipient: randomRecipient({ contract: false }) }));
  // Longest names everywhere, u64 max amount, nonce and fee, a full memo,
  // a contract recipient with a 40-character name.
  const long = randomAssetID({ contractLen: 40, tokenLen: 128 });
  specs.push(base({ asset: long, amount: U64_MAX, nonce: U64_MAX, fee: U64_MAX, memoHex: randomHex(SIP010_MAX_MEMO),
    recipient: randomRecipient({ contract: true, nameLen: 40 }) }));
  // Shortest names, an empty (some 0x) memo, all-zero and all-ff hash160s.
  specs.push(base({ asset: randomAssetID({ hash: '00'.repeat(20), contractLen: 1, tokenLen: 1 }), memoHex: '',
    recipient: randomRecipient({ contract: true, hash: 'ff'.repeat(20), nameLen: 1 }) }));
  specs.push(base({ asset: randomAssetID({ hash: 'ff'.repeat(20), version: 21 }), memoHex: randomHex(1) }));
  // Every punctuation character a token name may hold, and the operator names.
  specs.push(base({ asset: `${c32address(26, randomHex(20))}.${randomContractName()}::a-_!?+<>=/*09Z` }));
  for (const op of OPERATOR_NAMES) specs.push(base({ asset: `${c32address(randomVersion(), randomHex(20))}.${randomContractName()}::${op}` }));
  // Each condition code with each principal type: origin (0x01), the sender
  // (0x02), another standard principal (0x02) and a contract (0x03).
  const principals = ['origin', 'sender', randomRecipient({ contract: false }), randomRecipient({ contract: true })];
  FT_CODE_NAMES.forEach((code, i) => {
    const s = base({});
    const amount = [0n, 1n, U64_MAX, s.amount, (1n << 63n)][i];
    s.postConditions = principals.map(principal => ({ principal, code, amount, asset: s.asset }));
    specs.push(s);
  });
  // An STX post-condition beside the token one; a second token's condition.
  const mixed = base({});
  mixed.postConditions = [
    { principal: 'sender', code: 'eq', amount: mixed.amount, asset: mixed.asset },
    { principal: 'origin', code: 'lte', amount: randomU64Value(), asset: null },
    { principal: 'sender', code: 'gte', amount: 0n, asset: randomAssetID() },
  ];
  specs.push(mixed);
  // Other chain ids.
  for (const chainId of CHAIN_SPECIALS.slice(0, 2)) specs.push(base({ chainId }));
  return specs;
}

// ---------------------------------------------------------------- main

async function main() {
  const opts = parseArgs(process.argv.slice(2));

  const problems = await checkGolden();
  if (problems.length > 0) {
    process.stderr.write(`gen-vectors: golden vector MISMATCH, refusing to generate\n${problems.join('\n')}\n`);
    process.exit(1);
  }
  if (opts.golden) {
    process.stderr.write('golden vector OK\n');
    return;
  }

  const started = process.hrtime.bigint();
  const edges = edgeSpecs();
  const records = [];
  for (let i = 0; i < opts.count; i++) {
    const spec = i < edges.length ? edges[i] : randomSpec();
    records.push(await makeVector(spec));
  }
  const ccEdges = sendManyEdgeSpecs();
  for (let i = 0; i < opts.contractCalls; i++) {
    const spec = i < ccEdges.length ? ccEdges[i] : randomSendManySpec();
    records.push(await makeContractCallVector(spec));
  }
  const tokenEdges = sip010EdgeSpecs();
  for (let i = 0; i < opts.tokenTransfers; i++) {
    const spec = i < tokenEdges.length ? tokenEdges[i] : randomSIP010Spec();
    records.push(await makeSIP010Vector(spec));
  }

  // One record per line keeps the file diff- and grep-friendly.
  const json = records.length === 0 ? '[]\n' : `[\n${records.map(r => JSON.stringify(r)).join(',\n')}\n]\n`;
  if (opts.out === '-') process.stdout.write(json);
  else writeFileSync(opts.out, json);

  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const where = opts.out === '-' ? 'stdout' : opts.out;
  process.stderr.write(
    `wrote ${records.length} vectors (${opts.count} token transfers, ${opts.contractCalls} send-many contract calls, ` +
      `${opts.tokenTransfers} SIP-010 transfers) to ${where} (${ms.toFixed(0)} ms)\n`
  );
}

main().catch(err => {
  process.stderr.write(`gen-vectors: ${err.stack || err}\n`);
  process.exit(1);
});
