# yip-router build, test and benchmark entry points. Run as root for the
# namespace/TUN tests and the demo; everything else works as any user.

GO          ?= go
BIN         := bin
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(BIN)/staticcheck-$(STATICCHECK_VERSION)
# wireguard-go for bench-compare and bench-scale, pinned: the module's
# newest commit on the Go proxy (`wireguard-go --version` prints
# v0.0.20250522).
WG_GO_VERSION := v0.0.0-20260522210424-ecfc5a8d5446
WG_GO       := $(BIN)/wireguard-go-$(WG_GO_VERSION)
ROUNDS      ?= 3
DURATION    ?= 8
QUICK       ?=
UDP_RATE    ?=
TCP_CC      ?= cubic,bbr
YIP_EXTRA   ?=
IMPAIR      ?=
FLOODS      ?=
FUZZTIME    ?= 10s
BENCHTIME   ?= 1s
BENCHCOUNT  ?= 5
PEERS       ?= 10000
SHARDS      ?= 2
SCALE_EXTRA ?=
# Releases are annotated tags vX.Y.Z (CHANGELOG.md); between them and
# without any, describe names the commit. packaging/deb-version maps it to
# the .deb's version.
VERSION     := $(shell git describe --always --dirty --match 'v[0-9]*' 2>/dev/null || echo dev)
LDFLAGS     := -X github.com/yip-router/yip-router/internal/buildinfo.version=$(VERSION)
NFPM_VERSION := v2.48.0
NFPM        := $(BIN)/nfpm-$(NFPM_VERSION)
export GOTOOLCHAIN := local

.PHONY: all build deb deb-check lintian lintian-install test test-deps cover promtool-check bench-e2e bench-compare bench-wan bench-floods bench-tools bench-scale unit uniformity lint fmt vet staticcheck shellcheck shellcheck-install bench fuzz demo deps clean

all: build

deps:
	$(GO) mod download

build: deps
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/yip-router ./cmd/yip-router

# deb: bin/yip-router_VERSION_ARCH.deb (README, "Install"), packed by nfpm
# (pinned, installed into bin/) as packaging/nfpm.yaml says: the binary
# (static, stripped) in /usr/sbin, yip-tune and its sysctl drop-in, the
# systemd unit, docs, and man pages and bash/zsh/fish completions that the
# binary's command tree generates (man pages: a build with the mangen tag,
# cmd/yip-router/man.go). File times and dates are the commit's.
DEB_VERSION  = $(shell packaging/deb-version '$(VERSION)')
DEB_ARCH    := $(shell $(GO) env GOARCH | sed 's/^386$$/i386/; s/^arm$$/armhf/; s/^ppc64le$$/ppc64el/')
DEB          = $(BIN)/yip-router_$(DEB_VERSION)_$(DEB_ARCH).deb
DEB_STAGE   := $(BIN)/deb
DEB_DOCS    := README.md CHANGELOG.md docs/USER_GUIDE.md docs/CONFIG.md docs/DEPLOY.md docs/SHOW.md docs/SECURITY.md
DEB_MAINTAINER := The yip-router authors <dev@yip-router.invalid>
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)

deb: deps $(NFPM)
	@packaging/deb-version '$(VERSION)' >/dev/null
	rm -rf $(DEB_STAGE) $(BIN)/yip-router_*.deb
	mkdir -p $(DEB_STAGE)/man $(DEB_STAGE)/doc
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(DEB_STAGE)/yip-router ./cmd/yip-router
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run -trimpath -tags mangen -ldflags "$(LDFLAGS)" ./cmd/yip-router man-pages $(DEB_STAGE)/man
	cp tuning/yip-tune.8 $(DEB_STAGE)/man/
	gzip -9n $(DEB_STAGE)/man/*.8
	for sh in bash zsh fish; do $(DEB_STAGE)/yip-router completion $$sh > $(DEB_STAGE)/completion.$$sh || exit 1; done
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) packaging/changelog '$(DEB_VERSION)' '$(VERSION)' '$(DEB_MAINTAINER)' > $(DEB_STAGE)/doc/changelog
	for f in $(DEB_STAGE)/doc/changelog $(DEB_DOCS); do gzip -9n < $$f > $(DEB_STAGE)/doc/$${f##*/}.gz || exit 1; done
	rm $(DEB_STAGE)/doc/changelog
	DEB_VERSION='$(DEB_VERSION)' DEB_ARCH='$(DEB_ARCH)' DEB_STAGE='$(DEB_STAGE)' DEB_MAINTAINER='$(DEB_MAINTAINER)' \
	  SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(NFPM) package -f packaging/nfpm.yaml -p deb -t $(DEB)

