// Package boundedfile reads the small files an operator hands the faucet
// (API tokens, asset switches, node headers) without trusting their size:
// a file that is not what it should be must not fill the memory.
package boundedfile

import (
	"fmt"
	"io"
	"os"
)

// TooLargeError is a file over the limit given to Read.
type TooLargeError struct {
	Path string
	Max  int64
}

func (e *TooLargeError) Error() string { return fmt.Sprintf("%s: larger than %d bytes", e.Path, e.Max) }

// Read reads path up to one byte past max. A file over max is a
// *TooLargeError, returned with the max+1 bytes read for a caller that
// reports the size in its own words.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err // an *os.PathError: it names the file
	}
	if int64(len(data)) > max {
		return data, &TooLargeError{Path: path, Max: max}
	}
	return data, nil
}
