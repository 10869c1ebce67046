// Package envflags sets a FlagSet's flags from environment variables named by one rule: Prefix, then the flag
// name in upper case with '-' and '.' turned into '_' (--fleet-credentials-secret is
// QUARTET_FLEET_CREDENTIALS_SECRET). It exists because OLM's Subscription spec.config can set a Deployment's
// environment but never its arguments, so a flag without a variable is a setting an OLM install cannot reach.
package envflags

import (
	"errors"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Prefix starts every variable of the rule.
const Prefix = "QUARTET_"

// Name is the variable of a flag under the rule.
func Name(flagName string) string {
	return Prefix + strings.Map(func(r rune) rune {
		switch {
		case r == '-' || r == '.':
			return '_'
		case 'a' <= r && r <= 'z':
			return r - 'a' + 'A'
		}
		return r
	}, flagName)
}

// Rule applies the environment to one FlagSet.
type Rule struct {
	// Aliases are further variables of a flag, older names kept working; the rule's own name wins over them.
	Aliases map[string][]string
	// Reserved are prefixes (e.g. QUARTET_TEST_) of variables the rule leaves alone: they belong to development
	// and test tooling, so they may share the process environment without being mistaken for settings.
	Reserved []string
}

// Annotate appends each flag's variables to its usage text, so that --help documents them.
func (r Rule) Annotate(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		note := " [env " + Name(f.Name)
		if aliases := r.Aliases[f.Name]; len(aliases) > 0 {
			note += ", alias " + strings.Join(aliases, ", alias ")
		}
		f.Usage += note + "]"
	})
}

// Apply sets, after fs.Parse, every flag not given on the command line from its variable in environ (the
// "NAME=value" form of os.Environ), then from its aliases in order. It fails on a bad value, naming the variable
// and the flag, and on any variable with Prefix that is neither a flag's, nor an alias, nor reserved: a typo
// must stop the process rather than silently leave a default in place.
func (r Rule) Apply(fs *flag.FlagSet, environ []string) error {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	if err := r.checkUnknown(fs, env); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		for _, name := range append([]string{Name(f.Name)}, r.Aliases[f.Name]...) {
			value, ok := env[name]
			if !ok {
				continue
			}
			if err := fs.Set(f.Name, value); err != nil {
				errs = append(errs, fmt.Errorf("environment variable %s=%q (flag --%s): %w", name, value, f.Name, err))
			}
			return
		}
	})
	return errors.Join(errs...)
}

// checkUnknown refuses variables with Prefix that no flag, alias or reserved prefix accounts for.
func (r Rule) checkUnknown(fs *flag.FlagSet, env map[string]string) error {
	known := map[string]bool{}
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		known[Name(f.Name)] = true
		names = append(names, Name(f.Name))
	})
	for _, aliases := range r.Aliases {
		for _, a := range aliases {
			known[a] = true
		}
	}
	var unknown []string
	for k := range env {
		if !strings.HasPrefix(k, Prefix) || known[k] || slices.ContainsFunc(r.Reserved, func(p string) bool {
			return strings.HasPrefix(k, p)
		}) {
			continue
		}
		unknown = append(unknown, k)
	}
	slices.Sort(unknown)
	var errs []error
	for _, k := range unknown {
		msg := fmt.Sprintf("unknown environment variable %s: no flag is set by it", k)
		if near := nearest(k, names); near != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", near)
		} else if serviceLink.MatchString(k) {
			msg += " (it looks like the kubelet's variable for a Service: set enableServiceLinks: false in the pod spec)"
		}
		errs = append(errs, errors.New(msg+"; unset it, or use a reserved prefix ("+strings.Join(r.Reserved, ", ")+")"))
	}
	return errors.Join(errs...)
}

// serviceLink matches the variables the kubelet derives from a Service name unless the pod sets
// enableServiceLinks: false (<NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT[_<port name>], <NAME>_PORT[_<n>_<PROTO>[_…]]).
var serviceLink = regexp.MustCompile(`_SERVICE_HOST$|_SERVICE_PORT(_[A-Z0-9_]+)?$|_PORT(_[0-9]+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)?$`)

// nearest is the candidate within a small edit distance of name, for the "did you mean" of a typo.
func nearest(name string, candidates []string) string {
	best, bestDistance := "", 4
	for _, c := range candidates {
		if d := distance(name, c); d < bestDistance {
			best, bestDistance = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b, in bytes (variable names are ASCII).
func distance(a, b string) int {
	previous := make([]int, len(b)+1)
	current := make([]int, len(b)+1)
	for j := range previous {
		previous[j] = j
	}
	for i := 1; i <= len(a); i++ {
		current[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			current[j] = min(previous[j]+1, current[j-1]+1, previous[j-1]+cost)
		}
		previous, current = current, previous
	}
	return previous[len(b)]
}
