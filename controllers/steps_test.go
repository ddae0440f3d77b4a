package controllers

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// TestChildNames: checkNames checks the name of every child the pass goes
// on to apply, and only those.
func TestChildNames(t *testing.T) {
	tests := map[string]struct {
		// mutate changes the fixture's spec
		mutate func(*faucetv1alpha1.FaucetServer)
		// want are the children as "Kind/name", in order
		want []string
	}{
		"embedded store: the claim": {
			want: []string{"ServiceAccount/faucet", "Service/faucet", "ConfigMap/faucet-switches", "Deployment/faucet", "PersistentVolumeClaim/faucet-data"},
		},
		"postgres, one replica: no claim, no budget": {
			mutate: postgres(1),
			want:   []string{"ServiceAccount/faucet", "Service/faucet", "ConfigMap/faucet-switches", "Deployment/faucet"},
		},
		"postgres, several replicas: the budget": {
			mutate: postgres(3),
			want:   []string{"ServiceAccount/faucet", "Service/faucet", "ConfigMap/faucet-switches", "Deployment/faucet", "PodDisruptionBudget/faucet"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture()
			if tt.mutate != nil {
				tt.mutate(fs)
			}
			var got []string
			for _, c := range childNames(fs, nil) {
				if c.GetNamespace() != "testnet" {
					t.Errorf("%T in namespace %q", c, c.GetNamespace())
				}
				got = append(got, c.GetObjectKind().GroupVersionKind().Kind+"/"+c.GetName())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("children %q, want %q", got, tt.want)
			}
		})
	}
}

// TestEmbeddedStoreClaim: the claim keeps what cannot change of the one
// that exists, and there is none with Postgres.
func TestEmbeddedStoreClaim(t *testing.T) {
	if pvc := embeddedStoreClaim(fixture(postgres(2)), nil); pvc != nil {
		t.Errorf("postgres store: claim %+v", pvc)
	}
	existing := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("standard")}}
	pvc := embeddedStoreClaim(fixture(), existing)
	if pvc == nil || pvc.Name != "faucet-data" || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "standard" {
		t.Errorf("embedded store: claim %+v, want faucet-data keeping its class", pvc)
	}
}