$(NFPM):
	@mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN)) $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)
	mv $(BIN)/nfpm $@

# deb-check: the package through lintian (errors fail, warnings show; the
# exceptions, each with its reason, are in packaging/lintian-overrides),
# then packaging/deb_test.go unpacks it and runs what it installs.
deb-check: lintian
	YIP_DEB=$(abspath $(DEB)) $(GO) test -count=1 -run '^TestDeb$$' ./packaging/

lintian: deb lintian-install
	@if ! command -v lintian >/dev/null 2>&1; then echo "lintian skipped: lintian missing (Debian: apt-get install lintian)"; exit 0; fi; \
	echo "lintian $(DEB)"; lintian --fail-on error $(DEB)

# lintian comes from Debian when missing, as root (others skip the check).
lintian-install:
	@if ! command -v lintian >/dev/null 2>&1 && [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update >/dev/null && apt-get install -y --no-install-recommends lintian; \
	fi

# test = lint + unit tests under the race detector (root-only tests skip
# themselves with a message when not root) + the statistical wire tests,
# which are single-goroutine and too slow under -race to be worth it there,
# + the alert rules' promtool checks (about a second) + the .deb, lintian
# on it and the test of what it installs (deb-check).
test: lint test-deps unit uniformity promtool-check deb-check

# The end-to-end tests need iproute2 and, for the loss test, iptables; as
# root on Debian, install what is missing (others skip those tests).
test-deps:
	@if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  missing=""; \
	  command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	  command -v iptables >/dev/null 2>&1 || missing="$$missing iptables"; \
	  command -v ping >/dev/null 2>&1 || missing="$$missing iputils-ping"; \
	  command -v ndpiReader >/dev/null 2>&1 || missing="$$missing libndpi-bin"; \
	  if [ -n "$$missing" ]; then apt-get update >/dev/null && apt-get install -y $$missing; fi; \
	fi

# promtool checks and unit-tests the alert rules (deploy/prometheus/). A
# promtool on PATH is used; otherwise it is taken out of Debian's
# prometheus package with apt-get download (no install: no root needed and
# no Prometheus service started). Skipped with a message when neither works.
PROMTOOL_SYS := $(shell command -v promtool 2>/dev/null)
PROMTOOL     := $(if $(PROMTOOL_SYS),$(PROMTOOL_SYS),$(BIN)/promtool)

$(BIN)/promtool:
	@mkdir -p $(BIN)
	@if command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1; then \
	  tmp=$$(mktemp -d); \
	  ( cd $$tmp && { apt-get download prometheus >/dev/null 2>&1 || \
	      { [ "$$(id -u)" -eq 0 ] && apt-get update >/dev/null && apt-get download prometheus >/dev/null 2>&1; }; } && \
	    dpkg-deb --fsys-tarfile prometheus_*.deb | tar -x ./usr/bin/promtool && \
	    mv usr/bin/promtool $(abspath $@) ) || echo "could not get promtool from Debian's prometheus package"; \
	  rm -rf $$tmp; \
	fi

promtool-check: $(PROMTOOL)
	@if [ ! -x $(PROMTOOL) ]; then echo "promtool-check skipped: promtool missing (Debian: apt-get install prometheus)"; exit 0; fi; \
	set -e; \
	$(PROMTOOL) check rules deploy/prometheus/alerts.yml; \
	$(PROMTOOL) test rules deploy/prometheus/alerts_test.yml

unit: deps
	$(GO) test -race -count=1 ./...

# cover: statement coverage of COVER_PKGS from the tests that run in
# memory, as any user runs them: as root, inside a user namespace where
# the tests see uid 65534 (files stay root's), so those that need root
# skip themselves. Profile: bin/cover.out (go tool cover -func=bin/cover.out).
COVER_PKGS ?= ./control/ ./shard/
cover: deps
	@mkdir -p $(BIN)
	@asuser=""; [ "$$(id -u)" -ne 0 ] || asuser="unshare --user --map-user=65534 --map-group=65534"; \
	$$asuser $(GO) test -count=1 -coverprofile=$(BIN)/cover.out $(COVER_PKGS)

uniformity: deps
	$(GO) test -count=1 -run 'Uniformity' ./...

lint: fmt vet staticcheck shellcheck

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# vet and staticcheck also read the mangen build (cmd/yip-router/man.go).
vet: deps
	$(GO) vet ./...
	$(GO) vet -tags mangen ./cmd/yip-router

$(STATICCHECK):
	@mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN)) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(BIN)/staticcheck $@

