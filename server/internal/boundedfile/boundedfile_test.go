package boundedfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(path, 5); err != nil || string(b) != "12345" {
		t.Errorf("Read at the limit = %q, %v", b, err)
	}
	b, err := Read(path, 4)
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Max != 4 || string(b) != "12345" {
		t.Errorf("Read over the limit = %q, %v; want the 5 bytes read and a *TooLargeError", b, err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 4); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read of a missing file = %v", err)
	}
}
