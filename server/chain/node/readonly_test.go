package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

func clarityHex(v stacks.ClarityValue) string {
	return "0x" + hex.EncodeToString(stacks.SerializeClarityValue(v))
}

func TestTokenBalanceSendsTheRealRequest(t *testing.T) {
	token, err := stacks.ParseContractID("SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token")
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
	if want := "POST /v2/contracts/call-read/SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1/sbtc-token/get-balance"; gotPath != want {
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
	token, _ := stacks.ParseContractID("SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token")
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

// TestTokenMetadataSendsTheRealRequests serves each getter the way a 4.x
// node answers call-read (misc-4x.json: {"okay":true,"result":"0x…"}) and
// checks the three requests and the decoded metadata.
func TestTokenMetadataSendsTheRealRequests(t *testing.T) {
	token, err := stacks.ParseContractID("SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token")
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string]stacks.ClarityValue{
		"get-decimals": stacks.ResponseOk(stacks.NewUInt(8)),
		"get-symbol":   stacks.ResponseOk(stacks.StringASCII("sBTC")),
		"get-name":     stacks.ResponseOk(stacks.StringASCII("sBTC")),
	}
	var calls []string
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		fn := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		calls = append(calls, r.Method+" "+r.URL.Path)
		var body readOnlyRequest
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("%s body: %v", fn, err)
		}
		if body.Sender != "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1" || body.Arguments == nil || len(body.Arguments) != 0 {
			t.Errorf("%s body %+v: want the deployer as sender and an empty argument list", fn, body)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"okay":true,"result":"` + clarityHex(answers[fn]) + `"}`))
	})
	md, err := c.TokenMetadata(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	if md != (TokenMetadata{Decimals: 8, Symbol: "sBTC", Name: "sBTC"}) {
		t.Errorf("metadata %+v", md)
	}
	const prefix = "POST /v2/contracts/call-read/SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1/sbtc-token/"
	if want := []string{prefix + "get-decimals", prefix + "get-symbol", prefix + "get-name"}; !reflect.DeepEqual(calls, want) {
		t.Errorf("calls %v, want %v", calls, want)
	}
}

func TestTokenMetadataAnswers(t *testing.T) {
	token, _ := stacks.ParseContractID("ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token")
	good := map[string]string{
		"get-decimals": clarityHex(stacks.ResponseOk(stacks.NewUInt(6))),
		"get-symbol":   clarityHex(stacks.ResponseOk(stacks.StringASCII("tUSD"))),
		"get-name":     clarityHex(stacks.ResponseOk(stacks.StringASCII("Test USD"))),
	}
	for _, tc := range []struct {
		name     string
		function string // the getter that answers badly; the others answer good
		status   int
		ct, body string
		wantErr  func(error) bool
	}{
		{"decimals beyond 255", "get-decimals", 200, "application/json", `{"okay":true,"result":"` + clarityHex(stacks.ResponseOk(stacks.NewUInt(256))) + `"}`,
			func(err error) bool { return errors.Is(err, ErrDecimalsRange) }},
		{"decimals as an int", "get-decimals", 200, "application/json", `{"okay":true,"result":"` + clarityHex(stacks.ResponseOk(stacks.NewInt(6))) + `"}`,
			func(err error) bool { return errors.Is(err, ErrNotUint) }},
		{"symbol in utf-8", "get-symbol", 200, "application/json", `{"okay":true,"result":"` + clarityHex(stacks.ResponseOk(stacks.StringUTF8("tUSD"))) + `"}`,
			func(err error) bool { return errors.Is(err, ErrNotASCII) }},
		{"name as an err", "get-name", 200, "application/json", `{"okay":true,"result":"` + clarityHex(stacks.ResponseErr(stacks.NewUInt(1))) + `"}`,
			func(err error) bool { return errors.Is(err, ErrNotASCII) && strings.Contains(err.Error(), "get-name") }},
		// misc-4x.json's failure shape: okay false with a cause.
		{"no get-name", "get-name", 200, "application/json", `{"okay":false,"cause":"RuntimeCheck(UndefinedFunction(\"get-name\"))"}`,
			func(err error) bool {
				var re *ReadOnlyError
				return errors.As(err, &re) && re.Function == "get-name" && !IsUnavailable(err)
			}},
		// 4.0.2's budget error and bad tip: text/plain 400 and 404.
		{"budget exceeded", "get-decimals", 400, "text/plain", "Execution budget exceeded",
			func(err error) bool { var de *DecodeError; return errors.As(err, &de) }},
		{"chain tip not found", "get-symbol", 404, "text/plain", "Chain tip not found",
			func(err error) bool { var he *HTTPError; return errors.As(err, &he) && he.StatusCode == 404 }},
		{"node failing", "get-decimals", 503, "text/plain", "busy", IsUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				fn := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
				if fn == tc.function {
					respond(tc.status, tc.ct, []byte(tc.body))(w, r)
					return
				}
				respond(200, "application/json", []byte(`{"okay":true,"result":"`+good[fn]+`"}`))(w, r)
			})
			md, err := c.TokenMetadata(context.Background(), token)
			if err == nil || !tc.wantErr(err) {
				t.Fatalf("metadata %+v, err = %v (%T)", md, err, err)
			}
			if !strings.Contains(err.Error(), token.String()) {
				t.Errorf("error %q does not name the token", err)
			}
			if md != (TokenMetadata{}) {
				t.Errorf("metadata %+v returned with an error", md)
			}
		})
	}
}
