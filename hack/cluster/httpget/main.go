// Command httpget GETs each URL and prints its status line and body, so a
// test can read what a pod inside the cluster sees (through `kubectl logs`):
// the images of this project have no shell and no curl. It exits 1 when a
// request fails or answers anything but 200.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: httpget URL...")
		os.Exit(2)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	code := 0
	for _, url := range os.Args[1:] {
		if err := get(client, url); err != nil {
			fmt.Fprintf(os.Stdout, "### %s: %v\n", url, err)
			code = 1
		}
	}
	os.Exit(code)
}

func get(client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	fmt.Printf("### %s %s\n", url, resp.Status)
	if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	fmt.Println()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}
