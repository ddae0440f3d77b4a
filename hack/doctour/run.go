package doctour

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Runner runs a tour's steps as a reader would, each command in its own
// bash in Dir with Env, and checks each answer that has a documented
// shape. A txid in an answer fills the 0x… of later commands.
type Runner struct {
	Dir    string
	Env    []string
	Values map[string]string // placeholder → value (ST…, bcrt1q…)
	Logf   func(format string, args ...any)
	bg     []*exec.Cmd
}

// FreshValues is what a reader puts for a tour's placeholders: a new
// testnet address for ST… and a new regtest address for bcrt1q…. (0x… is
// filled from the answers as the tour goes.)
func FreshValues() (map[string]string, error) {
	sk, err := stacks.GeneratePrivateKey()
	if err != nil {
		return nil, fmt.Errorf("a Stacks key: %w", err)
	}
	bk, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		return nil, fmt.Errorf("a Bitcoin key: %w", err)
	}
	return map[string]string{
		"ST…":     sk.Address(stacks.AddressVersionTestnetSingleSig).String(),
		"bcrt1q…": bk.Address().String(),
	}, nil
}

// backgroundWait is how long a background command (a port-forward) may
// take to print its first line, which says it is ready.
const backgroundWait = time.Minute

// Run runs one step and returns its output. A command that exits non-zero,
// leaves a placeholder unfilled or answers other than documented is an
// error naming the line.
func (r *Runner) Run(ctx context.Context, s Step) ([]byte, error) {
	cmd := Fill(s.Cmd, r.Values)
	if left := Placeholders(cmd); len(left) > 0 {
		return nil, fmt.Errorf("%s: no value for %s", s, strings.Join(left, ", "))
	}
	r.Logf("$ %s", cmd)
	if s.Background() {
		return nil, r.background(ctx, s, cmd)
	}
	c := exec.CommandContext(ctx, "bash", "-c", cmd)
	c.Dir, c.Env = r.Dir, r.Env
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return out, fmt.Errorf("%s: %w\n%s%s", s, err, out, stderr.Bytes())
	}
	if s.Shape != "" {
		if err := MatchShape(s.Shape, out); err != nil {
			return out, fmt.Errorf("%s: the answer is not the documented one: %w", s, err)
		}
	}
	r.noteTxID(out)
	return out, nil
}

// background starts a `cmd &` step in a process group of its own and
// waits for its first line of output.
func (r *Runner) background(ctx context.Context, s Step, cmd string) error {
	cmd = strings.TrimSuffix(strings.TrimSpace(stripComment(cmd)), "&")
	// Not bound to ctx: it lives until Stop, like the reader's `&` job.
	c := exec.CommandContext(context.WithoutCancel(ctx), "bash", "-c", "exec "+cmd)
	c.Dir, c.Env = r.Dir, r.Env
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	c.Stdout, c.Stderr = pw, pw
	if err := c.Start(); err != nil {
		return fmt.Errorf("%s: %w", s, err)
	}
	r.bg = append(r.bg, c)
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		said := false
		for sc.Scan() {
			if !said {
				first <- sc.Text()
				said = true
			}
		}
		if !said {
			close(first)
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- c.Wait(); pw.Close() }()
	t := time.NewTimer(backgroundWait)
	defer t.Stop()
	select {
	case l, ok := <-first:
		if !ok {
			return fmt.Errorf("%s: exited without a word", s)
		}
		r.Logf("  %s", l)
		return nil
	case err := <-exited:
		return fmt.Errorf("%s: exited: %w", s, err)
	case <-t.C:
		return fmt.Errorf("%s: said nothing for %s", s, backgroundWait)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// noteTxID keeps the txid of a drip's answer (v1 txId, v3
// transaction.tx_id) for the 0x… of the commands after it.
func (r *Runner) noteTxID(out []byte) {
	var a struct {
		TxID        string `json:"txId"`
		Transaction struct {
			TxID string `json:"tx_id"`
		} `json:"transaction"`
	}
	if json.Unmarshal(out, &a) != nil {
		return
	}
	for _, id := range []string{a.TxID, a.Transaction.TxID} {
		if strings.HasPrefix(id, "0x") {
			r.Values["0x…"] = id
		}
	}
}

// Stop ends the background commands (their whole process groups).
func (r *Runner) Stop() error {
	var errs []error
	for _, c := range r.bg {
		if c.Process == nil {
			continue
		}
		if err := syscall.Kill(-c.Process.Pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("stop %s: %w", c.Path, err))
		}
	}
	r.bg = nil
	return errors.Join(errs...)
}
