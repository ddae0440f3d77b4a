// Runs the devnode's token contract template
// (server/chain/devnode/contracts/token.clar.tmpl), rendered for each token
// below, in the real Clarity VM through @stacks/clarinet-sdk's simnet, over
// a fixed list of scenarios per token, and writes what happened as JSON for
// the Go test server/chain/devnode/clarity_test.go, which deploys the same
// tokens on a devnode, replays the same scenarios and expects the same
// outcomes.
//
//   node hack/clarity/outcomes.mjs --out bin/clarity-outcomes.json
//
// The simnet does not evaluate post-conditions (it has no transactions, only
// calls), so this script evaluates them as stacks-core's
// check_transaction_postconditions does, over the asset events the VM
// reported. When they fail the real chain rolls the call back; the simnet
// has already committed it, so the balances reported for such a scenario are
// the ones read just before the call. Every scenario uses its own principals,
// so that committed-but-aborted state never reaches another scenario.

import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { initSimnet } from "@stacks/clarinet-sdk";
import { Cl, ClarityVersion, cvToHex, cvToString, privateKeyToAddress } from "@stacks/transactions";

// The SDK logs the VM's print output and every failed call to the console;
// keep the console for this script's own summary and errors.
const report = console.error.bind(console);
console.log = console.info = console.warn = console.error = () => {};

const here = dirname(fileURLToPath(import.meta.url));
const templatePath = join(here, "../../server/chain/devnode/contracts/token.clar.tmpl");

// The deployment the devnode's rules are checked against: Clarity 3 in
// epoch 3.0, where the faucet's tokens live.
const EPOCH = "3.0";
const CLARITY_VERSION = ClarityVersion.Clarity3;

// The tokens, each the template rendered with its fields (the Go side's
// tokenFields): sBTC as the devnode deploys it by default, and a 6-decimal
// test stablecoin whose contract and token names differ.
const TOKENS = [
  { contractName: "sbtc-token", fields: { TokenName: "sbtc-token", Name: "sBTC", Symbol: "sBTC", Decimals: 8 } },
  { contractName: "tusd-token", fields: { TokenName: "tusd", Name: "Test USD", Symbol: "tUSD", Decimals: 6 } },
];

// render substitutes {{.Field}} as Go's text/template does for the plain
// field actions the template is limited to; anything else left is an error.
// The Go test compares the sha256 of each rendering with its own, so the
// two renderers cannot drift apart unnoticed.
function render(template, fields) {
  const out = template.replace(/\{\{\.([A-Za-z]+)\}\}/g, (action, field) => {
    if (!(field in fields)) throw new Error(`the template names ${action}, which the token lacks`);
    return String(fields[field]);
  });
  if (out.includes("{{")) throw new Error("the template holds an action other than {{.Field}}");
  return out;
}

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--out") out.out = argv[++i];
    else throw new Error(`unknown argument ${argv[i]} (usage: outcomes.mjs --out FILE)`);
  }
  if (!out.out) throw new Error("usage: outcomes.mjs --out FILE");
  return out;
}

// A fixed key per token, scenario and role, so the Go test can sign as any
// of them and the output is the same on every run.
function wallet(scenario, role) {
  const key = createHash("sha256").update(`faucet-operator clarity scenario ${scenario} ${role}`).digest("hex") + "01";
  return { key, address: privateKeyToAddress(key, "testnet") };
}

