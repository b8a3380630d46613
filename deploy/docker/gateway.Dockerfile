# The MCP gateway: sovereign gateway. Build from the repository root:
#   docker build -f deploy/docker/gateway.Dockerfile --build-arg VERSION=0.1.0 --build-arg COMMIT=$(git rev-parse HEAD) -t ghcr.io/sovereign-fleet/sovereign-gateway:0.1.0 .
# (make images builds all five.)

# The build stage is the same in every Dockerfile here, so BuildKit builds
# the binary once for all five images. The context is the repository root
# (the Go workspace spans proto/ and services/*); .dockerignore keeps .git,
# bin/, data dirs, node_modules and local secrets out of it.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY . .
# No cgo anywhere (SQLite is modernc.org/sqlite): a static binary that runs
# on distroless/static. `sovereign version` prints VERSION.
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/sovereign-fleet/sovereign/services/sovereign.Version=${VERSION}" -o /out/sovereign ./services/sovereign/cmd/sovereign
# The data dir of the stateful images and the gateway's workspace (system
# tools), owned by the runtime user.
RUN mkdir -p /out/data /out/workspace && chmod 0700 /out/data /out/workspace

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="sovereign-gateway" \
      org.opencontainers.image.description="Sovereign MCP gateway: MCP over streamable HTTP in front of the browser fleet" \
      org.opencontainers.image.source="https://github.com/sovereign-fleet/sovereign" \
      org.opencontainers.image.url="https://github.com/sovereign-fleet/sovereign" \
      org.opencontainers.image.vendor="sovereign-fleet" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/sovereign /sovereign
# Listening beyond loopback requires an API token (sovereign token create)
# or OAuth; the gateway refuses to start otherwise. The operator console
# (8086) runs only when SOVEREIGN_ADMIN_TOKEN is set, and listens where
# SOVEREIGN_ADMIN_LISTEN says (127.0.0.1:8086 unless set).
ENV SOVEREIGN_LISTEN=0.0.0.0:8080 \
    SOVEREIGN_LOG_FORMAT=json \
    SOVEREIGN_WORKSPACE=/data/workspace
# The system tools' workspace (fs_*, shell_exec; SOVEREIGN_SYSTEM_TOOLS,
# off by default): mount a volume there, which then starts out owned by the
# runtime user. This image has no shell, so shell_exec fails in it; the fs_*
# tools work.
COPY --from=build --chown=65532:65532 /out/workspace /data/workspace
# MCP at /mcp, /healthz, /readyz, /metrics; the operator console.
EXPOSE 8080 8086
USER 65532:65532
ENTRYPOINT ["/sovereign", "gateway"]
