// Shared helpers: build one signed STX token-transfer, send-many contract-call
// or SIP-010 token-transfer vector with stacks.js and check it for internal
// consistency.
// Used by gen-vectors.mjs and check-golden.mjs.

import { STACKS_TESTNET } from '@stacks/network';
import {
  Pc,
  addressToString,
  bufferCV,
  deserializeTransaction,
  getAddressFromPrivateKey,
  listCV,
  makeContractCall,
  makeSTXTokenTransfer,
  noneCV,
  principalCV,
  someCV,
  tupleCV,
  uintCV,
} from '@stacks/transactions';

export const TESTNET_CHAIN_ID = 0x80000000;
export const U64_MAX = (1n << 64n) - 1n;
export const SEND_MANY_MEMO_TESTNET = 'ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B.send-many-memo';
export const SEND_MANY_MAX = 200;
export const SBTC_TESTNET = 'ST1F7QA2MDF17S807EPA36TSS8AMEFY4KA9TVGWXT.sbtc-token::sbtc-token';
export const SIP010_MAX_MEMO = 34;
// Fungible condition codes by stacks.js comparator name (wire bytes 0x01..0x05).
export const FT_CODES = { eq: 1, gt: 2, gte: 3, lt: 4, lte: 5 };

// Clarity's name rules (stacks-core ClarityName / ContractName), which the
// node enforces but stacks.js does not check for asset names: a generator bug
// must fail here, not look like a Go mismatch.
export const CLARITY_NAME_RE = /^([a-zA-Z][a-zA-Z0-9\-_!?+<>=/*]{0,127}|[-+=/*]|[<>]=?)$/;
export const CONTRACT_NAME_RE = /^[a-zA-Z][a-zA-Z0-9\-_]{0,39}$/;

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

/**
 * Build one send-many contract-call vector: makeContractCall with the single
 * (list 200 {to: principal, ustx: uint, memo: (buff 34)}) argument, post-condition
 * mode Deny and one STX post-condition "sends exactly the total".
 * @param {{senderKey: string, nonce: bigint, fee: bigint, chainId: number,
 *          contract: string, functionName: string,
 *          recipients: {to: string, ustx: bigint, memo: string}[],
 *          pcPrincipal: 'sender' | 'origin'}} spec  (memo is hex)
 */
export async function makeContractCallVector(spec) {
  const { senderKey, nonce, fee, chainId, contract, functionName, recipients, pcPrincipal } = spec;
  const senderAddress = getAddressFromPrivateKey(senderKey, 'testnet');
  const total = recipients.reduce((sum, r) => sum + r.ustx, 0n);
  // Keys deliberately not in sorted order: stacks.js sorts them.
  const arg = listCV(
    recipients.map(r =>
      tupleCV({ to: principalCV(r.to), ustx: uintCV(r.ustx), memo: bufferCV(Buffer.from(r.memo, 'hex')) })
    )
  );
  const pc = (pcPrincipal === 'origin' ? Pc.origin() : Pc.principal(senderAddress)).willSendEq(total).ustx();
  const [contractAddress, contractName] = contract.split('.');
  const tx = await makeContractCall({
    contractAddress,
    contractName,
    functionName,
    functionArgs: [arg],
    senderKey,
    nonce,
    fee,
    network: testnetWithChainId(chainId),
    postConditionMode: 'deny',
    postConditions: [pc],
  });
  const record = {
    kind: 'contract-call',
    senderKey,
    nonce: nonce.toString(),
    fee: fee.toString(),
    chainId,
    contract,
    function: functionName,
    recipients: recipients.map(r => ({ to: r.to, ustx: r.ustx.toString(), memo: r.memo })),
    pcPrincipal,
    pcAmount: total.toString(),
    txRaw: tx.serialize(),
    txId: '0x' + tx.txid(),
    senderAddress,
  };
  checkContractCallVector(record);
  return record;
}

/**
 * decodeChecked checks what a contract-call and a SIP-010 record's signed
 * transaction share (plain hex, the txid's form, the testnet version byte
 * and the chain id up front, a lossless decode, the decoded chain id, nonce
 * and fee) and returns the decoded transaction. Throws on mismatch.
 */
function decodeChecked(r) {
  assert(/^[0-9a-f]+$/.test(r.txRaw) && r.txRaw.length % 2 === 0, 'txRaw not plain hex');
  assert(/^0x[0-9a-f]{64}$/.test(r.txId), `bad txId ${r.txId}`);
  assert(r.txRaw.slice(0, 2) === '80', 'tx version byte is not 0x80');
  assert(r.txRaw.slice(2, 10) === r.chainId.toString(16).padStart(8, '0'), 'chain id not at bytes 1..4');

  const tx = deserializeTransaction(r.txRaw);
  assert(tx.serialize() === r.txRaw, 'deserialize/serialize round-trip differs');
  assert(tx.chainId === r.chainId, 'decoded chainId differs');
  const sc = tx.auth.spendingCondition;
  assert(sc.nonce === BigInt(r.nonce) && sc.fee === BigInt(r.fee), 'decoded nonce/fee differ');
  return tx;
}

/** Structural checks plus a decode round-trip of a contract-call record. Throws on mismatch. */
export function checkContractCallVector(r) {
  assert(r.kind === 'contract-call', 'kind');
  assert(/^[0-9a-f]{64}(01)?$/.test(r.senderKey), `bad senderKey ${r.senderKey}`);
  for (const k of ['nonce', 'fee', 'pcAmount']) {
    assert(/^(0|[1-9][0-9]*)$/.test(r[k]) && BigInt(r[k]) <= U64_MAX, `bad ${k} ${r[k]}`);
  }
  assert(Number.isInteger(r.chainId) && r.chainId >= 0 && r.chainId <= 0xffffffff, 'bad chainId');
  assert(r.pcPrincipal === 'sender' || r.pcPrincipal === 'origin', 'bad pcPrincipal');
  assert(Array.isArray(r.recipients) && r.recipients.length >= 1 && r.recipients.length <= SEND_MANY_MAX, 'recipients');
  let total = 0n;
  for (const x of r.recipients) {
    assert(typeof x.to === 'string' && /^S[TN]/.test(x.to), `bad recipient ${x.to}`);
    assert(/^(0|[1-9][0-9]*)$/.test(x.ustx) && BigInt(x.ustx) <= U64_MAX, `bad ustx ${x.ustx}`);
    assert(/^([0-9a-f]{2}){0,34}$/.test(x.memo), `bad memo ${x.memo}`);
    total += BigInt(x.ustx);
  }
  assert(total === BigInt(r.pcAmount), 'pcAmount is not the total');

  const tx = decodeChecked(r);
  assert(tx.postConditionMode === 2, 'post-condition mode is not Deny');
  assert(tx.postConditions.values.length === 1, 'want one post-condition');
  const pc = tx.postConditions.values[0];
  assert(pc.conditionType === 0 && pc.conditionCode === 1 && pc.amount === total, 'post-condition differs');
  assert(pc.principal.prefix === (r.pcPrincipal === 'origin' ? 1 : 2), 'post-condition principal type');
  const p = tx.payload;
  assert(p.payloadType === 2, 'payload is not a contract call');
  assert(`${p.contractAddress.version}` !== '' && p.contractName.content === r.contract.split('.')[1], 'contract name');
  assert(p.functionName.content === r.function, 'function name');
  assert(p.functionArgs.length === 1 && p.functionArgs[0].value.length === r.recipients.length, 'argument list length');
  p.functionArgs[0].value.forEach((t, i) => {
    const x = r.recipients[i];
    assert(Object.keys(t.value).join(',') === 'memo,to,ustx', `tuple keys ${Object.keys(t.value)}`);
    assert(t.value.to.value === x.to, `recipient ${i} differs`);
    assert(t.value.ustx.value === BigInt(x.ustx), `amount ${i} differs`);
    assert(t.value.memo.value === x.memo, `memo ${i} differs`);
  });
}

/**
 * Build one SIP-010 transfer vector: makeContractCall of the token contract's
 * (transfer (amount uint) (sender principal) (recipient principal)
 * (memo (optional (buff 34)))), post-condition mode Deny, with the given
 * post-conditions. The faucet's own shape is one post-condition
 * {principal: 'sender', code: 'eq', amount, asset}.
 * @param {{senderKey: string, nonce: bigint, fee: bigint, chainId: number,
 *          asset: string, amount: bigint, recipient: string, memoHex: string | null,
 *          postConditions: {principal: string, code: string, amount: bigint, asset: string | null}[]}} spec
 *   asset is "ADDR.contract::token"; memoHex null sends none; a post-condition
 *   principal is 'sender', 'origin' or a principal string; its asset null is STX.
 */
export async function makeSIP010Vector(spec) {
  const { senderKey, nonce, fee, chainId, asset, amount, recipient, memoHex, postConditions } = spec;
  const senderAddress = getAddressFromPrivateKey(senderKey, 'testnet');
  const [contract] = asset.split('::');
  const [contractAddress, contractName] = contract.split('.');
  const pcs = postConditions.map(pc => {
    const who = pc.principal === 'origin' ? Pc.origin() : Pc.principal(pc.principal === 'sender' ? senderAddress : pc.principal);
    const partial = who[`willSend${{ eq: 'Eq', gt: 'Gt', gte: 'Gte', lt: 'Lt', lte: 'Lte' }[pc.code]}`](pc.amount);
    if (pc.asset === null) return partial.ustx();
    const [pcContract, token] = pc.asset.split('::');
    return partial.ft(pcContract, token);
  });
  const tx = await makeContractCall({
    contractAddress,
    contractName,
    functionName: 'transfer',
    functionArgs: [
      uintCV(amount),
      principalCV(senderAddress),
      principalCV(recipient),
      memoHex === null ? noneCV() : someCV(bufferCV(Buffer.from(memoHex, 'hex'))),
    ],
    senderKey,
    nonce,
    fee,
    network: testnetWithChainId(chainId),
    postConditionMode: 'deny',
    postConditions: pcs,
  });
  const record = {
    kind: 'sip010-transfer',
    senderKey,
    nonce: nonce.toString(),
    fee: fee.toString(),
    chainId,
    asset,
    amount: amount.toString(),
    recipient,
    memoHex,
    postConditions: postConditions.map(pc => ({ ...pc, amount: pc.amount.toString() })),
    txRaw: tx.serialize(),
    txId: '0x' + tx.txid(),
    senderAddress,
  };
  checkSIP010Vector(record);
  return record;
}

const isU64 = s => typeof s === 'string' && /^(0|[1-9][0-9]*)$/.test(s) && BigInt(s) <= U64_MAX;

function checkAssetID(id, what) {
  const m = typeof id === 'string' && /^(S[TN][0-9A-Z]+)\.([^.:]+)::([^:]+)$/.exec(id);
  assert(m, `${what}: bad asset id ${id}`);
  assert(CONTRACT_NAME_RE.test(m[2]), `${what}: bad contract name ${m[2]}`);
  assert(CLARITY_NAME_RE.test(m[3]), `${what}: bad token name ${m[3]}`);
  return { address: m[1], contractName: m[2], tokenName: m[3] };
}

/** Structural checks plus a decode round-trip of a SIP-010 record. Throws on mismatch. */
export function checkSIP010Vector(r) {
  assert(r.kind === 'sip010-transfer', 'kind');
  assert(/^[0-9a-f]{64}(01)?$/.test(r.senderKey), `bad senderKey ${r.senderKey}`);
  for (const k of ['nonce', 'fee', 'amount']) assert(isU64(r[k]), `bad ${k} ${r[k]}`);
  assert(BigInt(r.amount) > 0n, 'amount 0 (a SIP-010 transfer of 0 always fails)');
  assert(Number.isInteger(r.chainId) && r.chainId >= 0 && r.chainId <= 0xffffffff, 'bad chainId');
  const asset = checkAssetID(r.asset, 'asset');
  assert(typeof r.recipient === 'string' && /^S[TN]/.test(r.recipient), `bad recipient ${r.recipient}`);
  assert(r.recipient !== r.senderAddress, 'recipient is the sender');
  assert(r.memoHex === null || new RegExp(`^([0-9a-f]{2}){0,${SIP010_MAX_MEMO}}$`).test(r.memoHex), `bad memo ${r.memoHex}`);
  assert(Array.isArray(r.postConditions) && r.postConditions.length >= 1, 'postConditions');
  for (const pc of r.postConditions) {
    assert(pc.principal === 'sender' || pc.principal === 'origin' || /^S[TN]/.test(pc.principal), `bad pc principal ${pc.principal}`);
    assert(pc.code in FT_CODES, `bad pc code ${pc.code}`);
    assert(isU64(pc.amount), `bad pc amount ${pc.amount}`);
    if (pc.asset !== null) checkAssetID(pc.asset, 'pc asset');
  }

  const tx = decodeChecked(r);
  assert(tx.auth.spendingCondition.keyEncoding === (r.senderKey.length === 66 ? 0 : 1), 'unexpected key encoding');
  assert(tx.postConditionMode === 2, 'post-condition mode is not Deny');
  assert(tx.postConditions.values.length === r.postConditions.length, 'post-condition count');
  tx.postConditions.values.forEach((got, i) => {
    const want = r.postConditions[i];
    assert(got.conditionType === (want.asset === null ? 0 : 1), `pc ${i} type ${got.conditionType}`);
    assert(got.conditionCode === FT_CODES[want.code], `pc ${i} code ${got.conditionCode}`);
    assert(got.amount === BigInt(want.amount), `pc ${i} amount`);
    const who = want.principal === 'sender' ? r.senderAddress : want.principal;
    const p = got.principal;
    if (want.principal === 'origin') assert(p.prefix === 1, `pc ${i} principal type ${p.prefix}`);
    else if (who.includes('.')) {
      assert(p.prefix === 3 && `${addressToString(p.address)}.${p.contractName.content}` === who, `pc ${i} contract principal`);
    } else assert(p.prefix === 2 && addressToString(p.address) === who, `pc ${i} standard principal`);
    if (want.asset !== null) {
      const a = got.asset;
      assert(`${addressToString(a.address)}.${a.contractName.content}::${a.assetName.content}` === want.asset, `pc ${i} asset`);
    }
  });
  const p = tx.payload;
  assert(p.payloadType === 2, 'payload is not a contract call');
  assert(addressToString(p.contractAddress) === asset.address && p.contractName.content === asset.contractName, 'contract');
  assert(p.functionName.content === 'transfer', 'function name');
  const [amount, sender, recipient, memo] = p.functionArgs;
  assert(p.functionArgs.length === 4, 'argument count');
  assert(amount.type === 'uint' && amount.value === BigInt(r.amount), 'amount argument');
  assert(sender.type === 'address' && sender.value === r.senderAddress, 'sender argument');
  assert(recipient.type === (r.recipient.includes('.') ? 'contract' : 'address') && recipient.value === r.recipient, 'recipient argument');
  if (r.memoHex === null) assert(memo.type === 'none', 'memo is not none');
  else assert(memo.type === 'some' && memo.value.type === 'buffer' && memo.value.value === r.memoHex, 'memo argument');
}
