//go:build serveonly

package main

import (
	"context"
	"errors"
	"io"
)

// runManager stands in for the operator in a build without it: make run
// builds only what serve needs, which halves a cold build.
func runManager(context.Context, procClock, []string, io.Writer) error {
	return errors.New("this binary was built without the operator (-tags serveonly, as make run builds it): run make build for bin/faucet, which has it")
}
