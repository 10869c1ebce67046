package images

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Stage is what a Dockerfile's final stage sets on the image it produces.
type Stage struct {
	From       string
	User       string
	Entrypoint []string
	WorkingDir string
	Labels     map[string]string
	// Args are the stage's ARGs with their defaults, which LABEL values may name as ${NAME} or $NAME.
	Args map[string]string
	// Copies are the COPY instructions, in order.
	Copies []Copy
}

// Copy is one COPY instruction: From is the --from stage ("" for the build context).
type Copy struct {
	From    string
	Sources []string
	Dest    string
}

// ParseFinalStage reads a Dockerfile and returns its last stage. It understands the instructions the repository's
// Dockerfile uses (FROM, WORKDIR, COPY, USER, ENTRYPOINT in exec form, LABEL key=value) and line continuations;
// an ENTRYPOINT in shell form is an error, since the offline image could not reproduce the shell.
func ParseFinalStage(r io.Reader) (Stage, error) {
	var stage Stage
	lines, err := logicalLines(r)
	if err != nil {
		return stage, err
	}
	for _, line := range lines {
		instr, rest, _ := strings.Cut(line.text, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			// FROM [--platform=…] image [AS name]
			fields := slices.DeleteFunc(strings.Fields(rest), func(f string) bool { return strings.HasPrefix(f, "--") })
			stage = Stage{From: fields[0], Labels: map[string]string{}, Args: map[string]string{}}
		case "ARG":
			name, value, _ := strings.Cut(rest, "=")
			stage.Args[strings.TrimSpace(name)] = strings.Trim(strings.TrimSpace(value), `"`)
		case "USER":
			stage.User = rest
		case "WORKDIR":
			stage.WorkingDir = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &stage.Entrypoint); err != nil {
				return stage, fmt.Errorf("line %d: ENTRYPOINT must be in exec (JSON) form: %w", line.number, err)
			}
		case "LABEL":
			if err := parseLabels(rest, stage.Labels); err != nil {
				return stage, fmt.Errorf("line %d: %w", line.number, err)
			}
			// As the builder does: a label's value is expanded with the stage's ARGs (their defaults here).
			for k, v := range stage.Labels {
				stage.Labels[k] = os.Expand(v, func(name string) string { return stage.Args[name] })
			}
		case "COPY":
			c, err := parseCopy(rest)
			if err != nil {
				return stage, fmt.Errorf("line %d: %w", line.number, err)
			}
			stage.Copies = append(stage.Copies, c)
		}
	}
	if stage.From == "" {
		return stage, fmt.Errorf("no FROM instruction")
	}
	return stage, nil
}

type logicalLine struct {
	number int
	text   string
}

// logicalLines drops comments and blank lines and joins lines ending in a backslash.
func logicalLines(r io.Reader) ([]logicalLine, error) {
	var out []logicalLine
	var pending strings.Builder
	start := 0
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && pending.Len() == 0) {
			continue
		}
		if pending.Len() == 0 {
			start = n
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			pending.WriteString(cont + " ")
			continue
		}
		pending.WriteString(line)
		out = append(out, logicalLine{number: start, text: strings.TrimSpace(pending.String())})
		pending.Reset()
	}
	return out, sc.Err()
}

func parseCopy(rest string) (Copy, error) {
	var c Copy
	var args []string
	for _, f := range strings.Fields(rest) {
		if v, ok := strings.CutPrefix(f, "--from="); ok {
			c.From = v
			continue
		}
		if strings.HasPrefix(f, "--") {
			continue // --chown, --chmod, --link: not used by the offline image's checks
		}
		args = append(args, f)
	}
	if len(args) < 2 {
		return c, fmt.Errorf("COPY %q needs a source and a destination", rest)
	}
	c.Sources, c.Dest = args[:len(args)-1], args[len(args)-1]
	return c, nil
}

// parseLabels reads key=value pairs, values optionally double-quoted (no escapes inside quotes).
func parseLabels(rest string, into map[string]string) error {
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || strings.ContainsAny(key, " \t") {
			return fmt.Errorf("LABEL %q is not key=value", rest)
		}
		key = strings.Trim(key, `"`)
		var value string
		if strings.HasPrefix(after, `"`) {
			end := strings.Index(after[1:], `"`)
			if end < 0 {
				return fmt.Errorf("LABEL %s: unterminated quote", key)
			}
			value, rest = after[1:1+end], after[2+end:]
		} else {
			value, rest, _ = strings.Cut(after, " ")
		}
		into[key] = value
	}
	return nil
}
