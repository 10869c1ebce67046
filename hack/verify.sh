#!/usr/bin/env bash
# verify.sh CMD... runs CMD (the regenerators) and fails if it changed any file. It compares the tree before and
# after rather than against HEAD, so it works on a clean clone (CI) and on a tree with uncommitted work alike.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

snapshot() {
	git status --porcelain=v1 --untracked-files=all
	git diff HEAD --binary 2>/dev/null | sha256sum
	git ls-files -o --exclude-standard -z | xargs -0 -r sha256sum
}

before=$(snapshot)
"$@"
after=$(snapshot)
if [ "$before" != "$after" ]; then
	echo "verify: regenerating changed the tree; commit the regenerated files:" >&2
	diff <(echo "$before") <(echo "$after") >&2 || true
	git status --porcelain >&2
	exit 1
fi
echo "verify: generated files, formatting and go.mod/go.sum are up to date"