// The scenarios, run for every token. owner holds the minted tokens;
// recipient receives; other is a third principal. Amounts are small
// integers; mints name a role, an amount and a token ("token" is the one
// under test, "other" the next one in TOKENS); pcs name a principal
// ("origin" or a role), a code, an amount and an asset ("token", "other" or
// "STX").
const memo = Cl.bufferFromHex("6d656d6f"); // "memo"
const scenarios = [
  { name: "success-memo-some", amount: 100, memo: memo, pcs: [["owner", "eq", 100, "token"]] },
  { name: "success-memo-none", amount: 250, memo: null, pcs: [["owner", "eq", 250, "token"]] },
  { name: "success-memo-empty", amount: 1, memo: Cl.buffer(new Uint8Array()), pcs: [["origin", "gteq", 1, "token"]] },
  { name: "success-whole-balance", amount: 1000, memo: null, pcs: [["origin", "lteq", 1000, "token"]] },
  { name: "success-to-contract", amount: 5, memo: null, to: "contract", pcs: [["owner", "eq", 5, "token"]] },
  { name: "insufficient-balance", amount: 1001, memo: null, mode: "allow", pcs: [] },
  { name: "insufficient-balance-exact-pc", amount: 1001, memo: null, pcs: [["owner", "eq", 1001, "token"]] },
  { name: "wrong-sender", amount: 10, memo: null, txSender: "other", mode: "allow", pcs: [] },
  { name: "wrong-sender-deny", amount: 10, memo: null, txSender: "other", pcs: [["owner", "lteq", 10, "token"]] },
  { name: "zero-amount", amount: 0, memo: null, mode: "allow", pcs: [] },
  { name: "sender-is-recipient", amount: 10, memo: null, to: "owner", mode: "allow", pcs: [] },
  { name: "pc-deny-uncovered", amount: 100, memo: memo, pcs: [] },
  { name: "pc-deny-stx-only", amount: 100, memo: null, pcs: [["origin", "eq", 0, "STX"]] },
  { name: "pc-deny-wrong-amount", amount: 100, memo: memo, pcs: [["owner", "eq", 99, "token"]] },
  { name: "pc-deny-gt-fails", amount: 100, memo: null, pcs: [["origin", "gt", 100, "token"]] },
  { name: "pc-deny-lt-holds", amount: 100, memo: null, pcs: [["origin", "lt", 101, "token"]] },
  { name: "pc-deny-recipient-only", amount: 100, memo: null, pcs: [["recipient", "eq", 0, "token"]] },
  { name: "pc-allow-uncovered", amount: 100, memo: memo, mode: "allow", pcs: [] },
  { name: "pc-allow-violated", amount: 100, memo: null, mode: "allow", pcs: [["origin", "lteq", 50, "token"]] },
  { name: "mint-not-deployer", fn: "mint", amount: 10, txSender: "other", mode: "deny", pcs: [] },
  // Two tokens held: a condition names an asset, not a contract's only one.
  { name: "pc-deny-other-token-only", amount: 100, memo: null, mints: [["owner", 1000, "token"], ["owner", 500, "other"]], pcs: [["owner", "eq", 0, "other"]] },
  { name: "pc-deny-both-tokens", amount: 100, memo: null, mints: [["owner", 1000, "token"], ["owner", 500, "other"]], pcs: [["owner", "eq", 100, "token"], ["owner", "eq", 0, "other"]] },
  { name: "pc-deny-other-token-violated", amount: 100, memo: null, mints: [["owner", 1000, "token"], ["owner", 500, "other"]], pcs: [["owner", "eq", 100, "token"], ["owner", "gteq", 1, "other"]] },
];

// stacks-core's FungibleConditionCode::check.
const holds = { eq: (a, s) => s === a, gt: (a, s) => s > a, gteq: (a, s) => s >= a, lt: (a, s) => s < a, lteq: (a, s) => s <= a };

// check_transaction_postconditions over the VM's events: each condition on
// the amount its principal sent of its asset, then in Deny mode every asset
// any principal sent must be named by a condition on that principal.
function postConditionsHold(pcs, mode, origin, events) {
  const sent = new Map(); // principal → asset → bigint
  const add = (p, a, n) => {
    if (!sent.has(p)) sent.set(p, new Map());
    sent.get(p).set(a, (sent.get(p).get(a) ?? 0n) + n);
  };
  for (const e of events) {
    if (e.event === "ft_transfer_event") add(e.data.sender, e.data.asset_identifier, BigInt(e.data.amount));
    if (e.event === "stx_transfer_event") add(e.data.sender, "STX", BigInt(e.data.amount));
    if (e.event === "stx_burn_event") add(e.data.sender, "STX", BigInt(e.data.amount));
  }
  const checked = new Set();
  for (const pc of pcs) {
    const principal = pc.principal === "origin" ? origin : pc.principal;
    const amount = sent.get(principal)?.get(pc.asset) ?? 0n;
    if (!holds[pc.code](BigInt(pc.amount), amount)) return false;
    checked.add(`${principal} ${pc.asset}`);
  }
  if (mode === "deny") {
    for (const [principal, assets] of sent) {
      for (const [asset, amount] of assets) {
        if (amount > 0n && !checked.has(`${principal} ${asset}`)) return false;
      }
    }
  }
  return true;
}

