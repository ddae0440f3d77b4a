package mdanchor

import "testing"

func TestHeading(t *testing.T) {
	for in, want := range map[string]string{
		"How the faucet stays correct under load":      "how-the-faucet-stays-correct-under-load",
		"`GET /extended/v1/status` (also `/extended`)": "get-extendedv1status-also-extended",
		"Past 25 drips per block: send-many batching":  "past-25-drips-per-block-send-many-batching",
		"sBTC":                      "sbtc",
		"See [the API](api.md) now": "see-the-api-now",
		"HTTP server and page":      "http-server-and-page",
		"snake_case and-hyphens":    "snake_case-and-hyphens",
	} {
		if got := Heading(in); got != want {
			t.Errorf("Heading(%q) = %q, want %q", in, got, want)
		}
	}
}