staticcheck: $(STATICCHECK) deps
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags mangen ./cmd/yip-router

# shellcheck comes from Debian when missing.
shellcheck-install:
	@command -v shellcheck >/dev/null 2>&1 || { \
	  command -v apt-get >/dev/null 2>&1 || { echo "shellcheck missing: install it (Debian: apt-get install shellcheck)"; exit 1; }; \
	  SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
	  $$SUDO apt-get update >/dev/null && $$SUDO apt-get install -y shellcheck; }

shellcheck: shellcheck-install
	shellcheck tuning/yip-tune packaging/deb-version packaging/changelog packaging/postinst packaging/prerm packaging/postrm

# bench runs every Go benchmark; results and the commands behind the
# numbers quoted in docs/BENCHMARKS.md.
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./...

# bench-e2e: iperf3 through the tunnel between two namespaces (root).
bench-e2e: build test-deps
	@command -v iperf3 >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y iperf3; }
	YIP_BENCH_E2E=1 $(GO) test -count=1 -v -run TestE2EThroughput ./tests/bench/

# bench-compare: yip-router against wireguard-go on the same namespaces,
# interleaved, medians over ROUNDS (root; docs/BENCHMARKS.md). QUICK=1 is
# a smoke test (1 round, 3 s runs). UDP_RATE is the fixed-rate UDP test's
# offered rate (default 1G, 100M with IMPAIR). IMPAIR puts both
# implementations through the WAN impairment bridge (internal/impair),
# e.g. IMPAIR="-delay 25ms -loss 0.01" (flags -delay -jitter -loss -ge-bad
# -ge-burst -ge-rate -bottleneck -queue -seed, each direction; the endpoints' TCP buffers
# are then raised to 32 MiB, -tcp-buf in IMPAIR overrides). TESTS keeps
# only the tests whose names start with its comma-separated prefixes
# (e.g. TESTS=tcp1,udp-100M). FLOODS adds the flood rows (garbage, init,
# replay or all, comma-separated; see bench-floods). Results go to
# docs/bench/compare-* (compare-*-wan.* with IMPAIR).
bench-compare: build bench-tools
	$(BIN)/bench-compare -yip $(BIN)/yip-router -wg $(WG_GO) -commit $(VERSION) \
	  -rounds $(ROUNDS) -duration $(DURATION) $(if $(UDP_RATE),-rate $(UDP_RATE)) -cc '$(TCP_CC)' $(if $(filter 1 yes true,$(QUICK)),-quick) \
	  $(if $(YIP_EXTRA),-yip-extra '$(YIP_EXTRA)') $(if $(TESTS),-tests '$(TESTS)') $(if $(FLOODS),-floods '$(FLOODS)') $(IMPAIR)

# bench-floods: the flood rows alone (issue 27), both implementations in
# one run: one TCP flow (iperf3, FLOOD_CC) unflooded, then for each flood
# in FLOOD_KINDS the same flow under the flood itself (the attacker
# sending flat out) and under the CPU-matched baseline (the same
# generator sending the same packets at the rate it reached under the
# flood, to UDP port 9 in the receiver's namespace, where nobody
# listens). The attacker is the flood campaign's (internal/flood): its
# own namespace with a veth into the receiver's, one goroutine sending
# through a raw socket. Floods: garbage (random datagrams of 1-1400
# bytes), init (16,384 initiations with a valid mac1 from spoofed
# sources: yip-router's, or WireGuard type-1 messages for wireguard-go),
# replay (2,000 of the sender's tunnel datagrams captured during a flow,
# resent byte for byte). FLOOD_PLACEMENT: unpinned (default), pinned, or
# empty for both. ROUNDS rounds of DURATION s per flow (about 80 s per
# implementation and round at the defaults); QUICK=1 is a smoke test.
# Results go to docs/bench/compare-* (docs/BENCHMARKS.md, "Under floods").
FLOOD_KINDS     ?= garbage,init,replay
FLOOD_CC        ?= cubic
FLOOD_PLACEMENT ?= unpinned
bench-floods: build bench-tools
	$(BIN)/bench-compare -yip $(BIN)/yip-router -wg $(WG_GO) -commit $(VERSION) \
	  -rounds $(ROUNDS) -duration $(DURATION) -cc '$(FLOOD_CC)' $(if $(filter 1 yes true,$(QUICK)),-quick) \
	  $(if $(FLOOD_PLACEMENT),-placement $(FLOOD_PLACEMENT)) $(if $(YIP_EXTRA),-yip-extra '$(YIP_EXTRA)') \
	  -floods '$(FLOOD_KINDS)' -tests flood

