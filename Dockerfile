# One image for the manager and the faucet server (`faucet manager`, `faucet serve`).
# Build: make docker-build IMG=registry.example/faucet-operator:v0.1.0
FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so source edits reuse the module layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/faucet ./cmd/faucet

# Static binary on distroless: no shell, no package manager, non-root.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/faucet /faucet
USER 65532:65532
EXPOSE 3999 8080 8081
ENTRYPOINT ["/faucet"]
CMD ["manager"]
