// Command crdsurface prints, as JSON, the surface (versions and schema fields) of the CRDs in a bundle's manifests
// directory; `make release-freeze` keeps it beside each released bundle so test/bundle can refuse a later change that
// drops what the release promised (internal/crdcompat).
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/quartet-dev/quartet-operator/internal/crdcompat"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdsurface <bundle manifests directory>")
		os.Exit(2)
	}
	crds, err := crdcompat.ReadDir(os.Args[1])
	if err == nil {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", " ")
		err = enc.Encode(crdcompat.Of(crds))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdsurface:", err)
		os.Exit(1)
	}
}