// The events as the Go test compares them.
function normaliseEvents(events) {
  return events.map((e) => {
    switch (e.event) {
      case "ft_transfer_event":
        return { type: "ft_transfer_event", asset: e.data.asset_identifier, sender: e.data.sender, recipient: e.data.recipient, amount: String(e.data.amount) };
      case "ft_mint_event":
        return { type: "ft_mint_event", asset: e.data.asset_identifier, recipient: e.data.recipient, amount: String(e.data.amount) };
      case "print_event":
        return { type: "contract_event", contract: e.data.contract_identifier, value: e.data.raw_value };
      default:
        throw new Error(`unexpected event ${e.event}`);
    }
  });
}

// The VM error text inside the simnet's exception, which is what the node's
// call-read answers as its cause.
function vmError(err) {
  const m = /: (RuntimeCheck\(.*\))$/s.exec(String(err?.message ?? err));
  if (!m) throw new Error(`no VM error in: ${err?.message ?? err}`);
  return m[1];
}

function readOnly(simnet, contractName, fn, args, sender) {
  const call = { contract: `${simnet.deployer}.${contractName}`, function: fn, args: args.map(cvToHex), sender };
  try {
    const r = simnet.callReadOnlyFn(contractName, fn, args, sender);
    return { ...call, okay: true, result: cvToHex(r.result) };
  } catch (err) {
    return { ...call, okay: false, cause: vmError(err) };
  }
}

// deploy renders and deploys every token, returning each with its ids.
function deploy(simnet, template) {
  const deployer = simnet.deployer;
  return TOKENS.map((t) => {
    const source = render(template, t.fields);
    const r = simnet.deployContract(t.contractName, source, { clarityVersion: CLARITY_VERSION }, deployer);
    if (r.result.type !== "true") throw new Error(`deploying ${t.contractName}: ${cvToString(r.result)}`);
    if (simnet.getContractSource(t.contractName) !== source) throw new Error(`the simnet did not deploy ${t.contractName} as rendered`);
    const contract = `${deployer}.${t.contractName}`;
    return {
      ...t,
      contract,
      asset: `${contract}::${t.fields.TokenName}`,
      clarityVersion: simnet.getContractsInterfaces().get(contract).clarity_version,
      sourceSha256: createHash("sha256").update(source).digest("hex"),
    };
  });
}

// runScenario mints, makes the scenario's call of token (other is the
// second token) and records what the VM did.
function runScenario(simnet, tokens, token, other, s) {
  const deployer = simnet.deployer;
  const id = `${token.contractName} ${s.name}`;
  const w = { owner: wallet(id, "owner"), recipient: wallet(id, "recipient"), other: wallet(id, "other") };
  const owner = w.owner.address;
  const recipient = s.to === "owner" ? owner : s.to === "contract" ? token.contract : w.recipient.address;
  const txSender = w[s.txSender ?? "owner"].address;
  const mode = s.mode ?? "deny";
  const pick = (what) => (what === "token" ? token : other);

  const mints = (s.mints ?? [["owner", 1000, "token"]]).map(([who, amount, what]) => {
    const t = pick(what);
    const m = simnet.callPublicFn(t.contractName, "mint", [Cl.uint(amount), Cl.principal(w[who].address)], deployer);
    if (cvToString(m.result) !== "(ok true)") throw new Error(`${id}: setup mint: ${cvToString(m.result)}`);
    return { asset: t.asset, recipient: w[who].address, amount: String(amount) };
  });

  const fn = s.fn ?? "transfer";
  const args =
    fn === "mint"
      ? [Cl.uint(s.amount), Cl.principal(txSender)]
      : [Cl.uint(s.amount), Cl.principal(owner), Cl.principal(recipient), s.memo ? Cl.some(s.memo) : Cl.none()];
  const pcs = s.pcs.map(([who, code, amount, what]) => ({
    principal: who === "origin" ? "origin" : w[who].address,
    code,
    amount: String(amount),
    asset: what === "STX" ? "STX" : pick(what).asset,
  }));

  // Every token's balances and reads, so that a call of one token is seen
  // to leave the others alone.
  const watched = [owner, w.recipient.address, w.other.address, ...(s.to === "contract" ? [token.contract] : [])];
  const reads = () =>
    tokens.flatMap((t) => [
      ...watched.map((p) => readOnly(simnet, t.contractName, "get-balance", [Cl.principal(p)], deployer)),
      readOnly(simnet, t.contractName, "get-total-supply", [], deployer),
    ]);
  // The VM's own ledger, beside what get-balance answers.
  const balances = () =>
    Object.fromEntries(
      tokens.map((t) => {
        const ledger = simnet.getAssetsMap().get(`.${t.contractName}.${t.fields.TokenName}`) ?? new Map();
        return [t.asset, Object.fromEntries(watched.map((p) => [p, String(ledger.get(p) ?? 0n)]))];
      }),
    );
  const before = reads();
  const balancesBefore = balances();
  const r = simnet.callPublicFn(token.contractName, fn, args, txSender);
  const ok = r.result.type === "ok";
  const pcsHold = postConditionsHold(pcs, mode, txSender, ok ? r.events : []);
  const committed = ok && pcsHold;
  return {
    token: token.asset,
    name: s.name,
    wallets: w,
    mints,
    txSender,
    function: fn,
    args: args.map(cvToHex),
    postConditionMode: mode,
    postConditions: pcs,
    outcome: {
      result: cvToHex(r.result),
      resultRepr: cvToString(r.result),
      abortedByPostCondition: !pcsHold,
      // Rolled-back calls emit no events (stacks-core's event dispatcher
      // sends none for a post-condition abort; an err result has none).
      events: committed ? normaliseEvents(r.events) : [],
      balances: committed ? balances() : balancesBefore,
      reads: committed ? reads() : before,
    },
  };
}

