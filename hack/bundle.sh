#!/usr/bin/env bash
# bundle.sh generates the OLM bundle (bundle/, bundle.Dockerfile) and the file-based catalog (catalog/,
# catalog.Dockerfile) from config/, then validates both. `make bundle` runs it with the tools and coordinates from
# the Makefile; `make verify` runs it too, so the committed bundle and catalog always match the sources.
#
# Reproducible: two runs give the same tree. operator-sdk stamps createdAt with the current time, so it is put back
# to the value pinned in the CSV base (bump it when cutting a release).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

: "${VERSION:=0.1.0}"
: "${IMG:=ghcr.io/quartet-dev/quartet-operator:v${VERSION}}"
: "${BUNDLE_IMG:=ghcr.io/quartet-dev/quartet-operator-bundle:v${VERSION}}"
: "${CHANNELS:=candidate}"
: "${DEFAULT_CHANNEL:=candidate}"
# true for a release: operator-sdk resolves every image (the manager's and the RELATED_IMAGE_* ones) to its
# digest, which needs the registry, and the CSV then declares the disconnected feature. Offline builds keep tags.
: "${USE_IMAGE_DIGESTS:=false}"
: "${KUSTOMIZE:=bin/kustomize}"
: "${OPERATOR_SDK:=bin/operator-sdk}"
: "${OPM:=bin/opm}"
: "${CATALOG_RENDER:=bin/catalogrender}"
# The opm image that serves the catalog; its tag follows the opm the catalog is rendered with.
: "${OPM_BASE_IMAGE:=quay.io/operator-framework/opm:v1.59.0}"

package=quartet-operator
base=config/manifests/bases/${package}.clusterserviceversion.yaml
csv=bundle/manifests/${package}.clusterserviceversion.yaml

fail() { echo "bundle.sh: $*" >&2; exit 1; }

# replace FILE REGEX REPLACEMENT: sed -E in place, failing unless the pattern matched at least once.
replace() {
	grep -Eq -- "$2" "$1" || fail "$1: nothing matches /$2/"
	sed -E -i "s|$2|$3|" "$1"
}

created_at=$(sed -nE 's/^    createdAt: "?([^"]*)"?$/\1/p' "$base")
[ -n "$created_at" ] || fail "$base has no metadata.annotations.createdAt to pin"

