package v1alpha1

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Helpers that read a FaucetServer's spec with its defaults applied. They
// live beside the types so that the controller, its tests and the CLI read
// the spec one way.

// StoreKind is the kind of store fs runs with: StorePostgres when
// spec.store.postgres is set, else StoreEmbedded (the CRD defaults an
// omitted spec.store to the embedded one).
func (fs *FaucetServer) StoreKind() string {
	if fs.Spec.Store != nil && fs.Spec.Store.Postgres != nil {
		return StorePostgres
	}
	return StoreEmbedded
}

// NodeURLs are the Stacks nodes the faucet uses: spec.node.urls, or
// spec.node.url alone.
func (n NodeSpec) NodeURLs() []string {
	if len(n.URLs) > 0 {
		return slices.Clone(n.URLs)
	}
	if n.URL == "" {
		return nil
	}
	return []string{n.URL}
}

// RPCURLs are the Bitcoin nodes the BTC faucet uses: rpc.urls, or rpc.url
// alone.
func (r BTCRPCSpec) RPCURLs() []string {
	if len(r.URLs) > 0 {
		return slices.Clone(r.URLs)
	}
	if r.URL == "" {
		return nil
	}
	return []string{r.URL}
}

// KeySecretKey selects the Secret data key that holds the private keys.
func (fs *FaucetServer) KeySecretKey() *corev1.SecretKeySelector {
	return secretKey(fs.Spec.KeySecretRef.Name, fs.Spec.KeySecretRef.Key, DefaultKeySecretKey)
}

// NodeHeadersSecretKey selects the headers sent to the Stacks nodes; nil
// when spec.node.headersSecretRef is unset.
func (fs *FaucetServer) NodeHeadersSecretKey() *corev1.SecretKeySelector {
	ref := fs.Spec.Node.HeadersSecretRef
	if ref == nil {
		return nil
	}
	return secretKey(ref.Name, ref.Key, DefaultNodeHeadersSecretKey)
}

// StoreURISecretKey selects the Postgres URI; nil for the embedded store.
func (fs *FaucetServer) StoreURISecretKey() *corev1.SecretKeySelector {
	if fs.StoreKind() != StorePostgres {
		return nil
	}
	ref := fs.Spec.Store.Postgres.URISecretRef
	return secretKey(ref.Name, ref.Key, DefaultStoreURIKey)
}

// APITokensSecretKey selects the API tokens file; nil when
// spec.abuse.apiTokens is unset.
func (fs *FaucetServer) APITokensSecretKey() *corev1.SecretKeySelector {
	if fs.Spec.Abuse == nil || fs.Spec.Abuse.APITokens == nil {
		return nil
	}
	ref := fs.Spec.Abuse.APITokens.SecretRef
	return secretKey(ref.Name, ref.Key, DefaultAPITokensSecretKey)
}

// TreasurySecretKey selects the treasury's key; nil when spec.treasury is
// unset.
func (fs *FaucetServer) TreasurySecretKey() *corev1.SecretKeySelector {
	if fs.Spec.Treasury == nil {
		return nil
	}
	ref := fs.Spec.Treasury.KeySecretRef
	return secretKey(ref.Name, ref.Key, DefaultKeySecretKey)
}

// Tokens are the token entries of spec.assets, in order.
func (fs *FaucetServer) Tokens() []AssetSpec {
	var out []AssetSpec
	for _, a := range fs.Spec.Assets {
		if a.Token != nil {
			out = append(out, a)
		}
	}
	return out
}

// BTCAsset is the btc entry of spec.assets; nil when BTC drips are off.
func (fs *FaucetServer) BTCAsset() *AssetSpec {
	for i, a := range fs.Spec.Assets {
		if a.BTC != nil {
			return &fs.Spec.Assets[i]
		}
	}
	return nil
}

