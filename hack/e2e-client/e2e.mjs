// @ts-check
// End-to-end check of a faucet server, done the way a Stacks developer would do it: through the
// official JavaScript client (@stacks/blockchain-api-client), with the answers checked against the
// JSON schemas published in @stacks/stacks-blockchain-api-types and the transaction decoded and
// verified with @stacks/transactions.
//
//   node e2e.mjs --faucet http://127.0.0.1:3999 --address ST… --amount 500000000 [--stacking]
//   node e2e.mjs --faucet http://127.0.0.1:3999 --address ST… --amount 100000 --sbtc ADDR.contract::token
//   node e2e.mjs --faucet http://127.0.0.1:3999 --expect-status ready
//
// stdout gets exactly one JSON line: {"ok":true,…} or {"ok":false,"error":…} (then exit code 1).
// Details and timings go to stderr. No request leaves for any origin but --faucet's.

import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import { createClient } from '@stacks/blockchain-api-client';
import { ChainId, TransactionVersion } from '@stacks/network';
import {
  AddressHashMode,
  AuthType,
  PayloadType,
  PostConditionMode,
  addressFromVersionHash,
  addressHashModeToVersion,
  addressToString,
  deserializeTransaction,
  getAddressFromPublicKey,
  isSingleSig,
  nextVerification,
  publicKeyToHex,
  serializeTransaction,
  wireToPostCondition,
} from '@stacks/transactions';
import { Ajv } from 'ajv';

const USAGE = `usage:
  node e2e.mjs --faucet URL --address ST… --amount USTX [--stacking] [--timeout-ms N]
  node e2e.mjs --faucet URL --address ST… --amount SATS --sbtc ADDR.contract::token [--timeout-ms N]
  node e2e.mjs --faucet URL --expect-status STATUS [--timeout-ms N]`;

class Failure extends Error {
  /** @param {string} message @param {unknown} [details] */
  constructor(message, details) {
    super(message);
    this.details = details;
  }
}

/** @param {unknown} cond @param {string} message @param {unknown} [details] @returns {asserts cond} */
function check(cond, message, details) {
  if (!cond) throw new Failure(message, details);
}

/** @param {string} msg */
function log(msg) {
  process.stderr.write(`e2e: ${msg}\n`);
}

/** @param {unknown} v */
function stringify(v) {
  return JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x));
}

// ---------------------------------------------------------------------------------------------
// arguments

function parse() {
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        faucet: { type: 'string' },
        address: { type: 'string' },
        amount: { type: 'string' },
        stacking: { type: 'boolean', default: false },
        sbtc: { type: 'string' },
        'expect-status': { type: 'string' },
        'timeout-ms': { type: 'string', default: '15000' },
        help: { type: 'boolean', default: false },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (e) {
    throw new Failure(`bad arguments: ${e instanceof Error ? e.message : e}`, USAGE);
  }
  if (parsed.help) {
    process.stderr.write(USAGE + '\n');
    process.exit(0);
  }
  check(parsed.faucet, '--faucet is required', USAGE);
  let faucet;
  try {
    faucet = new URL(parsed.faucet);
  } catch {
    throw new Failure(`--faucet is not a URL: ${parsed.faucet}`);
  }
  check(faucet.protocol === 'http:' || faucet.protocol === 'https:', `--faucet must be http(s): ${parsed.faucet}`);
  const timeoutMs = Number(parsed['timeout-ms']);
  check(Number.isInteger(timeoutMs) && timeoutMs > 0, `--timeout-ms must be a positive integer`);

  const statusOnly = parsed['expect-status'] !== undefined;
  if (statusOnly) {
    check(parsed.address === undefined && parsed.amount === undefined && !parsed.stacking,
      '--expect-status checks only the status: it takes no --address, --amount or --stacking', USAGE);
    return { faucet, timeoutMs, statusOnly, expectStatus: /** @type {string} */ (parsed['expect-status']) };
  }
  check(parsed.address, '--address is required', USAGE);
  check(parsed.amount, '--amount is required (µSTX the recipient must receive)', USAGE);
  check(/^[0-9]+$/.test(parsed.amount), `--amount must be a decimal integer of µSTX (sats with --sbtc): ${parsed.amount}`);
  check(parsed.sbtc === undefined || /^S[TN][0-9A-Z]+\.[a-zA-Z][a-zA-Z0-9_-]*::[a-zA-Z][^\s]*$/.test(parsed.sbtc),
    `--sbtc must be the token's asset identifier ADDR.contract::token: ${parsed.sbtc}`);
  check(!(parsed.sbtc && parsed.stacking), '--stacking is for STX drips only');
  return {
    faucet,
    timeoutMs,
    statusOnly,
    expectStatus: 'ready',
    address: parsed.address,
    amount: BigInt(parsed.amount),
    stacking: parsed.stacking,
    sbtc: parsed.sbtc,
  };
}

