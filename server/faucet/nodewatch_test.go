package faucet

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/internal/logtest"
)

// logEntries decodes the JSON log lines whose msg starts with prefix.
func logEntries(t *testing.T, logs *logtest.Buffer, prefix string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if msg, _ := e["msg"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, e)
		}
	}
	return out
}

func loggedDuration(t *testing.T, e map[string]any, key string) time.Duration {
	t.Helper()
	s, ok := e[key].(string)
	if !ok {
		t.Fatalf("%s = %#v, want a duration string: %v", key, e[key], e)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s %q: %v", key, s, err)
	}
	return d
}

// A node down for five minutes of one-second polls is logged a handful of
// times, the reminders further and further apart (at most a minute), each
// with the failures so far; its return is one info line saying how long
// it was gone.
func TestNodeOutageLogBacksOff(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	logs := &logtest.Buffer{}
	e := newEnv(t, 1, 10_000_000_000, devnode.Config{}, Config{
		Clock:  clk,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	ctx := context.Background()
	const polls = 300
	e.dn.SetDown(true)
	for i := range polls {
		if i > 0 {
			clk.Step(time.Second)
		}
		if err := e.f.Sync(ctx); err == nil {
			t.Fatal("poll succeeded with the node down")
		}
	}

	lines := logEntries(t, logs, "stacks node")
	if len(lines) < 2 || len(lines) > 12 {
		t.Fatalf("%d polls of a down node logged %d lines, want a handful:\n%s", polls, len(lines), logs)
	}
	if lines[0]["msg"] != "stacks node unreachable; drips fail until it answers" || lines[0]["level"] != "WARN" || lines[0]["err"] == nil {
		t.Errorf("first line %v", lines[0])
	}
	var lastDown, lastGap time.Duration
	for _, l := range lines[1:] {
		if l["msg"] != "stacks node still unreachable" || l["level"] != "WARN" {
			t.Fatalf("reminder %v", l)
		}
		down := loggedDuration(t, l, "down_for")
		// Each reminder comes at least twice as late as the last, up to
		// a minute apart; the count is every failed poll so far.
		if gap := down - lastDown; gap < min(2*lastGap, time.Minute) || gap > time.Minute {
			t.Errorf("reminder %v after %v (the one before after %v)", down, gap, lastGap)
		} else {
			lastGap = gap
		}
		lastDown = down
		if want := float64(down/time.Second) + 1; l["failed_polls"] != want {
			t.Errorf("failed_polls = %v at %v down, want %v", l["failed_polls"], down, want)
		}
	}
	if lastGap != time.Minute {
		t.Errorf("reminders never reached a minute apart: last gap %v", lastGap)
	}

	clk.Step(time.Second)
	e.dn.SetDown(false)
	if err := e.f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	back := logEntries(t, logs, "stacks node reachable again")
	if len(back) != 1 || back[0]["level"] != "INFO" || back[0]["failed_polls"] != float64(polls) {
		t.Fatalf("recovery lines %v", back)
	}
	if d := loggedDuration(t, back[0], "down_for"); d != polls*time.Second {
		t.Errorf("down_for = %v, want %v", d, polls*time.Second)
	}
	// Answering polls say nothing more; the next outage warns at once.
	clk.Step(time.Second)
	if err := e.f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	e.dn.SetDown(true)
	_ = e.f.Sync(ctx)
	if n := len(logEntries(t, logs, "stacks node unreachable")); n != 2 {
		t.Errorf("second outage: %d 'unreachable' lines in all, want 2", n)
	}
	if n := len(logEntries(t, logs, "stacks node")); n != len(lines)+2 {
		t.Errorf("%d node lines, want %d", n, len(lines)+2)
	}
}
