# The two commands a newcomer needs: `make run` and `make test`.
# Two modules joined by go.work: the product (walletgl, the root) and its tooling (walletgl/tools,
# in tools/: devrun, bench, chaos, soak), so the product's go.mod lists the product's
# dependencies only. PACKAGES names both; peers/watermill stays a module apart.
GO       ?= go
BIN      := bin
PACKAGES := ./... ./tools/...

.PHONY: docs screenshots run test test-race vulncheck fuzz chaos chaos-short soak soak-short bench peer-watermill build generate check-generate vet check-deploy lint-openapi fmt-check ci clean

## run: both services in the foreground against the local PostgreSQL and NATS (starts a
## JetStream server of its own when none answers); Ctrl-C stops them gracefully. It says what it
## does: the first build downloads and compiles every dependency, which takes minutes.
run:
	@echo "make run: building wallet, gl and devrun into $(BIN)/ (the first build takes a couple of minutes)…"
	@$(MAKE) --no-print-directory build
	@$(GO) build -o $(BIN)/devrun ./tools/cmd/devrun
	@echo "make run: starting devrun, which runs both services"
	@$(BIN)/devrun $(BIN)/wallet $(BIN)/gl

## test: every test of both modules against the real PostgreSQL and JetStream (TEST_DATABASE_URL,
## TEST_NATS_URL), including the slow ones a plain `go test ./...` leaves out (build tag slow).
TAGS     := slow
test:
	$(GO) test -tags $(TAGS) -count=1 -timeout 14m $(PACKAGES)

## test-race: the same under the race detector, as CI runs it.
test-race:
	$(GO) test -race -tags $(TAGS) -count=1 -timeout 14m $(PACKAGES)

## chaos: the fault-injection harness, every scenario in full (SCENARIO=name,… SEED=n to choose).
SCENARIO ?= all
SEED     ?= $(shell date +%s)
chaos:
	$(GO) run ./tools/cmd/chaos -scenario $(SCENARIO) -seed $(SEED)

## chaos-short: every scenario in its short form, as CI runs it.
chaos-short:
	$(GO) run ./tools/cmd/chaos -short -scenario $(SCENARIO) -seed $(SEED)

## soak: an hour of steady mixed load with every limit scaled down and outages at intervals,
## against a PostgreSQL cluster of its own (docs/operations.md, "Soak"); a line a window, a CSV and
## a plot in soak/results/, exit 1 unless everything stayed bounded and every check held.
## ARGS adds flags (e.g. ARGS='-duration 20m -stream-max-bytes 4194304').
SOAK_SEED ?= $(shell date +%s)
soak:
	$(GO) run ./tools/cmd/soak -seed $(SOAK_SEED) $(ARGS)

## soak-short: the same in five minutes, limits scaled down further, as CI runs it.
soak-short:
	$(GO) run ./tools/cmd/soak -short -seed $(SOAK_SEED) $(ARGS)

## bench: the benchmark harness against pgbench's limit in the same run, about three minutes
## (ARGS=-quick for about one; ARGS=-plot for a latency PNG). Reports go to bench/results/.
ARGS ?=
bench:
	$(GO) run ./tools/cmd/bench $(ARGS)

## peer-watermill: the backlog phase's Watermill peer (peers/watermill, a module of its own outside
## the workspace, on the versions its go.mod pins; not part of make test): Watermill's SQL
## forwarder draining PEER_ROWS rows into JetStream; prints {"rows":…,"seconds":…,
## "events_per_second":…}. It runs in a scratch database, created here on the server PEER_PG and
## dropped afterwards, with a stream named after this shell's pid.
## PEER_ARGS adds flags (e.g. PEER_ARGS='-batch-size 1000').
PEER_ROWS     ?= 100000
PEER_PG       ?= postgres://postgres@127.0.0.1:5432
PEER_NATS_URL ?= nats://127.0.0.1:4222
PEER_ARGS     ?=
peer-watermill:
	@db=peer_watermill_$$$$; \
	psql -X -q "$(PEER_PG)/postgres" -c "CREATE DATABASE $$db" || exit 1; \
	GOWORK=off $(GO) -C peers/watermill run . -rows $(PEER_ROWS) -database-url "$(PEER_PG)/$$db?sslmode=disable" \
		-nats-url "$(PEER_NATS_URL)" -stream PEER_WATERMILL_$$$$ $(PEER_ARGS); rc=$$?; \
	psql -X -q "$(PEER_PG)/postgres" -c "DROP DATABASE IF EXISTS $$db WITH (FORCE)"; exit $$rc

