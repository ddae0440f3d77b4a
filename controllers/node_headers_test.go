package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unique"

	corev1 "k8s.io/api/core/v1"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// testAPIKey is the API key of the tests: a value no message may quote.
const testAPIKey = "hiro-api-key-0123456789abcdef"

// withNodeHeaders sets spec.node.headersSecretRef to Secret name, data
// key key ("" for the default).
func withNodeHeaders(name, key string) func(*faucetv1alpha1.FaucetServer) {
	return func(fs *faucetv1alpha1.FaucetServer) {
		fs.Spec.Node.HeadersSecretRef = &faucetv1alpha1.NodeHeadersSecretReference{Name: name, Key: key}
	}
}

// writeHeadersFile writes header lines to a file of t's, as the kubelet
// projects the Secret into the pod, and returns its path.
func writeHeadersFile(t *testing.T, lines string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(p, []byte(lines), 0o440); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNodeHeadersArgs: spec.node.headersSecretRef is a file on a read-only
// Secret volume of its own, passed as --node-headers-file, which serve
// parses back and accepts; without it there is neither.
func TestNodeHeadersArgs(t *testing.T) {
	fs := fixture(withNodeHeaders("hiro-api", ""))
	d := deploymentFor(fs, "img", secretDigests{keys: "k", nodeHeaders: "h"})
	pod := d.Spec.Template.Spec
	if got := flagsWithPrefix(pod.Containers[0].Args, "node-headers"); !slices.Equal(got, []string{"--node-headers-file=/etc/faucet/node-headers/headers"}) {
		t.Errorf("node headers flags %q", got)
	}
	if got := secretFileOn(t, pod, "/etc/faucet/node-headers/headers"); got != "hiro-api/headers" {
		t.Errorf("the headers file is %q, want the file of Secret hiro-api/headers", got)
	}
	if len(pod.Containers[0].Env) != 0 {
		t.Errorf("env %+v: the headers are a file", pod.Containers[0].Env)
	}
	if got := secretNames(fs); !slices.Contains(got, "hiro-api") {
		t.Errorf("secretNames %v lack the headers Secret, which the controller must watch", got)
	}
	checkArgsParseBack(t, fs)
	o := serverOptions(fs)
	o.Abuse.SwitchesFile = writeSwitchesFile(t, fs)
	o.Node.HeadersFile = writeHeadersFile(t, "x-api-key: "+testAPIKey+"\n")
	if err := o.Validate(); err != nil {
		t.Errorf("serve refuses the operator's options: %v", err)
	}

	custom := fixture(withNodeHeaders("gateway", "api.txt"))
	if got := flagsWithPrefix(serverArgs(custom), "node-headers"); !slices.Equal(got, []string{"--node-headers-file=/etc/faucet/node-headers/api.txt"}) {
		t.Errorf("a custom data key: flags %q", got)
	}

	plain := fixture()
	if got := flagsWithPrefix(serverArgs(plain), "node-headers"); got != nil {
		t.Errorf("node headers flags %q without spec.node.headersSecretRef", got)
	}
	volumes, mounts := podVolumes(plain)
	if slices.ContainsFunc(volumes, func(v corev1.Volume) bool { return v.Name == nodeHeadersVolume }) ||
		slices.ContainsFunc(mounts, func(m corev1.VolumeMount) bool { return m.Name == nodeHeadersVolume }) {
		t.Errorf("a headers volume without spec.node.headersSecretRef: %+v %+v", volumes, mounts)
	}
}

// TestNodeHeadersRollThePod: the headers' digest is in the config hash,
// which a FaucetServer without headers keeps as it was.
func TestNodeHeadersRollThePod(t *testing.T) {
	fs := fixture(withNodeHeaders("hiro-api", ""))
	hash := func(fs *faucetv1alpha1.FaucetServer, d secretDigests) string {
		return deploymentFor(fs, "img", d).Spec.Template.Annotations[ConfigHashAnnotation]
	}
	if hash(fs, secretDigests{keys: "k", nodeHeaders: "h1"}) == hash(fs, secretDigests{keys: "k", nodeHeaders: "h2"}) {
		t.Error("new headers keep the config hash: the pods would keep the old API key")
	}
	plain := fixture()
	if hash(plain, secretDigests{keys: "k"}) != configHash("img", serverArgs(plain), secretDigests{keys: "k"}) {
		t.Error("a FaucetServer without node headers hashes differently")
	}
}

// TestCheckNodeHeaders: the headers are checked as the faucet reads them;
// no message quotes a value.
func TestCheckNodeHeaders(t *testing.T) {
	withUser := fixture()
	withUser.Spec.Node.URL = "http://faucet:" + testAPIKey + "@stacks-node:20443"
	tests := map[string]struct {
		data, wantErr string
		fs            *faucetv1alpha1.FaucetServer
	}{
		"a bearer token and a user in the node URL": {data: "Authorization: Bearer " + testAPIKey, fs: withUser,
			wantErr: "an Authorization header, and a user in spec.node's URL: use one"},
		"an API key and a user in the node URL": {data: "x-api-key: " + testAPIKey, fs: withUser},
		"an API key":                            {data: "x-api-key: " + testAPIKey + "\n"},
		"comments and several":                  {data: "# Hiro\n\nx-api-key: " + testAPIKey + "\r\nAuthorization: Bearer " + testAPIKey + "\n"},
		"no colon":                              {data: "x-api-key " + testAPIKey, wantErr: `line 1: want "Name: value"`},
		"a header the faucet sets":              {data: "x-api-key: a\nHost: " + testAPIKey, wantErr: "line 2: Host is set by the faucet itself"},
		"no value":                              {data: "x-api-key:", wantErr: "the header has no value"},
		"a control character":                   {data: "x-api-key: " + testAPIKey + "\x01", wantErr: "characters a header cannot carry"},
		"nothing but comments":                  {data: "# x-api-key: " + testAPIKey, wantErr: "no header lines"},
		"larger than the faucet read":           {data: "x-api-key: " + strings.Repeat("k", 16<<10), wantErr: "larger than 16384 bytes"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := tt.fs
			if fs == nil {
				fs = fixture()
			}
			addrs, err := checkNodeHeaders(fs, []byte(tt.data))
			switch {
			case addrs != nil:
				t.Errorf("addresses %v from headers", addrs)
			case tt.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want %q", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), testAPIKey):
				t.Errorf("the error quotes the Secret: %v", err)
			}
		})
	}
}

