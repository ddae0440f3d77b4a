// Package stacks is the Stacks wire format the faucet signs and reads:
// c32 addresses and principals, secp256k1 keys, Clarity values, and
// token-transfer and contract-call transactions (including send-many
// batches) with their post-conditions, serialised and signed byte for byte
// as @stacks/transactions does. It does no I/O.
package stacks