// ---------------------------------------------------------------------------------------------
// network: only the faucet's origin may be reached

/** @param {URL} faucet */
function guardedFetch(faucet) {
  const allowed = faucet.origin;
  const realFetch = globalThis.fetch;
  /** @type {typeof fetch} */
  const guarded = (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.origin !== allowed) {
      return Promise.reject(new Failure(`refusing a request to ${url.origin}: only ${allowed} may be contacted`));
    }
    return realFetch(input, init);
  };
  // Also for anything inside the libraries that would reach for the global fetch.
  globalThis.fetch = guarded;
  return guarded;
}

// ---------------------------------------------------------------------------------------------
// schemas from @stacks/stacks-blockchain-api-types

const require = createRequire(import.meta.url);
const TYPES_PKG = '@stacks/stacks-blockchain-api-types';
const typesRoot = dirname(require.resolve(`${TYPES_PKG}/package.json`));
const typesVersion = JSON.parse(readFileSync(join(typesRoot, 'package.json'), 'utf8')).version;

/** @param {string} dir @returns {string[]} */
function schemaFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return schemaFiles(p);
    return e.isFile() && e.name.endsWith('.schema.json') ? [p] : [];
  });
}

// The package's schemas have no $id and point at each other with relative file paths
// ("../../entities/info/chain-tip.schema.json"). Giving every schema its file:// URL as $id lets
// Ajv resolve those references offline, exactly as they are written.
function loadSchemas() {
  const ajv = new Ajv({ allErrors: true, strict: true });
  const files = ['api', 'entities'].flatMap((d) => schemaFiles(join(typesRoot, d)));
  for (const file of files) {
    const schema = JSON.parse(readFileSync(file, 'utf8'));
    ajv.addSchema({ ...schema, $id: pathToFileURL(file).href });
  }
  /** @param {string} rel */
  const compile = (rel) => {
    const validate = ajv.getSchema(pathToFileURL(join(typesRoot, rel)).href);
    check(validate, `${TYPES_PKG}@${typesVersion} has no ${rel}`);
    return { rel, validate };
  };
  return {
    count: files.length,
    faucet: compile('api/faucet/run-faucet.schema.json'),
    status: compile('api/info/get-status.schema.json'),
  };
}

/**
 * @param {{rel: string, validate: import('ajv').ValidateFunction}} schema
 * @param {unknown} body
 * @param {string} what
 */
function validateAgainst(schema, body, what) {
  if (!schema.validate(body)) {
    const errors = (schema.validate.errors ?? []).map(
      (e) => `${e.instancePath || '/'} ${e.message}${e.params && Object.keys(e.params).length ? ' ' + JSON.stringify(e.params) : ''}`);
    throw new Failure(`${what} does not match ${TYPES_PKG}@${typesVersion} ${schema.rel}: ${errors.join('; ')}`, body);
  }
}

// ---------------------------------------------------------------------------------------------
// the checks

/**
 * @param {Response} response
 * @param {string} what
 */
function checkJSONResponse(response, what) {
  const ct = response.headers.get('content-type') ?? '';
  check(/^application\/json\b/i.test(ct), `${what}: Content-Type is ${JSON.stringify(ct)}, not application/json`);
}

