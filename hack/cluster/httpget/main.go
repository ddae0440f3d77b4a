// Command httpget GETs each URL and prints its status line and body, so a
// test can read what a pod inside the cluster sees (through `kubectl logs`):
// the images of this project have no shell and no curl. It exits 1 when a
// request fails or answers anything but 200.
//
// Usage: httpget [--bearer-token-file FILE] [--insecure-skip-verify] URL...
//
// The bearer token (a pod's ServiceAccount token, for the manager's
// authenticated metrics) is sent to https URLs only, never over plain HTTP.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	tokenFile := flag.String("bearer-token-file", "", "send the token in this file as \"Authorization: Bearer\" to https URLs")
	insecure := flag.Bool("insecure-skip-verify", false, "accept any server certificate (the manager's is self-signed)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: httpget [--bearer-token-file FILE] [--insecure-skip-verify] URL...")
		os.Exit(2)
	}
	var token string
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		token = strings.TrimSpace(string(b))
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: *insecure}, // opted into with the flag
	}}
	code := 0
	for _, url := range flag.Args() {
		if err := get(client, url, token); err != nil {
			fmt.Fprintf(os.Stdout, "### %s: %v\n", url, err)
			code = 1
		}
	}
	os.Exit(code)
}

func get(client *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" && strings.HasPrefix(url, "https://") {
		req.Header.Set("Authorization", "Bearer "+token)
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
