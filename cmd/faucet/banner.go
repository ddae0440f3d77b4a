package main

import (
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/options"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// devnetBanner is what `serve --devnet` (make run) prints at start: where
// the page, the node and the API are and, for every asset that is on,
// requests ready to paste, each of which works as printed (its drips, and
// the recipient's balance on the chain). An asset turned off is named as
// off, with no requests that would answer 403.
type devnetBanner struct {
	host     string // the faucet's host:port, as a person on this machine opens it
	nodeURL  string
	addrs    []string
	tokens   []bannerToken
	btc      *btcfaucet.Faucet // nil: no BTC, noBTC says why
	noBTC    string
	mcp      bool
	switches switches.State // in force at start
	// to is the example recipient of the Stacks requests.
	to stacks.Address
}

// bannerToken is a token as the banner shows it: asset is the contract
// its balance is read from (zero: not known at start).
type bannerToken struct {
	faucet.TokenInfo
	asset stacks.AssetInfo
}

// offText says why an asset has no requests in the banner.
const offText = "off: turned off by its operator (--disable-asset or the switches file); its routes answer 403"

// newDevnetBanner gathers the banner of this run with the switches in
// force at start.
func (r *serveRun) newDevnetBanner(listen net.Addr, sw switches.State) (*devnetBanner, error) {
	to, err := stacks.GeneratePrivateKey()
	if err != nil {
		return nil, fmt.Errorf("devnet banner: example recipient: %w", err)
	}
	b := &devnetBanner{host: browseHost(listen), nodeURL: r.devnetURL, addrs: r.engine.Addresses(), btc: r.btc,
		noBTC: "no btcd found: `make btcd`, or set FAUCET_BTCD, then restart", mcp: r.o.HTTP.MCP, switches: sw, to: to.TestnetAddress()}
	if !r.o.Devnet.BTC {
		b.noBTC = "--devnet-btc=false"
	}
	for _, t := range r.engine.Tokens() {
		b.tokens = append(b.tokens, bannerToken{TokenInfo: t, asset: devnetTokenAsset(r.o, t)})
	}
	return b, nil
}

// devnetTokenAsset is the contract t's balance is read from on the
// devnet: its own, or for sBTC found in /v2/pox, the one the devnet's node
// names there (the faucet settles on it once it has read /v2/pox).
func devnetTokenAsset(o *options.Serve, t faucet.TokenInfo) stacks.AssetInfo {
	switch {
	case !t.FromPoX:
		return t.Asset
	case t.Name == "sbtc" && o.Devnet.SBTC:
		if id, err := stacks.ParseAssetID(o.DevnetSBTCAsset()); err == nil {
			return id
		}
	}
	return stacks.AssetInfo{}
}

// write prints the banner.
func (b *devnetBanner) write(w io.Writer) {
	fmt.Fprintf(w, `
faucet-operator devnet
  web page:         http://%s/   <- open this in a browser
  faucet addresses: %s
  node RPC:         %s
  faucet API:       http://%s

Try it:
`, b.host, strings.Join(b.addrs, ", "), b.nodeURL, b.host)
	to := b.to.String()
	if b.switches.Off("stx") {
		fmt.Fprintf(w, "  STX: %s\n", offText)
	} else {
		fmt.Fprintf(w, `  curl -sX POST 'http://%s/extended/v1/faucets/stx?address=%s'
  curl -sX POST -H 'Content-Type: application/json' -d '{"address":"%s"}' 'http://%s/extended/v3/faucets/stx'
`, b.host, to, to, b.host)
	}
	fmt.Fprintf(w, "  curl -s 'http://%s/extended/v1/status'\n", b.host)
	if !b.switches.Off("stx") {
		fmt.Fprintf(w, "  curl -s '%s/v2/accounts/%s?proof=0'\n", b.nodeURL, to)
	}
	fmt.Fprintln(w)
	for _, t := range b.tokens {
		b.writeToken(w, t)
	}
	if b.mcp {
		fmt.Fprintf(w, "Agents (MCP, streamable HTTP): http://%s/mcp\n  claude mcp add --transport http stacks-testnet-faucet http://%s/mcp\n\n", b.host, b.host)
	}
	b.writeBTC(w)
}

// writeToken prints a token's drips and the call that reads the example
// recipient's balance of it.
func (b *devnetBanner) writeToken(w io.Writer, t bannerToken) {
	if b.switches.Off(string(t.Name)) {
		fmt.Fprintf(w, "%s: %s\n\n", t.Name, offText)
		return
	}
	id := t.Asset.String()
	if t.FromPoX {
		id = "found in /v2/pox once the faucet has read it: see /faucet/v1/info"
		if t.asset != (stacks.AssetInfo{}) {
			id = t.asset.String() + ", as the node names it in /v2/pox"
		}
	}
	to := b.to.String()
	fmt.Fprintf(w, `%s (%s, %d base units per drip):
  curl -sX POST 'http://%s/extended/v1/faucets/%s?address=%s'
  curl -sX POST -H 'Content-Type: application/json' -d '{"address":"%s"}' 'http://%s/extended/v3/faucets/%s'
`, t.Name, id, t.Amount, b.host, t.Name, to, to, b.host, t.Name)
	if t.asset != (stacks.AssetInfo{}) {
		fmt.Fprintf(w, "  # %s's %s balance, from the node: {\"okay\":true,\"result\":\"0x0701<32 hex digits>\"} is (ok uN), N in hex\n", to, t.Name)
		fmt.Fprintln(w, "  "+tokenBalanceCommand(b.nodeURL, t.asset.Contract, b.to))
	}
	fmt.Fprintln(w)
}

// tokenBalanceCommand is a curl calling the SIP-010 get-balance of
// contract for who through the node's read-only call RPC.
func tokenBalanceCommand(nodeURL string, contract stacks.ContractID, who stacks.Address) string {
	arg := stacks.SerializeClarityValue(stacks.Principal{Address: who})
	return fmt.Sprintf(`curl -sX POST -H 'Content-Type: application/json' -d '{"sender":%q,"arguments":["0x%x"]}' '%s/v2/contracts/call-read/%s/%s/get-balance'`,
		who.String(), arg, nodeURL, contract.Address, contract.Name)
}

// writeBTC prints the BTC faucet's requests, or why there are none.
func (b *devnetBanner) writeBTC(w io.Writer) {
	switch {
	case b.btc == nil:
		fmt.Fprintf(w, "BTC: off (%s)\n\n", b.noBTC)
		return
	case b.switches.Off("btc"):
		fmt.Fprintf(w, "BTC: %s\n\n", offText)
		return
	}
	example, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		fmt.Fprintf(w, "BTC (regtest btcd, faucet address %s)\n\n", b.btc.Address())
		return
	}
	a := example.Address().String()
	fmt.Fprintf(w, `BTC (regtest btcd, faucet address %s):
  curl -sX POST 'http://%s/extended/v1/faucets/btc?address=%s'
  curl -sX POST -H 'Content-Type: application/json' -d '{"address":"%s"}' 'http://%s/extended/v3/faucets/btc'
  curl -s 'http://%s/extended/v1/faucets/btc/%s'

`, b.btc.Address(), b.host, a, a, b.host, b.host, a)
}