/**
 * @param {ReturnType<typeof createClient>} client
 * @param {ReturnType<typeof loadSchemas>} schemas
 * @param {DripOpts} opts
 */
async function drip(client, schemas, opts) {
  const started = performance.now();
  const path = opts.sbtc ? '/extended/v1/faucets/sbtc' : '/extended/v1/faucets/stx';
  const { data, error, response } = opts.sbtc
    // The sBTC operation takes the address in the query and no body at all.
    ? await client.POST('/extended/v1/faucets/sbtc', {
      params: { query: { address: opts.address } },
      signal: AbortSignal.timeout(opts.timeoutMs),
    })
    : await client.POST('/extended/v1/faucets/stx', {
      params: { query: opts.stacking ? { address: opts.address, stacking: true } : { address: opts.address } },
      // The client's spec marks the (deprecated) JSON body as required, typed `{address?} | null`:
      // null is "no body", so the address travels only in the query string, as the API asks.
      body: null,
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
  const ms = performance.now() - started;
  log(`POST ${path}${opts.stacking ? ' (stacking)' : ''} → ${response.status} in ${ms.toFixed(1)} ms`);
  check(response.status === 200,
    `faucet answered HTTP ${response.status}: ${stringify(error ?? data)}`, { status: response.status, body: error ?? data });
  checkJSONResponse(response, 'faucet');
  check(data, 'faucet answered 200 with an empty body');
  validateAgainst(schemas.faucet, data, 'faucet response');
  check(data.success === true, `faucet response has success=${stringify(data.success)}`, data);

  const { txId, txRaw } = data;
  // The published schema leaves txId and txRaw optional; a successful drip must carry both.
  check(typeof txId === 'string' && /^0x[0-9a-f]{64}$/.test(txId), `txId is not 0x + 64 lowercase hex: ${stringify(txId)}`);
  check(typeof txRaw === 'string' && /^(?:[0-9a-f]{2})+$/.test(txRaw),
    `txRaw is not lowercase hex without 0x (as the API serves it): ${String(stringify(txRaw)).slice(0, 80)}`);

  let tx;
  try {
    tx = deserializeTransaction(txRaw);
  } catch (e) {
    throw new Failure(`txRaw does not decode as a Stacks transaction: ${e instanceof Error ? e.message : e}`, txRaw);
  }
  check(serializeTransaction(tx) === txRaw, 'txRaw is not the canonical serialisation of the transaction it decodes to');
  check(`0x${tx.txid()}` === txId, `txId ${txId} is not the txid of txRaw (0x${tx.txid()})`);

  check(tx.transactionVersion === TransactionVersion.Testnet,
    `transaction version is 0x${tx.transactionVersion.toString(16)}, not testnet 0x${TransactionVersion.Testnet.toString(16)}`);
  check(tx.chainId === ChainId.Testnet, `chain id is 0x${tx.chainId.toString(16)}, not testnet 0x${ChainId.Testnet.toString(16)}`);

  check(tx.auth.authType === AuthType.Standard, `auth type is ${AuthType[tx.auth.authType]}, not standard (not sponsored)`);
  const cond = tx.auth.spendingCondition;
  check(isSingleSig(cond), `origin is a multisig (hash mode ${AddressHashMode[cond.hashMode]})`);
  const sender = addressToString(addressFromVersionHash(addressHashModeToVersion(cond.hashMode, 'testnet'), cond.signer));

  const payload = tx.payload;
  const paid = opts.sbtc ? checkSIP010Transfer(tx, sender, { ...opts, sbtc: opts.sbtc }) : checkSTXTransfer(payload, opts);

  // Signature: verifyOrigin recovers the public key from the signature over the presign sighash and
  // throws unless its hash160 is the signer field. Then the same recovery once more by hand, to show
  // which key signed and that it is the sender's.
  try {
    tx.verifyOrigin();
  } catch (e) {
    throw new Failure(`origin signature does not verify: ${e instanceof Error ? e.message : e}`);
  }
  const { pubKey } = nextVerification(tx.verifyBegin(), AuthType.Standard, cond.fee, cond.nonce, cond.keyEncoding, cond.signature.data);
  const publicKey = publicKeyToHex(pubKey.data);
  const signerAddress = getAddressFromPublicKey(publicKey, 'testnet');
  check(signerAddress === sender, `the key that signed (${signerAddress}) is not the sender ${sender}`);
  log(`tx ${txId}: ${paid.amount} ${opts.sbtc ? 'sats of ' + opts.sbtc : 'µSTX'} ${sender} → ${paid.recipient}, nonce ${cond.nonce}, fee ${cond.fee}, signed by ${publicKey}`);

  return { txId, recipient: paid.recipient, amount: paid.amount.toString(), sender, nonce: cond.nonce.toString(), fee: cond.fee.toString() };
}

/** @typedef {{address: string, amount: bigint, stacking: boolean, timeoutMs: number, sbtc?: string}} DripOpts */

/**
 * An STX drip: a token transfer of exactly the amount to the address.
 * @param {any} payload @param {DripOpts} opts
 */
function checkSTXTransfer(payload, opts) {
  check(payload.payloadType === PayloadType.TokenTransfer,
    `payload is ${PayloadType[payload.payloadType] ?? payload.payloadType}, not a token transfer`);
  const recipient = payload.recipient;
  check(recipient.type === 'address', `recipient is a ${recipient.type}, not a standard principal`, recipient);
  check(recipient.value === opts.address, `recipient is ${recipient.value}, not the requested ${opts.address}`);
  check(payload.amount === opts.amount, `amount is ${payload.amount} µSTX, expected ${opts.amount}`);
  return { recipient: recipient.value, amount: payload.amount };
}

/**
 * An sBTC drip: a call of the token contract's SIP-010 transfer(amount, sender, recipient, memo)
 * with the sender as the transaction's origin, in post-condition mode Deny with exactly one
 * post-condition: the sender sends exactly the amount of that token.
 * @param {import('@stacks/transactions').StacksTransactionWire} tx @param {string} sender
 * @param {DripOpts & {sbtc: string}} opts
 */
function checkSIP010Transfer(tx, sender, opts) {
  const payload = /** @type {any} */ (tx.payload);
  check(payload.payloadType === PayloadType.ContractCall,
    `payload is ${PayloadType[payload.payloadType] ?? payload.payloadType}, not a contract call`);
  const [contract] = opts.sbtc.split('::');
  const called = `${addressToString(payload.contractAddress)}.${payload.contractName.content}`;
  check(called === contract, `the call is to ${called}, not the token contract ${contract}`);
  check(payload.functionName.content === 'transfer', `the call is to ${payload.functionName.content}, not transfer`);
  const args = payload.functionArgs;
  check(args.length === 4, `transfer takes 4 arguments, the call has ${args.length}`);
  const [amount, from, to, memo] = args;
  check(amount.type === 'uint' && BigInt(amount.value) === opts.amount, `amount argument ${stringify(amount)}, expected u${opts.amount}`);
  check(from.type === 'address' && from.value === sender, `sender argument ${stringify(from)} is not the origin ${sender}`);
  check(to.type === 'address' && to.value === opts.address, `recipient argument ${stringify(to)}, expected ${opts.address}`);
  check(memo.type === 'none' || (memo.type === 'some' && memo.value.type === 'buffer'), `memo argument ${stringify(memo)} is not (optional (buff 34))`);
  check(tx.postConditionMode === PostConditionMode.Deny, `post-condition mode is ${PostConditionMode[tx.postConditionMode]}, not Deny`);
  const pcs = tx.postConditions.values.map(wireToPostCondition);
  check(pcs.length === 1, `${pcs.length} post-conditions, expected exactly one`, pcs);
  const pc = /** @type {any} */ (pcs[0]);
  check(pc.type === 'ft-postcondition' && pc.address === sender && pc.condition === 'eq' && BigInt(pc.amount) === opts.amount &&
    pc.asset === opts.sbtc, `post-condition ${stringify(pc)} is not "${sender} sends exactly ${opts.amount} of ${opts.sbtc}"`);
  return { recipient: to.value, amount: BigInt(amount.value) };
}

/**
 * @param {ReturnType<typeof createClient>} client
 * @param {ReturnType<typeof loadSchemas>} schemas
 * @param {{expectStatus: string, timeoutMs: number}} opts
 */
async function status(client, schemas, opts) {
  const started = performance.now();
  const { data, error, response } = await client.GET('/extended', { signal: AbortSignal.timeout(opts.timeoutMs) });
  log(`GET /extended → ${response.status} in ${(performance.now() - started).toFixed(1)} ms`);
  check(response.status === 200, `status answered HTTP ${response.status}: ${stringify(error ?? data)}`, error ?? data);
  checkJSONResponse(response, 'status');
  check(data, 'status answered 200 with an empty body');
  validateAgainst(schemas.status, data, 'status response (/extended)');
  check(data.status === opts.expectStatus, `status is ${stringify(data.status)}, expected ${stringify(opts.expectStatus)}`, data);
  if (data.status === 'ready') {
    check(data.chain_tip, 'status is ready but there is no chain_tip', data);
  }

  // Clients before v8 asked /extended/v1/status; the server answers there too. The v9 client's
  // typed paths only know /extended, so this call goes through the same client but untyped.
  const started2 = performance.now();
  const legacy = await client.GET(/** @type {'/extended'} */ (/** @type {unknown} */ ('/extended/v1/status')), {
    signal: AbortSignal.timeout(opts.timeoutMs),
  });
  log(`GET /extended/v1/status → ${legacy.response.status} in ${(performance.now() - started2).toFixed(1)} ms`);
  check(legacy.response.status === 200, `/extended/v1/status answered HTTP ${legacy.response.status}`, legacy.error ?? legacy.data);
  checkJSONResponse(legacy.response, '/extended/v1/status');
  check(legacy.data, '/extended/v1/status answered 200 with an empty body');
  validateAgainst(schemas.status, legacy.data, 'status response (/extended/v1/status)');
  check(legacy.data.status === data.status, `/extended/v1/status says ${stringify(legacy.data.status)}, /extended says ${stringify(data.status)}`);
  return data;
}

async function main() {
  const opts = parse();
  const schemas = loadSchemas();
  log(`${schemas.count} schemas loaded from ${TYPES_PKG}@${typesVersion} (${relative(process.cwd(), typesRoot) || '.'})`);
  const client = createClient({
    baseUrl: opts.faucet.href.replace(/\/+$/, ''),
    fetch: guardedFetch(opts.faucet),
    // A redirect would be followed inside fetch, past the origin guard; the API answers these
    // routes directly, so a redirect is an error here.
    redirect: 'error',
  });

  if (opts.statusOnly) {
    const body = await status(client, schemas, opts);
    return { ok: true, status: body };
  }
  const tx = await drip(client, schemas, /** @type {any} */ (opts));
  const body = await status(client, schemas, opts);
  return { ok: true, ...tx, status: body };
}

main().then(
  (summary) => {
    process.stdout.write(stringify(summary) + '\n');
    process.exit(0);
  },
  (err) => {
    let message = err instanceof Error ? err.message : String(err);
    // fetch() says only "fetch failed"; the reason (ECONNREFUSED, a timeout…) is in its cause.
    if (err instanceof Error && err.cause) message += `: ${err.cause instanceof Error ? err.cause.message : String(err.cause)}`;
    process.stdout.write(stringify({ ok: false, error: message }) + '\n');
    if (err instanceof Failure) {
      if (err.details !== undefined) {
        process.stderr.write(`e2e: FAIL: ${message}\n${typeof err.details === 'string' ? err.details : stringify(err.details)}\n`);
      } else {
        process.stderr.write(`e2e: FAIL: ${message}\n`);
      }
    } else {
      process.stderr.write(`e2e: FAIL: ${message}\n${err instanceof Error && err.stack ? err.stack + '\n' : ''}`);
    }
    process.exit(1);
  },
);
