package v1alpha1

import (
	"testing"

	"k8s.io/utils/ptr"
)

func TestLowThreshold(t *testing.T) {
	tests := map[string]struct {
		funding *FundingSpec
		page    *PageSpec
		want    int64
		set     bool
	}{
		"neither: the default":                        {want: DefaultLowThreshold},
		"empty groups: the default":                   {funding: &FundingSpec{}, page: &PageSpec{}, want: DefaultLowThreshold},
		"funding.lowThreshold":                        {funding: &FundingSpec{LowThreshold: ptr.To(int64(40))}, want: 40, set: true},
		"0 is a threshold, not unset":                 {funding: &FundingSpec{LowThreshold: ptr.To(int64(0))}, page: &PageSpec{LowDrips: ptr.To(int32(7))}, want: 0, set: true},
		"the deprecated page.lowDrips stands in":      {page: &PageSpec{LowDrips: ptr.To(int32(250))}, want: 250, set: true},
		"lowThreshold wins over the deprecated field": {funding: &FundingSpec{LowThreshold: ptr.To(int64(40))}, page: &PageSpec{LowDrips: ptr.To(int32(250))}, want: 40, set: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := &FaucetServer{Spec: FaucetServerSpec{Funding: tt.funding, Page: tt.page}}
			if got, set := fs.LowThreshold(); got != tt.want || set != tt.set {
				t.Errorf("LowThreshold() = %d, %v; want %d, %v", got, set, tt.want, tt.set)
			}
		})
	}
}