# bench-wan: both implementations through a WAN with a bottleneck, one
# bench-compare run per path in WAN_PATHS: clean, 1% and 5% random loss,
# 5% in bursts of 4 frames (mean), each direction, applied before the
# bottleneck (WAN_LINK: 25 ms each way, 200 Mbit/s, a tail-drop queue of
# one bandwidth-delay product). One TCP flow under each of WAN_CC, UDP at
# 100 Mbit/s and pings; unpinned; ROUNDS rounds of WAN_DURATION s.
# Results go to docs/bench/compare-*-wan.* (docs/BENCHMARKS.md, "At a
# bottleneck").
WAN_LINK     ?= -delay 25ms -bottleneck 200M
WAN_PATHS    ?= clean loss1 loss5 burst5
WAN_CC       ?= cubic,bbr,reno
WAN_DURATION ?= 15
bench-wan: build bench-tools
	@for p in $(WAN_PATHS); do \
	  case $$p in \
	    clean) loss="";; \
	    loss1) loss="-loss 0.01";; \
	    loss5) loss="-loss 0.05";; \
	    burst5) loss="-ge-burst 4 -ge-rate 0.05";; \
	    *) echo "WAN_PATHS: unknown path $$p (clean, loss1, loss5, burst5)"; exit 2;; \
	  esac; \
	  echo "== bench-wan: $$p"; \
	  $(BIN)/bench-compare -yip $(BIN)/yip-router -wg $(WG_GO) -commit $(VERSION) -placement unpinned \
	    -rounds $(ROUNDS) -duration $(WAN_DURATION) -cc '$(WAN_CC)' -tests tcp1,udp-100M,ping \
	    $(WAN_LINK) $$loss $(IMPAIR) || exit 1; \
	done

# bench-tools: what bench-compare and bench-wan need besides the router:
# root, iperf3, wg, taskset, wireguard-go and the harness itself.
bench-tools: test-deps $(WG_GO)
	@if [ "$$(id -u)" -ne 0 ]; then echo "make bench-compare creates network namespaces and TUN devices: run it as root"; exit 1; fi
	@missing=""; \
	  command -v iperf3 >/dev/null 2>&1 || missing="$$missing iperf3"; \
	  command -v wg >/dev/null 2>&1 || missing="$$missing wireguard-tools"; \
	  command -v taskset >/dev/null 2>&1 || missing="$$missing util-linux"; \
	  if [ -n "$$missing" ]; then apt-get update >/dev/null && apt-get install -y --no-install-recommends $$missing; fi
	$(GO) build -o $(BIN)/bench-compare ./tests/bench/compare

# bench-scale: one yip-router hub against PEERS simulated peers (each its
# own key, /24 and socket) in a second namespace: start time and memory per
# peer, a handshake burst and a paced run, a ping per session, show --json
# and metrics timings, a SIGHUP reload, then the same burst against
# wireguard-go as the hub, for the ratio of handshakes per hub CPU-second
# (root; docs/BENCHMARKS.md). SHARDS=1 pins the hub to CPU 0 and the
# generator to CPU 1. SCALE_EXTRA passes more flags (e.g. -spread,
# -paced-rate 0). Results go to docs/bench/scale-*.
bench-scale: build test-deps $(WG_GO)
	@if [ "$$(id -u)" -ne 0 ]; then echo "make bench-scale creates network namespaces and TUN devices: run it as root"; exit 1; fi
	@command -v taskset >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y util-linux; }
	$(GO) build -o $(BIN)/bench-scale ./tests/bench/scale
	$(BIN)/bench-scale -yip $(BIN)/yip-router -wg $(WG_GO) -commit $(VERSION) -peers $(PEERS) -shards $(SHARDS) $(SCALE_EXTRA)

$(WG_GO):
	@mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN)) $(GO) install golang.zx2c4.com/wireguard@$(WG_GO_VERSION)
	mv $(BIN)/wireguard $@

# fuzz runs each fuzz target for FUZZTIME (go test can fuzz one target at a
# time): a duration (10s) or a count of inputs (1000x; CI uses a count, see
# .ci/run).
fuzz: deps
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

demo: build test-deps
	@if [ "$$(id -u)" -ne 0 ]; then echo "make demo creates network namespaces and TUN devices: run it as root (sudo make demo)"; exit 1; fi
	$(BIN)/yip-router demo

clean:
	rm -rf $(BIN)
