// Command helmchart writes charts/quartet-operator from config/ (`make helm-chart`).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/quartet-dev/quartet-operator/internal/helmchart"
)

func main() {
	opts := helmchart.Options{}
	flag.StringVar(&opts.Root, "root", ".", "Repository root.")
	flag.StringVar(&opts.Version, "version", "", "Chart version and appVersion (the Makefile's VERSION).")
	flag.Parse()
	if opts.Version == "" {
		fmt.Fprintln(os.Stderr, "helmchart: --version is required")
		os.Exit(2)
	}
	if err := helmchart.Generate(opts); err != nil {
		fmt.Fprintln(os.Stderr, "helmchart:", err)
		os.Exit(1)
	}
}
