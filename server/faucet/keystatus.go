package faucet

// KeyStatus is a point-in-time view of one key, for metrics and readiness.
type KeyStatus struct {
	Address        string
	Balance        uint64 // confirmed µSTX
	Available      uint64 // balance minus in-flight spends and reserve
	ConfirmedNonce uint64
	NextNonce      uint64
	InFlight       int
	Dry            bool
	Synced         bool
	// Owned: this replica sends with the key (always true unless replicas share the store).
	Owned bool
	// Tokens are the key's balances of the tokens read so far, in base
	// units: confirmed, and beyond in-flight transfers; Known is false
	// until a read succeeded.
	Tokens map[Asset]TokenBalance
}

// TokenBalance is a key's balance of one token.
type TokenBalance struct {
	Balance, Available uint64
	Known              bool
}

func (k *keyState) status(reserve uint64) KeyStatus {
	k.mu.Lock()
	defer k.mu.Unlock()
	return KeyStatus{
		Address:        k.addr.String(),
		Balance:        k.balance,
		Available:      k.available(reserve),
		ConfirmedNonce: k.confirmed,
		NextNonce:      k.nextNonce(),
		InFlight:       k.inFlight(),
		Dry:            k.dry,
		Synced:         k.synced,
		Owned:          k.owned,
		Tokens:         k.tokenStatuses(),
	}
}

// tokenStatuses reports the key's token balances. Caller holds mu.
func (k *keyState) tokenStatuses() map[Asset]TokenBalance {
	if len(k.tokens) == 0 {
		return nil
	}
	out := make(map[Asset]TokenBalance, len(k.tokens))
	for a, b := range k.tokens {
		out[a] = TokenBalance{Balance: b.balance, Available: k.tokenAvailable(a), Known: b.known}
	}
	return out
}

// fundingOf sums what the keys this replica owns and has synced can
// spend, and how many drips of cost that pays on those not dry (Funding).
func fundingOf(keys []KeyStatus, cost uint64) Funding {
	var out Funding
	for _, s := range keys {
		if !s.Owned || !s.Synced {
			continue
		}
		out.Keys++
		out.Available = satAdd(out.Available, s.Available)
		if !s.Dry {
			out.DripsLeft = satAdd(out.DripsLeft, s.Available/cost)
		}
	}
	return out
}