async function main() {
  const { out } = parseArgs(process.argv.slice(2));
  const template = readFileSync(templatePath, "utf8");
  const simnet = await initSimnet(join(here, "Clarinet.toml"));
  simnet.setEpoch(EPOCH);
  const tokens = deploy(simnet, template);

  const results = [];
  tokens.forEach((token, i) => {
    const other = tokens[(i + 1) % tokens.length];
    for (const s of scenarios) results.push(runScenario(simnet, tokens, token, other, s));
  });

  const someone = wallet("read-only", "caller").address;
  const readOnlyCalls = tokens.flatMap((t) => [
    readOnly(simnet, t.contractName, "get-name", [], someone),
    readOnly(simnet, t.contractName, "get-symbol", [], someone),
    readOnly(simnet, t.contractName, "get-decimals", [], someone),
    readOnly(simnet, t.contractName, "get-token-uri", [], someone),
    readOnly(simnet, t.contractName, "get-total-supply", [], someone),
    readOnly(simnet, t.contractName, "get-balance", [Cl.principal(someone)], someone),
    readOnly(simnet, t.contractName, "get-balance", [Cl.principal(t.contract)], someone),
    readOnly(simnet, t.contractName, "get-balance", [Cl.uint(1)], someone),
    readOnly(simnet, t.contractName, "get-balance", [Cl.stringAscii('say "hi"')], someone),
    readOnly(simnet, t.contractName, "get-balance", [Cl.some(Cl.int(-3))], someone),
    readOnly(simnet, t.contractName, "get-balance", [], someone),
    readOnly(simnet, t.contractName, "get-name", [Cl.uint(1)], someone),
  ]);

  const doc = {
    generator: "hack/clarity/outcomes.mjs",
    clarinetSdk: JSON.parse(readFileSync(join(here, "node_modules/@stacks/clarinet-sdk/package.json"), "utf8")).version,
    epoch: simnet.currentEpoch,
    deployer: simnet.deployer,
    tokens: tokens.map((t) => ({
      contract: t.contract,
      asset: t.asset,
      name: t.fields.Name,
      symbol: t.fields.Symbol,
      decimals: t.fields.Decimals,
      clarityVersion: t.clarityVersion,
      sourceSha256: t.sourceSha256,
    })),
    scenarios: results,
    readOnly: readOnlyCalls,
  };
  writeFileSync(out, JSON.stringify(doc, null, 2) + "\n");
  report(`clarity outcomes: ${tokens.length} tokens, ${results.length} scenarios, ${readOnlyCalls.length} read-only calls → ${out}`);
}

main().catch((err) => {
  report(err);
  process.exit(1);
});