// TestNodeHeadersRedacted: the headers print as a placeholder however
// they are formatted, and a state or target holding them (where fmt
// finds only a pointer) never shows them; equal lines are one target.
func TestNodeHeadersRedacted(t *testing.T) {
	h := nodeHeaders{h: unique.Make("x-api-key: " + testAPIKey)}
	if s := fmt.Sprintf("%v %+v %#v %s %q", h, h, h, h, h); s != strings.Repeat(redactedHeaders+" ", 4)+redactedHeaders {
		t.Errorf("printed %s", s)
	}
	st := secretState{headers: h}
	target := fundingTarget{nodeURLs: []string{"http://node:20443"}, headers: h}
	if s := fmt.Sprintf("%v %+v %#v %+v %#v", st, st, st, target, target); strings.Contains(s, testAPIKey) {
		t.Errorf("printed %s", s)
	}
	same := target
	same.headers = nodeHeaders{h: unique.Make("x-api-key: " + testAPIKey)}
	if !target.equal(same) {
		t.Error("equal headers make another target")
	}
	other := target
	other.headers = nodeHeaders{h: unique.Make("x-api-key: rotated")}
	if target.equal(other) || target.equal(fundingTarget{nodeURLs: target.nodeURLs}) {
		t.Error("new or no headers keep the target: the monitor would go on with the old key")
	}
}

// keyedNode is a node behind a gateway that, as Hiro's API past its
// anonymous quota, refuses a request without the API key.
type keyedNode struct {
	next    http.Handler
	refused atomic.Int64
}

func (k *keyedNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Api-Key") != testAPIKey {
		k.refused.Add(1)
		http.Error(w, `{"error":"API rate limit exceeded"}`, http.StatusTooManyRequests)
		return
	}
	k.next.ServeHTTP(w, r)
}

// TestFundingMonitorSendsNodeHeaders: the monitor reads through a node
// that wants an API key with the target's headers, and is refused
// without them.
func TestFundingMonitorSendsNodeHeaders(t *testing.T) {
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	addr := key.TestnetAddress()
	gw := &keyedNode{next: devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{addr: 7 * cost}}).Handler()}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	m := &FundingMonitor{HTTPClient: srv.Client()}

	// What readSecret keeps of a checked Secret.
	data := []byte("# Hiro's API\nx-api-key: " + testAPIKey + "\n")
	if _, err := checkNodeHeaders(fixture(), data); err != nil {
		t.Fatal(err)
	}
	target := fundingTarget{nodeURLs: []string{srv.URL}, addresses: []string{addr.String()},
		headers: nodeHeaders{h: unique.Make(string(data))}}
	rd, err := m.read(context.Background(), target)
	if err != nil || !slices.Equal(rd.balances, []uint64{7 * cost}) {
		t.Fatalf("with the API key: balances %v, %v", rd.balances, err)
	}
	if n := gw.refused.Load(); n != 0 {
		t.Errorf("%d requests without the API key", n)
	}

	anonymous := target
	anonymous.headers = nodeHeaders{}
	rd, err = m.read(context.Background(), anonymous)
	if err == nil || gw.refused.Load() == 0 {
		t.Fatalf("without the API key: balances %v, %v; want refused", rd.balances, err)
	}
	if raw, _ := json.Marshal(rd.nodes); strings.Contains(err.Error()+string(raw), testAPIKey) {
		t.Errorf("the error quotes the API key: %v", err)
	}
}
