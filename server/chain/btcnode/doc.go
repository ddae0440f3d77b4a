// Package btcnode is a JSON-RPC client for a Bitcoin node, speaking the
// part of Bitcoin Core's and btcd's RPC that a BTC testnet faucet needs:
// the chain and its tip (getblockchaininfo, getblockcount,
// getbestblockhash, getblockhash), blocks and transactions (getblock,
// getrawtransaction, getrawmempool), broadcasting (sendrawtransaction),
// fee estimation (Core's estimatesmartfee, else btcd's estimatefee), the
// confirmed balance of any address (Core's scantxoutset, else btcd's
// searchrawtransactions with --addrindex) and,
// for tests, mining and reorgs (generate, generatetoaddress,
// invalidateblock, reconsiderblock).
//
// It depends on no Bitcoin library: blocks and transactions come back as
// the node's JSON view (inputs as outpoints, outputs as amount and
// scriptPubKey) plus the raw serialization, which the caller decodes with
// its own code when it needs more. BlockRaw (getblock verbosity 0) is the
// one read that works for a block that has left the main chain on both
// nodes; btcd's verbose getblock refuses such blocks (ErrNotInMainChain).
//
// Errors are typed:
//
//   - *RPCError: the node answered with a JSON-RPC error object; its Code
//     and the Is* helpers (IsAlreadyInChain, IsInsufficientFee, ...)
//     classify the cases a faucet acts on, across both nodes' wording;
//   - *AuthError: HTTP 401 or 403, wrong credentials;
//   - *HTTPError: any other non-2xx status without a JSON-RPC error body;
//   - *TransportError: no response at all (refused, reset, timeout);
//   - *ResponseError: a response that is not JSON-RPC as the node sends it.
//
// Some calls also wrap a sentinel for errors.Is: ErrBlockNotFound,
// ErrTxNotFound, ErrHeightOutOfRange, ErrNotInMainChain, ErrNoFeeEstimate,
// ErrMainChain, ErrNoAddressIndex. IsUnavailable tells "the node cannot
// serve us now" from "this request is wrong".
//
// Credentials (the URL's userinfo, or a file as Bitcoin Core's .cookie)
// are sent as HTTP Basic auth and never appear in errors, in URL() or in
// the names passed to the observer.
//
// The HTTP half (options, timeouts, auth, the transport, HTTP and response
// error types) is package rpcclient, shared with the Stacks client node.
package btcnode
