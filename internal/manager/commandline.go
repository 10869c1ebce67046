package manager

import (
	"flag"
	"io"

	"github.com/quartet-dev/quartet-operator/internal/manager/envflags"
)

// CommandLine is what the manager binary is configured with: the manager's Options and the process settings
// (logging, tracing) that cmd/main.go applies itself.
type CommandLine struct {
	Options      Options
	LogLevel     string
	OTLPEndpoint string
}

// RegistryTTLEnv is the registry TTL's variable from before the rule, kept as an alias of --registry-ttl.
const RegistryTTLEnv = "AGENTRAX_REGISTRY_TTL"

// EnvRule maps every flag of the manager binary to its environment variable (docs/install.md, "Configuration
// through the environment").
var EnvRule = envflags.Rule{
	Aliases: map[string][]string{"registry-ttl": {RegistryTTLEnv}},
	// QUARTET_DEV_ and QUARTET_TEST_ belong to make dev and the test harness, QUARTET_BENCH_ to the benchmarks
	// (docs/performance.md); a shell that sets them may also start the manager.
	Reserved: []string{"QUARTET_DEV_", "QUARTET_TEST_", "QUARTET_BENCH_"},
}

// EnvName is the environment variable of a manager flag, e.g. QUARTET_FLEET_CREDENTIALS_SECRET.
func EnvName(flagName string) string { return envflags.Name(flagName) }

// NewFlagSet registers every flag of the manager binary on a new FlagSet, bound to c, with each flag's variable in
// its usage text.
func NewFlagSet(name string, c *CommandLine) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	c.Options.BindFlags(fs)
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel,
		"Log verbosity: debug, info, error, or a number (higher is more verbose).")
	fs.StringVar(&c.OTLPEndpoint, "otlp-endpoint", c.OTLPEndpoint, "OTLP/gRPC endpoint for traces (URL or host:port). "+
		"Empty uses OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT; with neither, tracing is off.")
	EnvRule.Annotate(fs)
	return fs
}

// ParseCommandLine configures the manager from its arguments (without the program name) and environ (os.Environ):
// a flag given as an argument wins over its variable. Usage and parse errors go to out.
func ParseCommandLine(name string, args, environ []string, out io.Writer) (CommandLine, error) {
	c := CommandLine{Options: DefaultOptions(), LogLevel: "info"}
	fs := NewFlagSet(name, &c)
	fs.SetOutput(out)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := EnvRule.Apply(fs, environ); err != nil {
		return c, err
	}
	return c, nil
}
