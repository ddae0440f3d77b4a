// Runs the devnode's token contract (server/chain/devnode/contracts/token.clar)
// in the real Clarity VM, through @stacks/clarinet-sdk's simnet, over a fixed
// list of scenarios, and writes what happened as JSON for the Go test
// server/chain/devnode/clarity_test.go, which replays the same scenarios on
// the devnode and expects the same outcomes.
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
import { Cl, cvToHex, cvToString, privateKeyToAddress } from "@stacks/transactions";

// The SDK logs the VM's print output and every failed call to the console;
// keep the console for this script's own summary and errors.
const report = console.error.bind(console);
console.log = console.info = console.warn = console.error = () => {};

const here = dirname(fileURLToPath(import.meta.url));
const contractPath = join(here, "../../server/chain/devnode/contracts/token.clar");
const CONTRACT_NAME = "sbtc-token"; // Clarinet.toml deploys the source under this name
const TOKEN = "sbtc-token"; // its define-fungible-token

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--out") out.out = argv[++i];
    else throw new Error(`unknown argument ${argv[i]} (usage: outcomes.mjs --out FILE)`);
  }
  if (!out.out) throw new Error("usage: outcomes.mjs --out FILE");
  return out;
}

// A fixed key per scenario and role, so the Go test can sign as any of them
// and the output is the same on every run.
function wallet(scenario, role) {
  const key = createHash("sha256").update(`faucet-operator clarity scenario ${scenario} ${role}`).digest("hex") + "01";
  return { key, address: privateKeyToAddress(key, "testnet") };
}

// The scenarios. owner holds the minted tokens; recipient receives; other is
// a third principal. Amounts are small integers; pcs name a principal
// ("origin" or a role) and an asset ("token" or "STX").
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

function readOnly(simnet, fn, args, sender) {
  try {
    const r = simnet.callReadOnlyFn(CONTRACT_NAME, fn, args, sender);
    return { function: fn, args: args.map(cvToHex), sender, okay: true, result: cvToHex(r.result) };
  } catch (err) {
    return { function: fn, args: args.map(cvToHex), sender, okay: false, cause: vmError(err) };
  }
}

async function main() {
  const { out } = parseArgs(process.argv.slice(2));
  const source = readFileSync(contractPath, "utf8");
  const simnet = await initSimnet(join(here, "Clarinet.toml"));
  const deployer = simnet.deployer;
  const contract = `${deployer}.${CONTRACT_NAME}`;
  const asset = `${contract}::${TOKEN}`;
  if (simnet.getContractSource(CONTRACT_NAME) !== source) throw new Error("the simnet did not deploy token.clar as it is on disk");

  const results = [];
  for (const s of scenarios) {
    const w = { owner: wallet(s.name, "owner"), recipient: wallet(s.name, "recipient"), other: wallet(s.name, "other") };
    const owner = w.owner.address;
    const recipient = s.to === "owner" ? owner : s.to === "contract" ? contract : w.recipient.address;
    const txSender = w[s.txSender ?? "owner"].address;
    const mode = s.mode ?? "deny";

    const mint = simnet.callPublicFn(CONTRACT_NAME, "mint", [Cl.uint(1000), Cl.principal(owner)], deployer);
    if (cvToString(mint.result) !== "(ok true)") throw new Error(`${s.name}: setup mint: ${cvToString(mint.result)}`);

    const fn = s.fn ?? "transfer";
    const args =
      fn === "mint"
        ? [Cl.uint(s.amount), Cl.principal(txSender)]
        : [Cl.uint(s.amount), Cl.principal(owner), Cl.principal(recipient), s.memo ? Cl.some(s.memo) : Cl.none()];
    const pcs = s.pcs.map(([who, code, amount, what]) => ({
      principal: who === "origin" ? "origin" : w[who].address,
      code,
      amount: String(amount),
      asset: what === "token" ? asset : "STX",
    }));

    const watched = [owner, w.recipient.address, w.other.address, ...(s.to === "contract" ? [contract] : [])];
    const reads = () => [
      ...watched.map((p) => readOnly(simnet, "get-balance", [Cl.principal(p)], deployer)),
      readOnly(simnet, "get-total-supply", [], deployer),
    ];
    // The VM's own ledger, beside what get-balance answers.
    const balances = () => {
      const ledger = simnet.getAssetsMap().get(`.${CONTRACT_NAME}.${TOKEN}`) ?? new Map();
      return Object.fromEntries(watched.map((p) => [p, String(ledger.get(p) ?? 0n)]));
    };
    const before = reads();
    const balancesBefore = balances();
    const r = simnet.callPublicFn(CONTRACT_NAME, fn, args, txSender);
    const ok = r.result.type === "ok";
    const pcsHold = postConditionsHold(pcs, mode, txSender, ok ? r.events : []);
    const committed = ok && pcsHold;
    results.push({
      name: s.name,
      wallets: w,
      mints: [{ recipient: owner, amount: "1000" }],
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
    });
  }

  const someone = wallet("read-only", "caller").address;
  const readOnlyCalls = [
    readOnly(simnet, "get-name", [], someone),
    readOnly(simnet, "get-symbol", [], someone),
    readOnly(simnet, "get-decimals", [], someone),
    readOnly(simnet, "get-token-uri", [], someone),
    readOnly(simnet, "get-total-supply", [], someone),
    readOnly(simnet, "get-balance", [Cl.principal(someone)], someone),
    readOnly(simnet, "get-balance", [Cl.principal(contract)], someone),
    readOnly(simnet, "get-balance", [Cl.uint(1)], someone),
    readOnly(simnet, "get-balance", [Cl.stringAscii('say "hi"')], someone),
    readOnly(simnet, "get-balance", [Cl.some(Cl.int(-3))], someone),
    readOnly(simnet, "get-balance", [], someone),
    readOnly(simnet, "get-name", [Cl.uint(1)], someone),
  ];

  const doc = {
    generator: "hack/clarity/outcomes.mjs",
    clarinetSdk: JSON.parse(readFileSync(join(here, "node_modules/@stacks/clarinet-sdk/package.json"), "utf8")).version,
    epoch: simnet.currentEpoch,
    contractSha256: createHash("sha256").update(source).digest("hex"),
    deployer,
    asset,
    scenarios: results,
    readOnly: readOnlyCalls,
  };
  writeFileSync(out, JSON.stringify(doc, null, 2) + "\n");
  report(`clarity outcomes: ${results.length} scenarios, ${readOnlyCalls.length} read-only calls → ${out}`);
}

main().catch((err) => {
  report(err);
  process.exit(1);
});
