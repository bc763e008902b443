# Both binaries in one image; compose.yaml runs `wallet serve` and `gl serve` from it.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/wallet ./cmd/wallet && \
    CGO_ENABLED=0 go build -trimpath -o /out/gl ./cmd/gl

FROM alpine:3.20
RUN adduser -D -u 10001 app
COPY --from=build /out/wallet /out/gl /usr/local/bin/
USER app
ENV LOG_FORMAT=json
