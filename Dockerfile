# Builds the manager image: `make docker-build IMG=...`. BuildKit sets TARGETOS/TARGETARCH for
# `docker buildx build --platform ...`, so one Dockerfile serves every architecture.
# The builder runs on the build machine's platform and cross-compiles (the binaries are static), so a
# multi-architecture build needs no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH

WORKDIR /workspace
# Download the modules in a layer of their own, so it is cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download

# Only the packages the manager is built from (see .dockerignore).
COPY cmd/ cmd/
COPY apis/ apis/
COPY controllers/ controllers/
COPY internal/ internal/

# A static binary (CGO off) for the distroless image. GOARCH is left empty when TARGETARCH is unset (plain
# `docker build`), so Go builds for the build host's architecture.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -ldflags "-s -w" -o manager ./cmd
# The gitops pipeline stages (katastroma <stage>) ship in the same image.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -ldflags "-s -w" -o katastroma ./cmd/katastroma

# distroless/static: no shell or package manager, only CA certificates and tzdata; `nonroot` runs as 65532.
# Pinned by digest so a rebuild of the same release gets the same base (bump it deliberately, with
# `crane digest gcr.io/distroless/static:nonroot`). A UBI base cannot be built offline here; certification
# reviewers accept a distroless/scratch base for a static binary (see docs/install.md, "Image").
FROM gcr.io/distroless/static:nonroot@sha256:e2e927ec666bae08560abb3c55d0659eceabb657f56b6782ab500a9fc7f555e3
ARG VERSION=0.1.0
ARG RELEASE=1
# The labels Red Hat certification (preflight's HasRequiredLabel) and OCI tooling read.
LABEL name="quartet-operator" \
      vendor="Quartet" \
      maintainer="Quartet maintainers <maintainers@quartet.dev>" \
      version="${VERSION}" \
      release="${RELEASE}" \
      summary="Kubernetes operator for Fleet Management, gNMIc telemetry, AI agents and event-driven GitOps" \
      description="quartet-operator runs four systems side by side: Grafana Fleet Management sync, gNMIc network telemetry collectors, AI agent workloads with canaries and an MCP registry, and the katastroma GitOps pipeline stages." \
      io.k8s.display-name="quartet-operator" \
      org.opencontainers.image.title="quartet-operator" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/quartet-dev/quartet-operator"
WORKDIR /
# Certification wants the licence terms inside the image, under /licenses.
COPY LICENSE /licenses/LICENSE
COPY --from=builder /workspace/manager .
COPY --from=builder /workspace/katastroma .
# Numeric, so Kubernetes can verify runAsNonRoot without resolving a user name.
USER 65532:65532

ENTRYPOINT ["/manager"]
