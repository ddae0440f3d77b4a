//go:build doctour

package doctour

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestReadmeLocalTour runs README.md's set-up command `make run` and then
// its local tour, every command as written against that devnet, each
// answer checked against the one the README shows. `make test-docs`.
func TestReadmeLocalTour(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	setup, err := Tour(readme, "setup")
	if err != nil {
		t.Fatal(err)
	}
	tour, err := Tour(readme, "local")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	var run *Step
	for i := range setup {
		if strings.HasPrefix(setup[i].Cmd, "make run") {
			run = &setup[i]
		}
	}
	if run == nil {
		t.Fatal("README's set-up has no `make run`")
	}
	startDevnet(t, ctx, repo, *run)

	values, err := FreshValues()
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{
		Dir: repo, Env: os.Environ(), Logf: t.Logf, Values: values,
	}
	defer func() {
		if err := r.Stop(); err != nil {
			t.Error(err)
		}
	}()
	for _, s := range tour {
		out, err := r.Run(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("  %s", clip(out))
	}
}

// startDevnet runs the set-up's `make run` as written, until the test
// ends, and waits for its faucets to be ready.
func startDevnet(t *testing.T, ctx context.Context, repo string, s Step) {
	t.Helper()
	c := exec.Command("bash", "-c", "exec "+stripComment(s.Cmd))
	c.Dir, c.Env = repo, os.Environ()
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	c.Stdout, c.Stderr = pw, pw
	if err := c.Start(); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	exited := make(chan struct{})
	go func() { _ = c.Wait(); pw.Close(); close(exited) }() // its end is what matters
	t.Cleanup(func() {
		// make and the faucet under it, which stops its btcd.
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM) // gone already is fine
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-exited
			t.Error("make run did not stop within 30 s of SIGTERM")
		}
	})
	var mu sync.Mutex
	var log strings.Builder
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		stx, btc, told := false, false, false
		for sc.Scan() {
			l := sc.Text()
			mu.Lock()
			log.WriteString(l + "\n")
			mu.Unlock()
			stx = stx || strings.Contains(l, `msg="faucet ready"`)
			btc = btc || strings.Contains(l, `msg="btc faucet ready"`)
			if stx && btc && !told {
				close(ready)
				told = true
			}
		}
	}()
	select {
	case <-ready:
	case <-exited:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%s exited before its faucets were ready:\n%s", s, log.String())
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%s: not ready:\n%s", s, log.String())
	}
}
