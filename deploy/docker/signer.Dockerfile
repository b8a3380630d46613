# The signer (Nostr identities, window.nostr): sovereign signer. Run ONE
# replica. Build from the repository root:
#   docker build -f deploy/docker/signer.Dockerfile -t ghcr.io/sovereign-fleet/sovereign-signer:dev .

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
LABEL org.opencontainers.image.title="sovereign-signer" \
      org.opencontainers.image.description="Sovereign signer: Nostr identities for login and window.nostr (run one replica)" \
      org.opencontainers.image.source="https://github.com/sovereign-fleet/sovereign" \
      org.opencontainers.image.url="https://github.com/sovereign-fleet/sovereign" \
      org.opencontainers.image.vendor="sovereign-fleet" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/sovereign /sovereign
# Remembered identities (NIP-49 encrypted with SOVEREIGN_SIGNER_PASSPHRASE)
# live in /data/identities; mount a volume there.
COPY --from=build --chown=65532:65532 /out/data /data
ENV SOVEREIGN_DATA_DIR=/data \
    SOVEREIGN_SIGNER_LISTEN=0.0.0.0:8093 \
    SOVEREIGN_LOG_FORMAT=json
VOLUME ["/data"]
# /healthz, /readyz (NATS), /metrics.
EXPOSE 8093
USER 65532:65532
ENTRYPOINT ["/sovereign", "signer"]
