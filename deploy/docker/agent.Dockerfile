# The agent orchestrator (LLM tool loops on the fleet): sovereign agent.
# Stateless (runs live in NATS KV): run as many replicas as you like. Build
# from the repository root:
#   docker build -f deploy/docker/agent.Dockerfile -t ghcr.io/sovereign-fleet/sovereign-agent:dev .

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

# distroless/static carries the CA certificates the agent needs for HTTPS
# to the model provider.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="sovereign-agent" \
      org.opencontainers.image.description="Sovereign agent orchestrator: LLM tool loops (any OpenAI-compatible API) on the browser fleet" \
      org.opencontainers.image.source="https://github.com/sovereign-fleet/sovereign" \
      org.opencontainers.image.url="https://github.com/sovereign-fleet/sovereign" \
      org.opencontainers.image.vendor="sovereign-fleet" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/sovereign /sovereign
# The model provider comes from SOVEREIGN_LLM_BASE_URL, SOVEREIGN_LLM_MODEL
# and SOVEREIGN_LLM_API_KEY(_FILE) at run time (or the console's chat
# settings), never from the image. No local state: no volume.
ENV SOVEREIGN_AGENT_LISTEN=0.0.0.0:8094 \
    SOVEREIGN_LOG_FORMAT=json
# /healthz, /readyz (NATS), /metrics.
EXPOSE 8094
USER 65532:65532
ENTRYPOINT ["/sovereign", "agent"]
