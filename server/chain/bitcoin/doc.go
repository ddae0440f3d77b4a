// Package bitcoin is the Bitcoin wire format the faucet's BTC payouts are
// built on: test-network addresses, the faucet's own key, and signed
// P2WPKH payout transactions with their fees, dust rules and RBF bumps. It
// does no I/O; keeping coins, broadcasting and confirming are the caller's.
//
// Everything cryptographic and every encoding comes from btcd's libraries:
// chaincfg for network parameters, btcutil (base58, bech32/bech32m, WIF,
// address types), btcec/v2 for secp256k1 keys and ECDSA, wire for
// transaction serialisation and hashes, and txscript for output scripts,
// BIP-143 signature hashes, witness signing and the script engine that
// checks every input this package signs before it hands a transaction out.
// What is written here is policy: which addresses are accepted, fee and
// dust arithmetic, and coin selection.
//
// It refuses, everywhere: mainnet (as a network, an address or a WIF key),
// regtest's bech32 addresses (bcrt1…) on signet and testnet (base58 m/n/2
// addresses are shared by regtest, signet and testnet, and on regtest the
// tb1… form a wallet shows is taken too: all pay the same scripts), address
// types other than P2PKH,
// P2SH, P2WPKH, P2WSH and P2TR, uncompressed keys, dust and non-positive
// outputs, and payouts a single standard transaction cannot carry.
package bitcoin
