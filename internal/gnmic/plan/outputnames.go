package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// outputUse is one enabled Pipeline sending to one Output, with the digest of that Pipeline's output processors.
type outputUse struct {
	r      *resolved
	digest string
}

// outputKey names an Output: namespace/name.
type outputKey = string

// useKey names one Pipeline's use of one Output.
type useKey struct{ pipeline, output outputKey }

// ProcessorsDigest is OutputInstance.ProcessorsDigest of a processor list: the first 16 hex digits of the SHA-256
// of the names joined by commas (gNMIc names hold no comma), empty for no processors.
func ProcessorsDigest(processors []string) string {
	if len(processors) == 0 {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.Join(processors, ",")))
	return hex.EncodeToString(sum[:8])
}

// nameOutputs gives every (Pipeline, Output) pair of the plan its gNMIc output name and returns the instances to
// record for the next plans (sorted by name, at most gnmicv1alpha1.MaxOutputInstances).
//
// Pipelines sending to one Output with the same output processors share one instance; with different processors
// each list gets its own, so a Pipeline's processors touch only its own data. The names are kept stable through
// previous (the Cluster's status.outputInstances):
//   - A Pipeline whose processor list matches a recorded instance of the Output keeps using it (its own
//     namespace/pipeline/output first, then namespace/output, then the first by name): an instance whose
//     processors did not change keeps its name, so nothing routed to it restarts.
//   - The other lists (processors changed, or a new Pipeline) take, in order, the first free name of
//     namespace/output, namespace/<pipeline>/output for each of their Pipelines, and
//     namespace/<first pipeline>/output/<digest>: only the split-off instance is renamed.
//   - An Output without any recorded instance (a new Output, or a Cluster whose status predates the field) is named
//     as before the names were recorded: namespace/output while its Pipelines agree, else namespace/pipeline/output
//     for each Pipeline, so an upgrade renames nothing.
func nameOutputs(all []*resolved, previous []gnmicv1alpha1.OutputInstance) (map[useKey]string, []gnmicv1alpha1.OutputInstance) {
	uses := map[outputKey][]outputUse{}
	var order []outputKey
	for _, r := range all { // all is sorted by Pipeline
		d := ProcessorsDigest(r.outProcs)
		for _, o := range r.outs {
			k := Name(o.Namespace, o.Name)
			if uses[k] == nil {
				order = append(order, k)
			}
			uses[k] = append(uses[k], outputUse{r: r, digest: d})
		}
	}
	recorded := map[outputKey][]gnmicv1alpha1.OutputInstance{}
	for _, in := range previous {
		ns, _, ok := strings.Cut(in.Name, "/")
		if ok && in.Output != "" {
			recorded[Name(ns, in.Output)] = append(recorded[Name(ns, in.Output)], in)
		}
	}
	names := map[useKey]string{}
	var instances []gnmicv1alpha1.OutputInstance
	for _, k := range order {
		ns, output, _ := strings.Cut(k, "/")
		given := nameOutput(ns, output, uses[k], recorded[k])
		seen := map[string]bool{}
		for i, u := range uses[k] {
			name := given[i]
			names[useKey{pipeline: Name(u.r.pl.Namespace, u.r.pl.Name), output: k}] = name
			if !seen[name] {
				seen[name] = true
				instances = append(instances, gnmicv1alpha1.OutputInstance{Name: name, Output: output, ProcessorsDigest: u.digest})
			}
		}
	}
	slices.SortFunc(instances, func(a, b gnmicv1alpha1.OutputInstance) int { return strings.Compare(a.Name, b.Name) })
	if len(instances) > gnmicv1alpha1.MaxOutputInstances {
		instances = instances[:gnmicv1alpha1.MaxOutputInstances]
	}
	return names, instances
}

// nameOutput returns the gNMIc output name of each use of one Output (see nameOutputs), by index.
func nameOutput(ns, output string, uses []outputUse, recorded []gnmicv1alpha1.OutputInstance) []string {
	plain := Name(ns, output)
	given := make([]string, len(uses))
	if len(recorded) == 0 {
		split := slices.ContainsFunc(uses, func(u outputUse) bool { return u.digest != uses[0].digest })
		for i, u := range uses {
			given[i] = plain
			if split {
				given[i] = pipelineScoped(ns, u.r.pl.Name, output)
			}
		}
		return given
	}
	slices.SortFunc(recorded, func(a, b gnmicv1alpha1.OutputInstance) int { return strings.Compare(a.Name, b.Name) })
	taken := map[string]bool{}
	for i, u := range uses {
		var match []string
		for _, in := range recorded {
			if in.ProcessorsDigest == u.digest {
				match = append(match, in.Name)
			}
		}
		switch own := pipelineScoped(ns, u.r.pl.Name, output); {
		case len(match) == 0:
			continue
		case slices.Contains(match, own):
			given[i] = own
		case slices.Contains(match, plain):
			given[i] = plain
		default:
			given[i] = match[0]
		}
		taken[given[i]] = true
	}
	// The lists no recorded instance has, each with the Pipelines (in order) that use it.
	var digests []string
	groups := map[string][]int{}
	for i, u := range uses {
		if given[i] != "" {
			continue
		}
		if groups[u.digest] == nil {
			digests = append(digests, u.digest)
		}
		groups[u.digest] = append(groups[u.digest], i)
	}
	for _, d := range digests {
		candidates := []string{plain}
		for _, i := range groups[d] {
			candidates = append(candidates, pipelineScoped(ns, uses[i].r.pl.Name, output))
		}
		suffix := d
		if suffix == "" {
			suffix = "none"
		}
		last := pipelineScoped(ns, uses[groups[d][0]].r.pl.Name, output) + "/" + suffix
		candidates = append(candidates, last)
		name := ""
		for _, c := range candidates {
			if !taken[c] {
				name = c
				break
			}
		}
		for n := 2; name == ""; n++ { // only when another list holds the digest-suffixed name (a digest collision)
			if c := last + "-" + strconv.Itoa(n); !taken[c] {
				name = c
			}
		}
		taken[name] = true
		for _, i := range groups[d] {
			given[i] = name
		}
	}
	return given
}
