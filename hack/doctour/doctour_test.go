package doctour

import (
	"strings"
	"testing"
)

const sample = "# Title\n\n<!-- tour: local -->\n```sh\n" +
	"curl -sX POST 'http://x/stx?address=ST…'   # a drip\n" +
	"# {\"success\":true,\"txId\":\"0x…\"}   prose after\n" +
	"# a prose comment\n\n" +
	"kubectl apply -f - <<EOF\nkind: X\n# not a comment: inside the heredoc\nEOF\n" +
	"kubectl port-forward svc/f 3999 &\n" +
	"```\n\n```sh\nnot a tour\n```\n"

func TestTour(t *testing.T) {
	steps, err := Tour([]byte(sample), "local")
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 {
		t.Fatalf("%d steps, want 3: %q", len(steps), steps)
	}
	if steps[0].Line != 5 || steps[0].Shape != `{"success":true,"txId":"0x…"}   prose after` {
		t.Errorf("step 0: %+v", steps[0])
	}
	if want := "kubectl apply -f - <<EOF\nkind: X\n# not a comment: inside the heredoc\nEOF"; steps[1].Cmd != want || steps[1].Background() {
		t.Errorf("heredoc step: %q", steps[1].Cmd)
	}
	if !steps[2].Background() || steps[0].Background() {
		t.Error("only the port-forward runs in the background")
	}
	if got := Placeholders(steps[0].Cmd); len(got) != 1 || got[0] != "ST…" {
		t.Errorf("placeholders %q, want [ST…] (the comment's are not)", got)
	}
	if got := Fill(steps[0].Cmd, map[string]string{"ST…": "ST1"}); !strings.Contains(got, "address=ST1'") {
		t.Errorf("filled: %s", got)
	}
}

func TestTourErrors(t *testing.T) {
	for name, md := range map[string]string{
		"missing":      "no tour here",
		"no block":     "<!-- tour: local -->\ntext\n",
		"unclosed":     "<!-- tour: local -->\n```sh\nls\n",
		"empty":        "<!-- tour: local -->\n```sh\n```\n",
		"stray answer": "<!-- tour: local -->\n```sh\n# {\"a\":1}\n```\n",
		"twice":        "<!-- tour: local -->\n```sh\nls\n```\n<!-- tour: local -->\n```sh\nls\n```\n",
		"open heredoc": "<!-- tour: local -->\n```sh\ncat <<EOF\nx\n```\n",
	} {
		if _, err := Tour([]byte(md), "local"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestMatchShape(t *testing.T) {
	for _, c := range []struct {
		shape, got string
		ok         bool
	}{
		{`{"success":true,"txId":"0x…","txRaw":"8080…"}`, `{"success":true,"txId":"0xab","txRaw":"80800000"}`, true},
		{`{"success":true,"txId":"0x…"}  words`, `{"success":true,"txId":"0xab"}`, true},
		{`{"success":true,"txId":"0x…"}`, `{"success":true,"txId":"0xab","txRaw":"8080"}`, false}, // undocumented member
		{`{"success":true,…}`, `{"success":true,"txId":"0xab"}`, true},
		{`{"success":true}`, `{"success":false}`, false},
		{`{"amount":{"stx":"500000000"}}`, `{"amount":{"stx":"500000001"}}`, false},
		{`{"n":…,"s":"ready"}`, `{"n":[1,2],"s":"ready"}`, true},
		{`{"n":…}`, `{}`, false},
		{`{"h":50}`, `{"h":50}`, true},
		{`{"h":null}`, `{"h":7}`, false},
		{`{"l":[{"p":"address",…},…]}`, `{"l":[{"p":"address","r":4},{"p":"ip"}]}`, true},
		{`{"l":[1]}`, `{"l":[1,2]}`, false},
		{`{"s":"a…z"}`, `{"s":"abz"}`, true},
		{`{"s":"a…z"}`, `{"s":"aby"}`, false},
		{`{"s":"x"}`, `not json`, false},
	} {
		err := MatchShape(c.shape, []byte(c.got))
		if (err == nil) != c.ok {
			t.Errorf("MatchShape(%s, %s) = %v, want ok=%v", c.shape, c.got, err, c.ok)
		}
	}
	if err := MatchShape(`{"a":1`, []byte(`{}`)); err == nil {
		t.Error("an unfinished shape is an error")
	}
}
