// Shared helpers: build one signed STX token-transfer vector with stacks.js
// and check it for internal consistency. Used by gen-vectors.mjs and
// check-golden.mjs.

import { STACKS_TESTNET } from '@stacks/network';
import {
  deserializeTransaction,
  getAddressFromPrivateKey,
  makeSTXTokenTransfer,
} from '@stacks/transactions';

export const TESTNET_CHAIN_ID = 0x80000000;
export const U64_MAX = (1n << 64n) - 1n;

// A fetch that must never run: fee and nonce are always passed explicitly,
// so stacks.js has no reason to talk to a node. If it ever tries, we fail
// loudly instead of silently depending on the network.
function forbiddenFetch(input) {
  throw new Error(`unexpected network call from stacks.js: ${String(input)}`);
}

// Also guard the global fetch for anything that bypasses network.client.
globalThis.fetch = forbiddenFetch;

// Networks are cached per chain id; they are plain objects in v7.
const networks = new Map();
export function testnetWithChainId(chainId) {
  let net = networks.get(chainId);
  if (!net) {
    net = {
      ...STACKS_TESTNET,
      chainId,
      client: { baseUrl: 'http://127.0.0.1:9', fetch: forbiddenFetch },
    };
    networks.set(chainId, net);
  }
  return net;
}

function assert(cond, msg) {
  if (!cond) throw new Error(`self-check failed: ${msg}`);
}

/**
 * Build one vector record.
 * @param {{senderKey: string, recipient: string, amount: bigint, nonce: bigint,
 *          fee: bigint, memo: string, chainId: number}} spec
 */
export async function makeVector(spec) {
  const { senderKey, recipient, amount, nonce, fee, memo, chainId } = spec;
  const tx = await makeSTXTokenTransfer({
    recipient,
    amount,
    nonce,
    fee,
    memo,
    senderKey,
    network: testnetWithChainId(chainId),
  });
  const txRaw = tx.serialize();
  const record = {
    senderKey,
    recipient,
    amount: amount.toString(),
    nonce: nonce.toString(),
    fee: fee.toString(),
    memo,
    chainId,
    txRaw,
    txId: '0x' + tx.txid(),
    senderAddress: getAddressFromPrivateKey(senderKey, 'testnet'),
  };
  checkVector(record);
  return record;
}

const FIELDS = {
  senderKey: 'string',
  recipient: 'string',
  amount: 'string',
  nonce: 'string',
  fee: 'string',
  memo: 'string',
  chainId: 'number',
  txRaw: 'string',
  txId: 'string',
  senderAddress: 'string',
};

/** Structural checks plus a decode round-trip of txRaw. Throws on mismatch. */
export function checkVector(r) {
  for (const [k, t] of Object.entries(FIELDS)) {
    assert(typeof r[k] === t, `field ${k} missing or not a ${t}`);
  }
  assert(/^[0-9a-f]{64}(01)?$/.test(r.senderKey), `bad senderKey ${r.senderKey}`);
  for (const k of ['amount', 'nonce', 'fee']) {
    assert(/^(0|[1-9][0-9]*)$/.test(r[k]) && BigInt(r[k]) <= U64_MAX, `bad ${k} ${r[k]}`);
  }
  assert(Buffer.byteLength(r.memo, 'utf8') <= 34, `memo too long: ${r.memo}`);
  assert(Number.isInteger(r.chainId) && r.chainId >= 0 && r.chainId <= 0xffffffff, 'bad chainId');
  assert(/^[0-9a-f]+$/.test(r.txRaw) && r.txRaw.length % 2 === 0, 'txRaw not plain hex');
  assert(/^0x[0-9a-f]{64}$/.test(r.txId), `bad txId ${r.txId}`);
  assert(/^S[TN][0-9A-HJKMNP-TV-Z]+$/.test(r.senderAddress), `bad senderAddress ${r.senderAddress}`);

  // Version byte 0x80 (testnet) then the chain id, big-endian, at bytes 1..4.
  assert(r.txRaw.slice(0, 2) === '80', 'tx version byte is not 0x80');
  assert(
    r.txRaw.slice(2, 10) === r.chainId.toString(16).padStart(8, '0'),
    `chain id ${r.chainId} not at bytes 1..4 of txRaw`
  );

  const tx = deserializeTransaction(r.txRaw);
  assert(tx.serialize() === r.txRaw, 'deserialize/serialize round-trip differs');
  assert(tx.chainId === r.chainId, 'decoded chainId differs');
  const sc = tx.auth.spendingCondition;
  assert(sc.nonce === BigInt(r.nonce), 'decoded nonce differs');
  assert(sc.fee === BigInt(r.fee), 'decoded fee differs');
  assert(sc.keyEncoding === (r.senderKey.length === 66 ? 0 : 1), 'unexpected key encoding');
  assert(tx.payload.amount === BigInt(r.amount), 'decoded amount differs');
  assert(tx.payload.memo.content === r.memo, 'decoded memo differs');
  assert(tx.payload.recipient.value === r.recipient, 'decoded recipient differs');
  assert(tx.postConditionMode === 2 && tx.postConditions.values.length === 0, 'post conditions');
}
