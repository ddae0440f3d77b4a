package launch

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
)

// helperEnv makes the test binary act as a parent that launches a long
// sleep, prints its pid and waits to be killed.
const helperEnv = "LAUNCH_TEST_PARENT"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		p, err := Start(exec.Command("sleep", "600"), Config{})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(p.Pid())
		<-p.Exited()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The point of the package: a child dies with its parent, even when the
// parent is SIGKILLed and cannot clean up.
func TestChildDiesWithItsParent(t *testing.T) {
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), helperEnv+"=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	if gone(pid) {
		t.Fatalf("child %d not running", pid)
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	// The kernel signals the child as the parent's thread ends; its
	// reaping (by init) may take a moment.
	eventually.True(t, 10*time.Second, fmt.Sprintf("child %d ends with its killed parent", pid), func() bool { return gone(pid) })
}

// gone reports whether pid has exited (reaped or not).
func gone(pid int) bool { return syscall.Kill(pid, 0) != nil || zombie(pid) }

// zombie reports whether pid has exited but is not yet reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // gone
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

func TestLogCaptureAndExit(t *testing.T) {
	log := filepath.Join(t.TempDir(), "out.log")
	p, err := Start(exec.Command("sh", "-c", "echo to-stdout; echo to-stderr >&2"), Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if got := Tail(log, 100); got != "to-stdout\nto-stderr" {
		t.Errorf("log %q", got)
	}
	if got := Tail(log, 10); got != "to-stderr" {
		t.Errorf("tail of 10 bytes %q", got)
	}
	if err := p.Stop(Step{Signal: syscall.SIGTERM, Grace: time.Hour}); err != nil {
		t.Errorf("Stop of an exited child: %v", err)
	}
	if err := p.Err(); err != nil {
		t.Errorf("Err of a child that exited 0: %v", err)
	}
	p, err = Start(exec.Command("sh", "-c", "exit 3"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := p.Err(); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("Err of a child that exited 3: %v", err)
	}
}

func TestStopPoliteSignal(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	p, err := Start(exec.Command("sleep", "600"), Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	// sleep dies of SIGTERM at once: no clock step is needed.
	if err := p.Stop(Step{Signal: syscall.SIGTERM, Grace: time.Hour}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// A child that ignores the polite signal is killed, with whatever it
// started, once the grace period has passed on the clock.
func TestStopKillsAfterTheGrace(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	cmd := exec.Command("sh", "-c", `trap "" TERM; sleep 600 & echo $! > `+pidFile+`; wait`)
	p, err := Start(cmd, Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	eventually.True(t, 10*time.Second, "the shell starts its sleep", func() bool {
		b, err := os.ReadFile(pidFile)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return grandchild != 0
	})
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	done := make(chan error, 1)
	go func() { done <- p.Stop(Step{Signal: syscall.SIGTERM, Grace: 5 * time.Second}) }()
	eventually.True(t, 10*time.Second, "Stop waits on the clock", clk.HasWaiters)
	select {
	case err := <-done:
		t.Fatalf("Stop returned before the grace period: %v", err)
	default:
	}
	clk.Step(5 * time.Second)
	err = <-done
	if !errors.Is(err, ErrKilled) || !strings.Contains(err.Error(), "sh did not exit within 5s of terminated") {
		t.Fatalf("Stop = %v, want ErrKilled", err)
	}
	eventually.True(t, 10*time.Second, "the group kill ends the shell's sleep", func() bool { return gone(grandchild) })
}

func TestStartFailure(t *testing.T) {
	_, err := Start(exec.Command(filepath.Join(t.TempDir(), "missing")), Config{})
	if err == nil || !strings.HasPrefix(err.Error(), "launch missing: ") {
		t.Fatalf("Start of a missing binary: %v", err)
	}
}