## docs: the settings tables of docs/configuration.md, generated from the binaries' help
## (make test fails when they differ).
docs:
	$(GO) test -count=1 -run TestTheSettingsTableIsTheHelp ./cmd/wallet ./cmd/gl -args -update-docs

## screenshots: docs/img/console-*.png, taken by the real-browser test of the console (needs
## chromium, PostgreSQL and NATS as the tests do).
screenshots:
	$(GO) test -tags slow -count=1 -run TestTheConsoleInARealBrowser ./internal/e2e/ -args -update-screenshots

build:
	$(GO) build -o $(BIN)/wallet ./cmd/wallet
	$(GO) build -o $(BIN)/gl ./cmd/gl

## generate: Go code from db/queries and db/schema (sqlc runs as a Go tool declared in go.mod).
generate:
	$(GO) tool sqlc generate

## check-generate: fails when the committed generated code is stale.
check-generate: generate
	@git diff --exit-code -- internal/ || (echo "generated code is stale: run make generate and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain --untracked-files=all -- internal/)" || (echo "generate produced new files: commit them" >&2; git status --porcelain -- internal/ >&2; exit 1)

vet:
	$(GO) vet -tags $(TAGS) $(PACKAGES)

## check-deploy: deploy/ with promtool (Debian's prometheus package): the alert rules, their unit
## tests and the example scrape config (syntax only: its key files need not exist); then the
## dashboard's queries, and that every metric deploy/ names is one internal/metrics registers.
PROMTOOL ?= promtool
check-deploy:
	$(PROMTOOL) check rules deploy/prometheus/alerts.yml
	$(PROMTOOL) test rules deploy/prometheus/alerts_test.yml
	$(PROMTOOL) check config --syntax-only deploy/prometheus/prometheus.yml
	PROMTOOL=$(PROMTOOL) $(GO) test -count=1 -run 'Dashboard|AlertRules|CheckOfNames' ./internal/metrics

## lint-openapi: both OpenAPI documents with Redocly CLI (npm, pinned; needs Node.js 20 or later
## and the npm registry or its cache): its recommended rules as errors (redocly.yaml).
REDOCLY ?= npx --yes @redocly/cli@2.77.0
OPENAPI := internal/wallet/httpapi/openapi.json internal/gl/httpapi/openapi.json
lint-openapi:
	$(REDOCLY) lint $(OPENAPI)

## vulncheck: known vulnerabilities in the code's call graph (govulncheck, a Go tool in go.mod).
## It needs the vulnerability database at vuln.go.dev (or VULNDB=file:///path to a local copy);
## where neither answers it says so and passes, since it cannot give a verdict.
VULNDB ?= https://vuln.go.dev
vulncheck:
	@if $(GO) tool govulncheck -db $(VULNDB) -mode source -scan package ./internal/problem >/dev/null 2>&1; then \
		$(GO) tool govulncheck -db $(VULNDB) $(PACKAGES); \
	else echo "vulncheck: the vulnerability database at $(VULNDB) does not answer from this machine; not checked"; fi

## fuzz: each fuzz target for FUZZTIME (their seed corpora run in every make test).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./internal/web
	$(GO) test -run '^$$' -fuzz '^FuzzText$$' -fuzztime $(FUZZTIME) ./internal/web
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeEnvelope$$' -fuzztime $(FUZZTIME) ./internal/events/contract

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; test -z "$$out" || (echo "not gofmt-formatted:" >&2; echo "$$out" >&2; exit 1)

## ci: what .ci/run runs.
ci: check-generate fmt-check vet check-deploy lint-openapi test chaos-short

clean:
	rm -rf $(BIN) .run
