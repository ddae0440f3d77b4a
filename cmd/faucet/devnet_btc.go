package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
)

// `faucet devnet --btc-listen` runs a Bitcoin regtest node beside the
// simulated Stacks node: the devnet's supervised btcd (btcdevnet.go), its
// RPC served on the given address with the given credentials, mining its
// coins to the faucet's Bitcoin address. With the Stacks node funding the
// faucet's Stacks keys, one process (one pod) is the whole chain a faucet
// in another process (or pod) needs for STX, sBTC and BTC.

// devnetBTCFlags are `faucet devnet`'s flags of the Bitcoin node.
type devnetBTCFlags struct {
	listen, credentialsFile, fundKeyFile, fundAddress string
	blockTime                                         time.Duration
}

// devnetBTCFlagNames are those flags, for `faucet devnet -h`.
var devnetBTCFlagNames = []string{"btc-listen", "btc-rpc-credentials-file", "btc-fund-key-file", "btc-fund-address", "btc-block-time"}

func (f *devnetBTCFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "btc-listen", "", "also run a Bitcoin regtest node (btcd) and serve its JSON-RPC on this address, e.g. 0.0.0.0:18443 (\"\" = none); needs --btc-rpc-credentials-file and --btc-fund-key-file or --btc-fund-address")
	fs.StringVar(&f.credentialsFile, "btc-rpc-credentials-file", "", "file holding the Bitcoin node's RPC credentials, user:password on its first line (what the faucet's --btc-rpc-credentials-file reads)")
	fs.StringVar(&f.fundKeyFile, "btc-fund-key-file", "", "the faucet's Bitcoin key file, \"<WIF> [address]\" (its --btc-key-file): the node mines its coins to the key's regtest address")
	fs.StringVar(&f.fundAddress, "btc-fund-address", "", "the regtest address (bcrt1…) the node mines its coins to, instead of --btc-fund-key-file")
	fs.DurationVar(&f.blockTime, "btc-block-time", 10*time.Second, "Bitcoin block interval")
}

// devnetBitcoin is what start resolved from the flags.
type devnetBitcoin struct {
	cfg devnetBtcdConfig
}

// resolve checks the flags and reads their files; nil when --btc-listen is
// not set. Nothing it reports quotes a file's content.
func (f *devnetBTCFlags) resolve(fs *flag.FlagSet) (*devnetBitcoin, error) {
	if f.listen == "" {
		if f.credentialsFile != "" || f.fundKeyFile != "" || f.fundAddress != "" {
			return nil, flagError(fs, errors.New("--btc-rpc-credentials-file, --btc-fund-key-file and --btc-fund-address need --btc-listen, the address of the Bitcoin node's RPC"))
		}
		return nil, nil
	}
	switch {
	case f.credentialsFile == "":
		return nil, flagError(fs, errors.New("--btc-listen needs --btc-rpc-credentials-file: the node's RPC is reachable from other hosts, so it takes the credentials the faucet is given"))
	case (f.fundKeyFile == "") == (f.fundAddress == ""):
		return nil, flagError(fs, errors.New("--btc-listen needs one of --btc-fund-key-file and --btc-fund-address: where the node mines its coins"))
	case f.blockTime <= 0:
		return nil, flagError(fs, fmt.Errorf("--btc-block-time must be positive, got %s", f.blockTime))
	}
	user, pass, err := readDevnetCredentials(f.credentialsFile)
	if err != nil {
		return nil, err
	}
	var to bitcoin.Address
	if f.fundAddress != "" {
		if to, err = bitcoin.ParseAddress(f.fundAddress, bitcoin.Regtest); err != nil {
			return nil, flagError(fs, fmt.Errorf("--btc-fund-address: %w", err))
		}
	} else if to, err = readFundAddress(f.fundKeyFile); err != nil {
		return nil, err
	}
	return &devnetBitcoin{cfg: devnetBtcdConfig{mineTo: to, blockTime: f.blockTime, listen: f.listen, user: user, pass: pass}}, nil
}

// start runs the node; the caller defers its Stop.
func (b *devnetBitcoin) start(ctx context.Context, clk procClock, logger *slog.Logger) (*devnetBtcd, error) {
	bin, err := findBtcd()
	if errors.Is(err, errNoBtcd) {
		return nil, fmt.Errorf("--btc-listen: %w: build it with `make btcd`, put it beside the faucet binary or on PATH, or set %s", err, btcdEnv)
	}
	if err != nil {
		return nil, err
	}
	cfg := b.cfg
	cfg.bin, cfg.logger = bin, logger
	return runDevnetBtcd(ctx, clk, cfg)
}

// readDevnetCredentials reads "user:password" from the first line of
// path, as the faucet's rpc client does, for btcd's configuration file:
// one line each, so neither may hold white space or a control character,
// and a value starting with a quote would be unquoted by btcd.
func readDevnetCredentials(path string) (user, pass string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("--btc-rpc-credentials-file: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	user, pass, ok := strings.Cut(strings.TrimRight(line, "\r"), ":")
	bad := func(s string) bool {
		return s == "" || strings.HasPrefix(s, `"`) || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
	}
	if !ok || bad(user) || bad(pass) {
		// Never quote the content: it is the secret.
		return "", "", fmt.Errorf(`--btc-rpc-credentials-file %s: want "user:password" on the first line, both non-empty, without spaces, control characters or a leading quote`, path)
	}
	return user, pass, nil
}

// readFundAddress is the regtest address of the key in a Bitcoin key file
// as the faucet reads it: the first field of the first line that is not
// blank or a comment, and the key's own address after it, if any.
func readFundAddress(path string) (bitcoin.Address, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return bitcoin.Address{}, fmt.Errorf("--btc-fund-key-file: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		key, err := bitcoin.ParsePrivateKey(fields[0], bitcoin.Regtest)
		if err != nil {
			return bitcoin.Address{}, fmt.Errorf("--btc-fund-key-file %s: %w", path, err)
		}
		if len(fields) > 1 && fields[1] != key.Address().String() {
			return bitcoin.Address{}, fmt.Errorf("--btc-fund-key-file %s: the address after the key is %s, but the key's regtest address is %s", path, shortField(fields[1]), key.Address())
		}
		return key.Address(), nil
	}
	return bitcoin.Address{}, fmt.Errorf("--btc-fund-key-file %s: no key in it", path)
}
