// Package devnode is a simulated Stacks node (stacks-core) for tests and for
// `faucet serve --devnet`: the one stand-in for a real node, since none can
// run here. It serves the RPC subset a faucet uses on the real wire format,
// and its mempool enforces the real admission rules in the real order, so a
// client that works against devnode should work against stacks-core.
//
// Routes (anything else, including a known path with another method, is 404
// text/plain "No such file or directory", exactly like stacks-core, which
// looks handlers up by method and path together):
//
//	GET  /v2/info                          node.Info
//	GET  /v2/pox                           node.PoXInfo (regtest cycle lengths; pox-4 in Epoch30,
//	                                       or as a 4.x node pox-5 in Epoch40 with pox_5_sbtc_*)
//	GET  /v2/accounts/{principal}          node.Account (+ placeholder proofs unless ?proof=0)
//	POST /v2/transactions                  txid string, or 400 rejection JSON / decode text
//	GET  /v2/fees/transfer                 bare integer (µSTX per byte)
//	POST /v2/fees/transaction              node.FeeEstimate, or 400 NoEstimateAvailable JSON / decode text
//	GET  /v2/transactions/unconfirmed/{id} {"tx":hex,"status":"Mempool"} or 404
//	GET  /v3/transaction/{id}              node.MinedTx for a mined tx, else 404; 501 with Config.NoTxIndex
//	POST /v2/contracts/call-read/{address}/{contract}/{function}
//	                                       CallReadResponse {"okay":true,"result":"0x…"} or
//	                                       {"okay":false,"cause":…}; 400 text for a bad request
//
// Admission order (stacks-core MemPoolDB::submit → will_admit_mempool_tx →
// try_add_tx): already-known txid (200, nothing stored) → tx version vs
// network → recipient ≠ sender → amount > 0 → recipient address version →
// signature (incl. high-S) → chain id → fee ≥ tx length → nonce (BadNonce /
// TooMuchChaining) → funds (a contract call: the fee only) → contract-call
// payload (address version, contract, function, arguments) → same-nonce
// conflict or replace-by-fee.
//
// Deliberate fidelity choices worth knowing:
//
//   - NotEnoughFunds compares amount+fee with the confirmed balance net of
//     the sender's other pending spends. stacks-core checks the confirmed
//     balance only, admits overspending chains and drops the tx that can no
//     longer pay at mining; Config.ConfirmedBalanceOnly reproduces that.
//   - Like the real MemPoolDB, mined txs stay in the mempool table until
//     garbage collection (256 blocks after they were received): re-posting a
//     mined tx answers 200 with its txid, and /v2/transactions/unconfirmed
//     still reports it as "Mempool". MempoolSize and TxStatus count only
//     txs that are really pending.
//   - Account proofs are placeholders (hex of a hash), not MARF proofs. As on
//     the real node, a proof is "" when the key was never written (an
//     unknown account's balance, or the nonce of an account that never sent).
//   - Only what stacks.DecodeTransaction understands decodes: single-sig
//     standard-auth STX transfers and contract calls, with STX and
//     fungible-token post-conditions. Other valid transactions (sponsored, multisig, other
//     payloads or post-conditions) are answered like undecodable ones, 400
//     "Failed to decode: Failed to deserialize posted transaction: …".
//   - The contracts that can exist are send-many-memo at
//     Config.SendManyContract ("" deploys none) and any number of SIP-010
//     tokens, one per Config.Tokens entry (Config.TokenAsset is a shorthand
//     for one sBTC), each the template contracts/token.clar.tmpl rendered
//     with its token name, display name, symbol and decimals
//     (TokenContractSource). A contract call passes the same checks as a
//     transfer except that, as in can_include_tx, the balance must cover
//     only the fee; then the contract address version
//     (BadAddressVersionByte), the contract (NoSuchContract), the function
//     (send-many or send-stx-with-memo; transfer or mint: a token's
//     read-only getters are not public functions, so NoSuchPublicFunction)
//     and the arguments
//     (BadFunctionArgument) are checked. Its message is exact for
//     IncorrectArgumentCount(expected, got); for a TypeError the expected
//     type is exact and the actual type's Rust Debug form is approximated
//     (a list's entry type is its first element's type).
//   - Mining a contract call pays the fee first (epoch 2.1+ order) and
//     drops the call only if the fee is unpayable. The transfers then run
//     in order; the first failing stx-transfer? ((err u1) balance, (err u2)
//     sender = recipient, (err u3) zero amount) is the result and rolls the
//     whole batch back. STX post-conditions are then checked against what
//     the origin sent (Deny mode also aborts on uncovered outflow); a
//     failure rolls back too but, like stacks-core's condition-aborted
//     receipt, keeps the would-have-been result, so /v3/transaction may
//     show "(ok true)" for an aborted call: Node.TxAborted tells, and
//     Node.TxPostConditionFailure gives the receipt's reason. Either way the
//     fee is charged and the nonce advances. For the stricter
//     NotEnoughFunds accounting a pending call spends its batch total plus
//     fee. Costs are not modelled.
//   - The token contracts are not interpreted: token.go implements the
//     template's rules for every token, and hack/clarity checks them
//     against the real Clarity VM for two tokens of different names,
//     symbols and decimals (make test-clarity; TestClarityOutcomes). Tokens
//     are independent: a call moves only its own token, and mint is its own
//     contract's deployer's. A mined transfer
//     returns (err u4) unless its sender argument is the tx sender (as
//     sbtc-token, which also accepts contract-caller: the same principal
//     for a call from a transaction), then ft-transfer?'s (err u3) zero
//     amount, (err u2) sender = recipient, (err u1) beyond the balance;
//     mint returns (err u5) unless the tx sender is the contract's address,
//     then ft-mint?'s (err u1) for zero. An err result moves nothing and
//     still pays the fee.
//   - Post-conditions (STX and fungible) are checked like stacks-core's
//     check_transaction_postconditions over what the call moved per
//     principal and asset: every condition must hold for what its principal
//     sent (0 after an err result) and, in Deny mode, every asset a
//     principal sent must be named by a condition on that principal; Allow
//     mode checks only the listed ones. The Originator mode of newer nodes
//     and non-fungible conditions do not decode.
//   - Events exist only as Node.TxEvents (the real node sends them to event
//     observers, not over RPC): a token's ft_transfer_event,
//     ft_mint_event and the memo's print (contract_event). STX transfers and
//     send-many's prints have none, and, as the event dispatcher does, a
//     rolled-back call has none.
//   - Token amounts are kept in 64 bits where Clarity has 128: a transfer
//     of more than 2^64-1 is (err u1) as on the node, but a mint beyond
//     that saturates, as do balances and the supply.
//   - POST /v2/contracts/call-read follows callreadonly.rs: the 400 texts
//     (body length, content type, address, function, JSON body as serde
//     reads it: case-sensitive keys, no duplicates, sender and arguments
//     required; sender, sponsor, hex arguments with or without 0x) are
//     exact; chunked bodies count as length 0, as the node has no length.
//     Each token's getters answer from the confirmed state at the tip;
//     transfer and mint answer their err when the caller is not the owner
//     or deployer and "NotReadOnly" otherwise (the node's read-only calls
//     may not write). Causes are the VM error's Display, e.g.
//     RuntimeCheck(NoSuchContract("…")), RuntimeCheck(UndefinedFunction
//     ("…")), RuntimeCheck(IncorrectArgumentCount(1, 0)),
//     RuntimeCheck(TypeValueError(PrincipalType, "UInt(1)")); a value's
//     Debug form is exact except for lists' and tuples' type signatures.
//     send-many-memo's public functions are not executed: their cause says
//     so.
//   - /v3/transaction reports a transfer's result as "(ok true)": Mine drops
//     a transfer that cannot pay amount+fee, whereas stacks-core mines one
//     that can still pay its fee with result "(err u1)" (stx_transfer's
//     NOT_ENOUGH_BALANCE). Mined txs stay in that index forever, as in the
//     node's txindex table, while the mempool table is garbage-collected.
//   - POST /v2/fees/transaction approximates the node's cost estimator,
//     which is not modelled. The payload must decode (token transfer or
//     contract call, as above; 0x allowed). With L = max(estimated_len,
//     payload length + 115), where 115 bytes is the header, single-sig
//     auth and empty post-condition list of a standard tx (the real node
//     uses max(estimated_len, payload length), so without estimated_len the
//     devnode answers higher, never below the mempool's fee ≥ tx length
//     for a tx without post-conditions), the low, middle and high
//     estimations have fee_rate = 1, 1.5 and 2 × the fee-rate setting
//     (Config.FeeRate / SetFeeRate) and fee = max(⌈fee_rate × L⌉, L), the
//     node's floor of estimated_len × 1 µSTX. estimated_cost is all zeros,
//     estimated_cost_scalar is L and cost_scalar_change_by_byte is the
//     default metric's 10000/2 MiB. SetNoFeeEstimate(true) makes it answer
//     400 {"error":"Estimation could not be performed","reason":
//     "NoEstimateAvailable",…} like a node whose estimator has no data yet.
//     The content type must be application/json; other decode-error texts
//     are approximate.
//   - /v2/pox is a 3.x node's unless Config.PoXSBTCContract is set: then
//     the node answers as a 4.x node past Epoch 4.0 (getpoxinfo.rs at
//     4.0.2): contract_id pox-5, a fifth contract_versions entry, epochs
//     3.1 to 3.4 and 4.0 (Epoch40 from burn height 202, before genesis),
//     /v2/info's peer_version with network epoch 0x10, PoX-5's flat
//     50,000 STX minimum (Pox5MinAmountUstx) unless Config.MinAmountUstx
//     says otherwise, and
//     pox_5_sbtc_contract naming the configured contract with
//     pox_5_sbtc_registry_contract its deployer's sbtc-registry (the real
//     node takes both from its configuration; in mainnet mode, the fixed
//     SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4 contracts). A 3.x node
//     sends neither field. The announced contract need not be deployed,
//     as on a real node.
//   - ?tip= is accepted and ignored: reads always use the canonical tip.
//   - Fees leave the supply: there is no miner account to credit them to.
//   - One Stacks block per burn block and per tenure, so stacks_tip_height,
//     burn_block_height and tenure_height all advance by one per block.
//
// The Node is a facade over parts, each holding only its own state: the
// chain (blocks, txindex, mining: chain.go, mine.go), the ledger (balances
// and nonces: ledger.go, past.go), the mempool (admission: mempool.go),
// the contracts (send-many and the tokens: contracts.go, sendmany.go,
// token.go, callread.go), the fault knobs (faults.go) and the RPC front
// (rpc.go, fees.go, pox.go, callread.go; FrontEnd in frontend.go). The
// chain state of the first four is behind one lock they share, as a block
// or an admission changes them together; the fault knobs (SetLatency,
// SetErrorRate, SetDropRate, SetDown, SetMainnet, SetSynced,
// SetNoFeeEstimate, …) have their own and may be flipped while requests
// are being served. Block times, Run's ticker and the injected latency run
// on Config.Clock, so a test can step them with a fake clock.
package devnode
