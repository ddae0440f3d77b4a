// Package v1alpha1 holds the FaucetServer API of the faucet.stxfaucet.dev group.
// +kubebuilder:object:generate=true
// +groupName=faucet.stxfaucet.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "faucet.stxfaucet.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
