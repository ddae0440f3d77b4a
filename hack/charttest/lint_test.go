package charttest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestLint runs helm lint --strict with every value set.
func TestLint(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			out, err := lint(t, vs.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("unexpected lint output:\n%s", out)
			}
		})
	}
}

// TestNodeURLsAccepted: a FaucetServer of several nodes (spec.node.urls,
// which the CRD takes instead of url) passes the schema too, as do its
// poll cadences.
func TestNodeURLsAccepted(t *testing.T) {
	file := filepath.Join(t.TempDir(), "values.yaml")
	values := "faucetServers:\n  - name: a\n    spec: {node: {urls: ['http://node-0:20443', 'http://node-1:20443'], pollInterval: 20s, busyPollInterval: 1.5s}, keySecretRef: {name: keys}}\n"
	if err := os.WriteFile(file, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := lint(t, "-f", file); err != nil {
		t.Fatalf("helm lint refused node.urls: %v\n%s", err, out)
	}
}

// TestBadValuesAreRejected checks that values.schema.json and the templates'
// own checks refuse bad values. helm template (like install and upgrade)
// fails on both; helm lint only on schema errors, as it deliberately logs the
// templates' fail and required calls instead of failing.
func TestBadValuesAreRejected(t *testing.T) {
	tests := map[string]struct {
		// values is a values file, layered over the defaults.
		values string
		// wantErr must occur in helm's error output.
		wantErr string
		// templateCheck: a template's fail or required catches it, not the
		// schema, so helm lint passes.
		templateCheck bool
	}{
		"unknown top-level key": {
			values:  "replicas: 2\n",
			wantErr: "additional properties 'replicas' not allowed",
		},
		"unknown nested key": {
			values:  "metrics:\n  serviceMonitor:\n    enable: true\n",
			wantErr: "additional properties 'enable' not allowed",
		},
		"wrong type": {
			values:  "replicaCount: two\n",
			wantErr: "/replicaCount",
		},
		"value outside an enum": {
			values:  "logLevel: verbose\n",
			wantErr: "/logLevel",
		},
		"invalid namespace name": {
			values:  "watchNamespaces: [Faucet_Testnet]\n",
			wantErr: "/watchNamespaces/0",
		},
		"faucetServer without a name": {
			values:  "faucetServers:\n  - spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}}\n",
			wantErr: "missing property 'name'",
		},
		"faucetServer whose name is no Service name": {
			values:  "faucetServers:\n  - name: faucet.testnet\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}}\n",
			wantErr: "/faucetServers/0/name",
		},
		"faucetServer without node.url": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {}, keySecretRef: {name: keys}}\n",
			wantErr: "missing property 'url'",
		},
		"faucetServer with both node.url and node.urls": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443', urls: ['http://node:20443']}, keySecretRef: {name: keys}}\n",
			wantErr: "/faucetServers/0/spec/node",
		},
		"faucetServer with an empty node.urls": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {urls: []}, keySecretRef: {name: keys}}\n",
			wantErr: "/faucetServers/0/spec/node/urls",
		},
		"faucetServer with a node.pollInterval that is no duration": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443', pollInterval: '20'}, keySecretRef: {name: keys}}\n",
			wantErr: "/faucetServers/0/spec/node/pollInterval",
		},
		"faucetServer without keySecretRef.name": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {key: keys}}\n",
			wantErr: "missing property 'name'",
		},
		"faucetServer with both an embedded and a Postgres store": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, store: {embedded: {}, postgres: {uriSecretRef: {name: db}}}}\n",
			wantErr: "/faucetServers/0/spec/store",
		},
		"faucetServer with a Postgres store but no Secret name": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, store: {postgres: {uriSecretRef: {key: uri}}}}\n",
			wantErr: "/faucetServers/0/spec/store/postgres/uriSecretRef",
		},
		"faucetServer with negative replicas": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, replicas: -1}\n",
			wantErr: "/faucetServers/0/spec/replicas",
		},
		"faucetServer with a proof of work over 32 bits": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, abuse: {proofOfWork: {difficulty: 33}}}\n",
			wantErr: "/faucetServers/0/spec/abuse/proofOfWork/difficulty",
		},
		"faucetServer with a host name in ipDeny": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, abuse: {ipDeny: [bots.example.com]}}\n",
			wantErr: "/faucetServers/0/spec/abuse/ipDeny/0",
		},
		"faucetServer with API tokens but no Secret name": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, abuse: {apiTokens: {secretRef: {key: tokens}}}}\n",
			wantErr: "/faucetServers/0/spec/abuse/apiTokens/secretRef",
		},
		"faucetServer with a negative balance cap": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, abuse: {balanceCapUSTX: -1}}\n",
			wantErr: "/faucetServers/0/spec/abuse/balanceCapUSTX",
		},
		"faucetServer with an explorer link without {txid}": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, page: {explorerTxURL: 'https://explorer.hiro.so/txid/'}}\n",
			wantErr: "/faucetServers/0/spec/page/explorerTxURL",
		},
		"faucetServer batching more than 200 recipients": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, batching: {maxRecipients: 201}}\n",
			wantErr: "/faucetServers/0/spec/batching/maxRecipients",
		},
		"faucetServer with a batch window that is no duration": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, batching: {window: 250}}\n",
			wantErr: "/faucetServers/0/spec/batching/window",
		},
		"faucetServer batching through a mainnet contract": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, batching: {contract: SP3FBR2AGK5H9QBDH3EEN6DF8EK8JY7RX8QJ5SVTE.send-many-memo}}\n",
			wantErr: "/faucetServers/0/spec/batching/contract",
		},
		"faucetServer batching through an address, not a contract": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, batching: {contract: ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B}}\n",
			wantErr: "/faucetServers/0/spec/batching/contract",
		},
		"faucetServer with an unknown key beside spec": {
			values:  "faucetServers:\n  - name: a\n    node: {url: 'http://node:20443'}\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}}\n",
			wantErr: "additional properties 'node' not allowed",
		},
		"faucetServer outside watchNamespaces": {
			values:        "watchNamespaces: [faucet-testnet]\nfaucetServers:\n  - name: a\n    namespace: other\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}}\n",
			wantErr:       `namespace "other" is not in watchNamespaces`,
			templateCheck: true,
		},
		"faucetServer in the unwatched release namespace": {
			values:        "watchNamespaces: [faucet-testnet]\nfaucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}}\n",
			wantErr:       `namespace "faucet-system" is not in watchNamespaces`,
			templateCheck: true,
		},
		"assets in the object form of earlier releases": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: {sbtc: {assetIdentifier: 'SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token', amount: 1000}}}\n",
			wantErr: "/faucetServers/0/spec/assets",
		},
		"mainnet token": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: sbtc, token: {assetIdentifier: 'SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token::sbtc-token', amount: 1000}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0/token/assetIdentifier",
		},
		"token identifier without a token name": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: sbtc, token: {assetIdentifier: 'SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token', amount: 1000}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0/token/assetIdentifier",
		},
		"token without an amount": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: sbtc, token: {assetIdentifier: 'SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token'}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0/token",
		},
		"zero token amount": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: sbtc, token: {assetIdentifier: 'SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token', amount: 0}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0/token/amount",
		},
		"token without an identifier that is not sbtc": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: tusd, token: {amount: 1}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0/token",
		},
		"entry with both token and btc": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: btc, token: {amount: 1}, btc: {rpc: {url: 'http://bitcoind:18443'}, keySecretRef: {name: btc}}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0",
		},
		"entry with neither token nor btc": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: tusd}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0",
		},
		"btc entry not named btc": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: bitcoin, btc: {rpc: {url: 'http://bitcoind:18443'}, keySecretRef: {name: btc}}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0",
		},
		"token named stx": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: stx, token: {assetIdentifier: 'SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token', amount: 1}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0/name",
		},
		"upper-case asset name": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: sBTC, token: {assetIdentifier: 'SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token', amount: 1}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0/name",
		},
		"mainnet BTC": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: btc, btc: {network: mainnet, rpc: {url: 'http://bitcoind:8332'}, keySecretRef: {name: btc}}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0/btc/network",
		},
		"BTC RPC URL with a password": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: btc, btc: {rpc: {url: 'http://faucet:hunter2@bitcoind:18443'}, keySecretRef: {name: btc}}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0/btc/rpc/url",
		},
		"BTC drip below dust": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: btc, btc: {rpc: {url: 'http://bitcoind:18443'}, keySecretRef: {name: btc}, amounts: {default: 500}}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0/btc/amounts/default",
		},
		"BTC without a key Secret": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, assets: [{name: btc, btc: {rpc: {url: 'http://bitcoind:18443'}}}]}\n",
			wantErr: "/faucetServers/0/spec/assets/0/btc",
		},
		"faucetServer with an unknown log level": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, logLevel: verbose}\n",
			wantErr: "/faucetServers/0/spec/logLevel",
		},
		"faucetServer with a FAUCET_ variable in extraEnv": {
			values:  "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}, extraEnv: [{name: FAUCET_LOW_DRIPS, value: '5'}]}\n",
			wantErr: "/faucetServers/0/spec/extraEnv/0/name",
		},
		"faucetServer listed twice": {
			values:        "faucetServers:\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}}\n  - name: a\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}}\n",
			wantErr:       "faucet-system/a is listed twice",
			templateCheck: true,
		},
		"alert duration that is no Prometheus duration": {
			values:  "alerts:\n  rules:\n    faucetLow:\n      for: 10 minutes\n",
			wantErr: "/alerts/rules/faucetLow/for",
		},
		"unknown alert": {
			values:  "alerts:\n  rules:\n    faucetHigh:\n      enabled: true\n",
			wantErr: "additional properties 'faucetHigh' not allowed",
		},
		"runway threshold that is no duration of whole units": {
			values:  "alerts:\n  rules:\n    runwayShort:\n      threshold: 3 days\n",
			wantErr: "/alerts/rules/runwayShort/threshold",
		},
		"runway threshold in milliseconds": {
			values:  "alerts:\n  rules:\n    runwayShort:\n      threshold: 500ms\n",
			wantErr: "/alerts/rules/runwayShort/threshold",
		},
		"failure ratio above 1": {
			values:  "alerts:\n  rules:\n    dripFailureRatioHigh:\n      ratio: 10\n",
			wantErr: "/alerts/rules/dripFailureRatioHigh/ratio",
		},
		"FaucetServer label that is no Prometheus label name": {
			values:  "faucetMetrics:\n  serverLabel: faucet-server\n",
			wantErr: "/faucetMetrics/serverLabel",
		},
		"dashboard label value that is no label value": {
			values:  "dashboard:\n  labelValue: a b\n",
			wantErr: "/dashboard/labelValue",
		},
		"alerts without any alert": {
			values:        "alerts:\n  enabled: true\n  rules:\n    faucetLow: {enabled: false}\n    faucetEmpty: {enabled: false}\n    runwayShort: {enabled: false}\n    dripFailureRatioHigh: {enabled: false}\n    nonceStuck: {enabled: false}\n    nodeUnreachable: {enabled: false}\n    chainStalled: {enabled: false}\n    btcNodeUnreachable: {enabled: false}\n    stacksNodeOut: {enabled: false}\n    bitcoinNodeOut: {enabled: false}\n    podNotReady: {enabled: false}\n",
			wantErr:       "every alerts.rules.*.enabled is false",
			templateCheck: true,
		},
		"serviceMonitor without the metrics Service": {
			values:        "metrics:\n  service:\n    enabled: false\n  serviceMonitor:\n    enabled: true\n",
			wantErr:       "metrics.serviceMonitor.enabled needs metrics.enabled and metrics.service.enabled",
			templateCheck: true,
		},
		"a metrics certificate without HTTPS": {
			values:        "metrics:\n  secure: false\n  certSecret: metrics-cert\n",
			wantErr:       "metrics.certSecret needs metrics.enabled and metrics.secure",
			templateCheck: true,
		},
		"a PodDisruptionBudget allowing a fraction": {
			values:  "podDisruptionBudget:\n  maxUnavailable: 0.5\n",
			wantErr: "/podDisruptionBudget/maxUnavailable",
		},
		"a metrics reader that is no RBAC subject": {
			values:  "metrics:\n  readerSubjects:\n    - kind: Pod\n      name: prometheus\n",
			wantErr: "/metrics/readerSubjects/0/kind",
		},
		"devnet block time that is no duration": {
			values:  "devnet:\n  enabled: true\n  blockTime: 2 seconds\n",
			wantErr: "/devnet/blockTime",
		},
		"devnet name that is no Service name": {
			values:  "devnet:\n  enabled: true\n  name: Devnet\n",
			wantErr: "/devnet/name",
		},
		"devnet in a namespace the operator does not watch": {
			values:        "watchNamespaces: [faucet-testnet]\ndevnet:\n  enabled: true\n  namespace: faucet-devnet\n",
			wantErr:       `devnet.namespace "faucet-devnet" is not in watchNamespaces`,
			templateCheck: true,
		},
		"devnet named as a faucetServer of its namespace": {
			values:        "devnet:\n  enabled: true\nfaucetServers:\n  - name: devnet\n    spec: {node: {url: 'http://node:20443'}, keySecretRef: {name: keys}}\n",
			wantErr:       `devnet.name "devnet" is also a FaucetServer of faucetServers in faucet-system`,
			templateCheck: true,
		},
		"existing ServiceAccount without a name": {
			values:        "serviceAccount:\n  create: false\n",
			wantErr:       "serviceAccount.name is required",
			templateCheck: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(file, []byte(tt.values), 0o600); err != nil {
				t.Fatal(err)
			}
			switch out, err := lint(t, "-f", file); {
			case tt.templateCheck && err != nil:
				t.Errorf("helm lint failed; it ignores fail and required, so the schema rejected the values: %v", err)
			case !tt.templateCheck && err == nil:
				t.Errorf("helm lint accepted the values:\n%s", out)
			case !tt.templateCheck && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("helm lint error lacks %q:\n%v", tt.wantErr, err)
			}
			if _, err := template(t, "-f", file); err == nil {
				t.Errorf("helm template accepted the values")
			} else if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("helm template error lacks %q:\n%v", tt.wantErr, err)
			}
		})
	}
}

// TestValuesAreDocumented checks that values.yaml and values.schema.json
// describe the same keys: lint already rejects a values.yaml key the schema
// lacks; this rejects a schema property values.yaml does not show (and so
// does not document).
func TestValuesAreDocumented(t *testing.T) {
	var schema map[string]any
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	values := readYAML(t, "charts/faucet-operator/values.yaml")

	// notInValuesYAML are schema properties deliberately absent from values.yaml.
	notInValuesYAML := []string{"global"}

	var walk func(path string, schema, values map[string]any)
	walk = func(path string, schema, values map[string]any) {
		if schema["additionalProperties"] != false {
			return // a free-form map (labels, resources, a FaucetServer spec)
		}
		props, _ := schema["properties"].(map[string]any)
		for key, sub := range props {
			p := strings.TrimPrefix(path+"."+key, ".")
			v, ok := values[key]
			if !ok {
				if !slices.Contains(notInValuesYAML, p) {
					t.Errorf("values.schema.json has %s, values.yaml does not", p)
				}
				continue
			}
			subSchema, _ := sub.(map[string]any)
			if subValues, ok := v.(map[string]any); ok && subSchema["type"] == "object" {
				walk(p, subSchema, subValues)
			}
		}
	}
	walk("", schema, values)
}
