// Package certmanager only imports cert-manager's API types, so that `go mod tidy` keeps them in this module:
// `make envtest` runs controller-gen on that package to generate cert-manager's CRDs.
package certmanager

import _ "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
