#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the module for the given time each (`make fuzz FUZZTIME=1m`). `go test -fuzz`
# takes one target of one package at a time, so the targets are found by name. Packages whose tests start a
# control plane (TestMain) hold no fuzz targets: each fuzz worker would start one.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
fuzztime=${1:-20s}
failed=0
while IFS= read -r file; do
	dir=$(dirname "$file")
	if grep -q '^func TestMain' "$dir"/*_test.go; then
		echo "fuzz.sh: $dir has a TestMain and fuzz targets; move the targets to a package without one" >&2
		exit 1
	fi
	for target in $(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' "$file"); do
		echo "== $dir $target ($fuzztime)"
		go test "./$dir" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" || failed=1
	done
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | sed 's|^\./||' | sort)
exit $failed
