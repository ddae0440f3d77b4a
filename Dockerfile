# The faucet image for those with a Docker daemon: the same layout `make image`
# writes without one (hack/image): /faucet (static), CA certificates,
# /etc/passwd and /etc/group naming the numeric user 65532, no shell, no /tmp
# (pods mount one where they need it), OCI labels.
#   make docker-build IMG=registry.example/faucet-operator:0.1.0
FROM golang:1.26-bookworm AS build
WORKDIR /src
# Dependencies first, so source edits reuse the module layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/faucet ./cmd/faucet \
 && mkdir -p /out/etc \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /out/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /out/etc/group

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/etc/passwd /out/etc/group /etc/
COPY --from=build /out/faucet /faucet
ARG APP_VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title=faucet-operator \
      org.opencontainers.image.description="Stacks testnet STX faucet and its Kubernetes operator" \
      org.opencontainers.image.source=https://github.com/stxfaucet/faucet-operator \
      org.opencontainers.image.url=https://github.com/stxfaucet/faucet-operator \
      org.opencontainers.image.licenses=Apache-2.0 \
      org.opencontainers.image.version=${APP_VERSION} \
      org.opencontainers.image.revision=${REVISION}
USER 65532:65532
EXPOSE 3999 8080 8081
ENTRYPOINT ["/faucet"]
CMD ["manager"]
