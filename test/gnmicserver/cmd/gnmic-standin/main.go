// Command gnmic-standin runs test/gnmicserver as a container in place of gNMIc's collector: it takes the command
// line the operator's pod template gives gNMIc (`--config /etc/gnmic/config.yaml collector`), reads the api-server
// address and TLS files from that config as gNMIc does, and serves the collector's REST API there (mutual TLS when
// the config asks for it) until SIGTERM. A command or config it cannot honour stops it at start with a message and
// exit status 2, as gNMIc stops on a config it refuses.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

func main() {
	srv, err := start(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gnmic-standin:", err)
		os.Exit(2)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	sig := <-stop
	fmt.Printf("gnmic-standin: %s, stopping after %d applies\n", sig, srv.ApplyCount())
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "gnmic-standin: closing:", err)
		os.Exit(1)
	}
}

// start parses the command line and config file and starts serving.
func start(args []string) (*gnmicserver.Server, error) {
	file, err := gnmicserver.ParseCommandLine(args)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the config: %w", err)
	}
	cfg, err := gnmicserver.ParseCollectorConfig(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", file, err)
	}
	srv, err := gnmicserver.ServeCollectorConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting the API server: %w", err)
	}
	mode := "plain HTTP"
	switch {
	case cfg.TLS.MutualTLS():
		mode = "mutual TLS (client certificates of " + cfg.TLS.CAFile + " required)"
	case cfg.TLS != nil:
		mode = "TLS"
	}
	fmt.Printf("gnmic-standin: collector API on %s, %s\n", srv.Addr(), mode)
	return srv, nil
}