# 1. The CSV base: owned CRDs with their descriptors from the +operator-sdk:csv markers under apis/.
"$OPERATOR_SDK" generate kustomize manifests --apis-dir apis -q --interactive=false
# operator-sdk pluralises some kinds differently from controller-gen (TenantQuota -> tenantquota), which leaves the
# owned CRD without its description; name each owned CRD after the CRD controller-gen generated for that kind.
base=config/manifests/bases/${package}.clusterserviceversion.yaml
for crd in config/crd/bases/*.yaml; do
	file=$(basename "$crd" .yaml)   # <group>_<plural>
	group=${file%%_*} plural=${file#*_}
	singular=$(awk '/^    singular:/ {print $2; exit}' "$crd")
	[ -n "$singular" ] && [ "$singular" != "$plural" ] &&
		sed -i "s/^\(      name: \)${singular}\.${group}\$/\1${plural}.${group}/" "$base"
done

# 2. The manager image everything refers to (a no-op for the default IMG, which config/manager already holds),
#    and the katastroma image of the Platform sample, which is the same image (it ships /katastroma): the
#    alm-example must name a released image, never a placeholder.
(cd config/manager && "$KUSTOMIZE" edit set image "controller=${IMG}")
replace config/samples/gitops_v1alpha1_platform.yaml '^(  image: )[^ ]+' "\\1${IMG}"

# 3. The bundle. Start from an empty bundle/ so objects that left config/ leave the bundle too.
rm -rf bundle
"$KUSTOMIZE" build config/manifests | "$OPERATOR_SDK" generate bundle -q --overwrite --version "$VERSION" \
	--channels "$CHANNELS" --default-channel "$DEFAULT_CHANNEL" --use-image-digests="$USE_IMAGE_DIGESTS"

# 4. Normalise what is not reproducible or not derived from config/.
replace "$csv" '^(    createdAt: ).*$' "\\1\"${created_at}\""
replace "$csv" '^(    containerImage: ).*$' "\\1${IMG}"
# operator-sdk lists the RELATED_IMAGE_* variables (every image the operator starts) in spec.relatedImages, by
# digest when it pins them; the manager's own image is among them (RELATED_IMAGE_KATASTROMA).
grep -q "^  - image: ${IMG}\$" "$csv" || fail "$csv: relatedImages does not list the manager image ${IMG}"
if [ "$USE_IMAGE_DIGESTS" = true ]; then
	# Every image is pinned by digest and listed, so a disconnected cluster's mirrors can serve them all.
	replace "$csv" '^(    features\.operators\.openshift\.io/disconnected: ).*$' '\1"true"'
fi
# The OpenShift releases the bundle supports (the catalog tooling reads it from the bundle image's metadata), kept
# equal to the CSV base's annotation, which must start at the release that ships minKubeVersion.
openshift_versions=$(sed -nE 's/^    com\.redhat\.openshift\.versions: "?([^"]*)"?$/\1/p' "$base")
[ -n "$openshift_versions" ] || fail "$base has no metadata.annotations[com.redhat.openshift.versions]"
printf '\n  # OpenShift releases this bundle supports.\n  com.redhat.openshift.versions: %s\n' "$openshift_versions" \
	>>bundle/metadata/annotations.yaml
replace bundle.Dockerfile '^(LABEL operators\.operatorframework\.io\.test\.config\.v1=.*)$' \
	"\\1\\n\\n# OpenShift releases this bundle supports.\\nLABEL com.redhat.openshift.versions=${openshift_versions}"
if grep -REl '^kind: (Certificate|Issuer|ClusterIssuer)$' bundle/manifests >/dev/null; then
	fail "bundle/manifests holds cert-manager objects; OLM provides the webhook certificates"
fi

# 5. Validate with the operatorframework suite; any warning fails the build, like an error.
out=$("$OPERATOR_SDK" bundle validate ./bundle --select-optional suite=operatorframework 2>&1) || { echo "$out" >&2; fail "bundle validation failed"; }
if grep -Eq 'level=(warning|error)' <<<"$out"; then
	echo "$out" >&2
	fail "bundle validation reported warnings"
fi

# 6. The file-based catalog, rendered from the committed opm basic template config/catalog/template.yaml by opm's
#    own template code (catalogrender). Bundle images are not pulled: the bundle being built is read from
#    bundle.Dockerfile as opm would read the built image, and each released one from the document `make
#    release-freeze` rendered when it was cut (config/catalog/releases/<version>.yaml); olm.csv.metadata instead of
#    the manifests inlined (OLM unpacks the bundle image to install).
releases=config/catalog/releases
render() {
	"$CATALOG_RENDER" --bundle-image="$BUNDLE_IMG" --bundle-dockerfile=bundle.Dockerfile --bundle-context=. \
		--migrate-level=bundle-object-to-csv-metadata "$@"
}
if [ "${1:-}" = freeze ]; then
	mkdir -p "$releases"
	[ -e "$releases/${VERSION}.yaml" ] && fail "$releases/${VERSION}.yaml exists: bump VERSION for the next release"
	render --bundle-only >"$releases/${VERSION}.yaml"
	go run ./hack/crdsurface bundle/manifests >"$releases/${VERSION}.crds.json"
	echo "bundle.sh: froze ${VERSION} into $releases; now bump VERSION (Makefile) and createdAt (CSV base), and add"
	echo "the next version to config/catalog/template.yaml (docs/install.md, Releasing)"
	exit 0
fi
rm -rf catalog
mkdir -p "catalog/${package}"
render --template=config/catalog/template.yaml --frozen="$releases" >"catalog/${package}/index.yaml"
"$OPM" validate catalog
rm -f catalog.Dockerfile
"$OPM" generate dockerfile catalog --base-image="$OPM_BASE_IMAGE" --builder-image="$OPM_BASE_IMAGE" >/dev/null
