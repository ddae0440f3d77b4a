package stacks

import (
	"bytes"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
)

// Signature verification errors; the node reports all of them as
// SignatureValidation.
var (
	ErrBadSignature = errors.New("bad signature")
	ErrHighS        = errors.New("signature S value is not canonical (high-S)")
)

// compactHeaderBase is the offset decred adds to the recovery id in its
// compact (Bitcoin message) signature format; +4 marks a compressed key.
const compactHeaderBase = 27

// InitialSigHash is the hash of the transaction with its spending condition
// cleared (nonce, fee and signature zeroed), the starting point for signing.
func (tx *Transaction) InitialSigHash() [32]byte {
	c := *tx
	c.Auth.Nonce, c.Auth.Fee = 0, 0
	c.Auth.Signature = [SignatureLen]byte{}
	return sha512.Sum512_256(c.Serialize())
}

// PreSignSigHash binds the auth type, fee and nonce to the initial sighash;
// it is what the origin key signs.
func (tx *Transaction) PreSignSigHash() [32]byte {
	init := tx.InitialSigHash()
	var b [32 + 1 + 8 + 8]byte
	copy(b[:], init[:])
	b[32] = AuthTypeStandard
	binary.BigEndian.PutUint64(b[33:], tx.Auth.Fee)
	binary.BigEndian.PutUint64(b[41:], tx.Auth.Nonce)
	return sha512.Sum512_256(b[:])
}

// Sign sets the signer, key encoding and signature for key. RFC 6979 makes
// the signature deterministic and decred's SignCompact always yields low S.
func (tx *Transaction) Sign(key *PrivateKey) error {
	if key == nil {
		return errors.New("sign transaction: no key")
	}
	tx.Auth.HashMode = HashModeP2PKH
	tx.Auth.Signer = Hash160(key.pub)
	tx.Auth.KeyEncoding = key.KeyEncoding()
	tx.Auth.Signature = [SignatureLen]byte{}
	hash := tx.PreSignSigHash()
	compact := ecdsa.SignCompact(key.key, hash[:], key.compressed)
	// decred: [27 + recid (+4 if compressed)] ‖ r ‖ s; Stacks: [recid] ‖ r ‖ s.
	recID := compact[0] - compactHeaderBase
	if key.compressed {
		recID -= 4
	}
	tx.Auth.Signature[0] = recID
	copy(tx.Auth.Signature[1:], compact[1:])
	return nil
}

// Verify recovers the public key from the signature and checks that it hashes
// to the signer, that S is low, and that the key encoding matches.
func (tx *Transaction) Verify() error {
	sig := tx.Auth.Signature
	recID := sig[0]
	if recID > 3 {
		return fmt.Errorf("%w: recovery id %d out of range 0..3", ErrBadSignature, recID)
	}
	var s secp256k1.ModNScalar
	if overflow := s.SetByteSlice(sig[33:65]); overflow {
		return fmt.Errorf("%w: S out of range", ErrBadSignature)
	}
	// A high-S signature is malleable; the node's mempool refuses it.
	if s.IsOverHalfOrder() {
		return ErrHighS
	}
	compressed := tx.Auth.KeyEncoding == KeyEncodingCompressed
	var compact [SignatureLen]byte
	compact[0] = compactHeaderBase + recID
	if compressed {
		compact[0] += 4
	}
	copy(compact[1:], sig[1:])
	hash := tx.PreSignSigHash()
	pub, _, err := ecdsa.RecoverCompact(compact[:], hash[:])
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	var pubBytes []byte
	if compressed {
		pubBytes = pub.SerializeCompressed()
	} else {
		pubBytes = pub.SerializeUncompressed()
	}
	if h := Hash160(pubBytes); !bytes.Equal(h[:], tx.Auth.Signer[:]) {
		return fmt.Errorf("%w: recovered key does not match the signer", ErrBadSignature)
	}
	return nil
}
