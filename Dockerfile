# Builds the manager image: `make docker-build IMG=...`. BuildKit sets TARGETOS/TARGETARCH for
# `docker buildx build --platform ...`, so one Dockerfile serves every architecture.
FROM golang:1.26 AS builder
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
FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/manager .
COPY --from=builder /workspace/katastroma .
# Numeric, so Kubernetes can verify runAsNonRoot without resolving a user name.
USER 65532:65532

ENTRYPOINT ["/manager"]
