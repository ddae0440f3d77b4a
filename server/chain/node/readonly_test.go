package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

func clarityHex(v stacks.ClarityValue) string {
	return "0x" + hex.EncodeToString(stacks.SerializeClarityValue(v))
}

func TestTokenBalanceSendsTheRealRequest(t *testing.T) {
	token, err := stacks.ParseContractID("ST1F7QA2MDF17S807EPA36TSS8AMEFY4KA9TVGWXT.sbtc-token")
	if err != nil {
		t.Fatal(err)
	}
	owner, err := stacks.ParsePrincipal(testPrincipal)
	if err != nil {
		t.Fatal(err)
	}
	var gotPath, gotType string
	var gotBody readOnlyRequest
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotType = r.Method+" "+r.URL.Path, r.Header.Get("Content-Type")
		if err := json.NewDecoder(r.Body).Decode(&gotBody); err != nil {
			t.Errorf("request body: %v", err)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"okay": true,
			"result": clarityHex(stacks.Response{Ok: true, Value: stacks.NewUInt(123456789)})})
	})
	got, err := c.TokenBalance(context.Background(), token, owner)
	if err != nil {
		t.Fatal(err)
	}
	if got != 123456789 {
		t.Fatalf("balance = %d, want 123456789", got)
	}
	if want := "POST /v2/contracts/call-read/ST1F7QA2MDF17S807EPA36TSS8AMEFY4KA9TVGWXT/sbtc-token/get-balance"; gotPath != want {
		t.Errorf("path = %q, want %q", gotPath, want)
	}
	if gotType != "application/json" {
		t.Errorf("content type = %q", gotType)
	}
	if gotBody.Sender != testPrincipal || len(gotBody.Arguments) != 1 || gotBody.Arguments[0] != clarityHex(owner) {
		t.Errorf("body = %+v, want sender %s and one argument %s", gotBody, testPrincipal, clarityHex(owner))
	}
}

func TestCallReadOnlyAnswers(t *testing.T) {
	token, _ := stacks.ParseContractID("ST1F7QA2MDF17S807EPA36TSS8AMEFY4KA9TVGWXT.sbtc-token")
	owner, _ := stacks.ParsePrincipal(testPrincipal)
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		wantErr func(error) bool
	}{
		{"refused call", 200, `{"okay":false,"cause":"Unchecked(UndefinedFunction(\"get-balance\"))"}`, func(err error) bool {
			var re *ReadOnlyError
			return errors.As(err, &re) && strings.Contains(re.Cause, "UndefinedFunction")
		}},
		{"err response", 200, `{"okay":true,"result":"` + clarityHex(stacks.Response{Value: stacks.NewUInt(1)}) + `"}`, func(err error) bool {
			return errors.Is(err, ErrNotUint)
		}},
		{"uint beyond 64 bits", 200, `{"okay":true,"result":"` + clarityHex(stacks.Response{Ok: true, Value: stacks.UInt{Hi: 1}}) + `"}`, func(err error) bool {
			return errors.Is(err, ErrNotUint)
		}},
		{"not hex", 200, `{"okay":true,"result":"0xzz"}`, func(err error) bool {
			var re *ResponseError
			return errors.As(err, &re)
		}},
		{"not json", 200, `<html>`, func(err error) bool {
			var re *ResponseError
			return errors.As(err, &re)
		}},
		{"no such contract", 404, `No contract analysis found or trait definition not found`, func(err error) bool {
			return err != nil && !IsUnavailable(err)
		}},
		{"node failing", 503, `busy`, IsUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t, respond(tc.status, "application/json", []byte(tc.body)))
			_, err := c.TokenBalance(context.Background(), token, owner)
			if err == nil || !tc.wantErr(err) {
				t.Fatalf("err = %v (%T)", err, err)
			}
		})
	}
	c := newTestClient(t, respond(200, "application/json", []byte(`{}`)))
	if _, err := c.CallReadOnly(context.Background(), token, "", owner); err == nil {
		t.Fatal("an empty function name was sent")
	}
}