// BTC is the btc entry's Bitcoin settings; nil when BTC drips are off.
func (fs *FaucetServer) BTC() *BTCSpec {
	if a := fs.BTCAsset(); a != nil {
		return a.BTC
	}
	return nil
}

// AssetLowThreshold is an asset's low threshold: a token's lowThreshold,
// else the faucet's, which is also BTC's (the faucet has no BTC threshold
// of its own; the CRD refuses one on the btc entry).
func (fs *FaucetServer) AssetLowThreshold(a AssetSpec) int64 {
	if a.LowThreshold != nil && a.BTC == nil {
		return *a.LowThreshold
	}
	low, _ := fs.LowThreshold()
	return low
}

// BTCNetwork is the btc asset's network, or its default; "" when BTC
// drips are off.
func (fs *FaucetServer) BTCNetwork() string {
	b := fs.BTC()
	switch {
	case b == nil:
		return ""
	case b.Network == "":
		return DefaultBTCNetwork
	}
	return b.Network
}

// BTCKeySecretKey selects the Bitcoin key file; nil when BTC drips are off.
func (fs *FaucetServer) BTCKeySecretKey() *corev1.SecretKeySelector {
	b := fs.BTC()
	if b == nil {
		return nil
	}
	return secretKey(b.KeySecretRef.Name, b.KeySecretRef.Key, DefaultBTCKeySecretKey)
}

// BTCCredentialsSecretKey selects the Bitcoin node's RPC credentials; nil
// when BTC drips are off or the node takes none.
func (fs *FaucetServer) BTCCredentialsSecretKey() *corev1.SecretKeySelector {
	b := fs.BTC()
	if b == nil || b.RPC.CredentialsSecretRef == nil {
		return nil
	}
	ref := b.RPC.CredentialsSecretRef
	return secretKey(ref.Name, ref.Key, DefaultBTCCredentialsSecretKey)
}

// OIDCClientSecretKey selects the OpenID Connect client secret; nil
// without spec.identity or for a public client.
func (fs *FaucetServer) OIDCClientSecretKey() *corev1.SecretKeySelector {
	id := fs.Spec.Identity
	if id == nil || id.OIDC.ClientSecretRef == nil {
		return nil
	}
	ref := id.OIDC.ClientSecretRef
	return secretKey(ref.Name, ref.Key, DefaultOIDCClientSecretKey)
}

// SessionKeySecretKey selects the sign-in session key; nil when
// spec.identity sets none (the faucet then derives it from the client
// secret).
func (fs *FaucetServer) SessionKeySecretKey() *corev1.SecretKeySelector {
	id := fs.Spec.Identity
	if id == nil || id.SessionKeySecretRef == nil {
		return nil
	}
	ref := id.SessionKeySecretRef
	return secretKey(ref.Name, ref.Key, DefaultSessionKeySecretKey)
}

// STXReserve is spec.budget.reserve in µSTX: what the faucet never pays
// out of its keys' STX; 0 when unset.
func (fs *FaucetServer) STXReserve() uint64 {
	if b := fs.Spec.Budget; b != nil && b.Reserve != nil && *b.Reserve > 0 {
		return uint64(*b.Reserve)
	}
	return 0
}

// LowThreshold is the number of default drips left below which the faucet
// counts as low: spec.funding.lowThreshold, else the deprecated
// spec.page.lowDrips, else DefaultLowThreshold. Its second result reports
// whether the spec sets either field.
func (fs *FaucetServer) LowThreshold() (int64, bool) {
	if f := fs.Spec.Funding; f != nil && f.LowThreshold != nil {
		return *f.LowThreshold, true
	}
	if p := fs.Spec.Page; p != nil && p.LowDrips != nil {
		return int64(*p.LowDrips), true
	}
	return DefaultLowThreshold, false
}

// secretKey selects key (or def when key is empty) of the Secret name.
func secretKey(name, key, def string) *corev1.SecretKeySelector {
	if key == "" {
		key = def
	}
	return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
}
