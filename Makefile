# The verbs a user and CI need. `make run` and `make test` work on a fresh machine:
# each does every set-up step it depends on.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
STATE  ?= .state
PYTEST_ARGS ?=

.PHONY: install setup etcd34 envtest test test-unit test-etcd test-kube test-chaos test-coverage \
        test-integration run lint proto bench clean kind-create kind-delete deploy-test test-e2e

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; v=sys.version_info[:2]; sys.exit(0 if (3,11)<=v<=(3,13) else "Python 3.11-3.13 needed, found %d.%d" % v)'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -e '.[test,dev]'
	touch $@

# Every Debian package the set-up needs, in one apt-get run (tests/envtest/debian-packages.sh):
# the steps below that use one (etcd34, prometheus, node, netpol) come after it, so that set-up
# steps run in parallel never queue on dpkg's lock.
.PHONY: debian
debian:
	@tests/envtest/debian-packages.sh

# etcd 3.4 from Debian, for the version tests; only where apt exists and we are root.
etcd34: debian
	@if [ -x /usr/bin/etcd ] && /usr/bin/etcd --version 2>/dev/null | grep -q 'etcd Version: 3.4'; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian etcd-server (etcd 3.4)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >/dev/null) \
	    || echo "etcd 3.4 not installed; its tests will skip (fail under CI=true)"; \
	else echo "no apt: etcd 3.4 tests will skip"; fi

# Prometheus and promtool from Debian: `promtool check rules` in lint, a real Prometheus in the
# monitoring tests; only where apt exists and we are root.
.PHONY: prometheus
prometheus: debian
	@if command -v promtool >/dev/null && command -v prometheus >/dev/null; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian prometheus (server + promtool)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null) \
	    || echo "prometheus not installed; its tests will skip (fail under CI=true)"; \
	else echo "no apt: prometheus tests will skip"; fi

setup: prometheus

# kube-apiserver and kubectl for the kube tier, built once into ~/.cache (see tests/envtest/).
envtest:
	@tests/envtest/build.sh >/dev/null

# prometheus-operator's CRDs, which the chart's PodMonitor/ServiceMonitor/PrometheusRule are
# created against in the kube tier: read from its Go module, fetched once into ~/.cache.
.PHONY: prometheus-crds
prometheus-crds:
	@tests/envtest/fetch-prometheus-crds.sh >/dev/null \
	  || echo "prometheus-operator CRDs not fetched (Go missing?); their test will skip (fail under CI=true)"

setup: prometheus-crds

setup: install etcd34 envtest

# The porcupine linearizability checker the tests run on client histories (see tests/linearizability/).
.PHONY: linearizability etcd-versions
linearizability:
	@tests/linearizability/build.sh >/dev/null \
	  || echo "linearizability checker not built (Go missing?); its tests will skip (fail under CI=true)"

setup: linearizability

# fake-gcs-server, the GCS-compatible server of the store tests, built once into ~/.cache from its
# Go module (tests/stores/build-fake-gcs.sh; ~2 minutes cold). S3 is moto's server (the test extra).
.PHONY: fake-gcs
fake-gcs:
	@tests/stores/build-fake-gcs.sh >/dev/null \
	  || echo "fake-gcs-server not built (Go missing?); its tests will skip (fail under CI=true)"

setup: fake-gcs

# Azurite, the Azure Blob server of the store tests, installed once into ~/.cache from the npm
# registry (tests/stores/install-azurite.sh; ~25 s cold). Its containers are made with the
# azure-storage-blob client (the test extra); the product reaches Azure through obstore.
.PHONY: azurite
azurite:
	@tests/stores/install-azurite.sh >/dev/null \
	  || echo "azurite not installed (npm missing?); its tests will skip (fail under CI=true)"

setup: azurite

# etcd, etcdctl and etcdutl for each version in tests/envtest/etcd-versions.txt, built once into
# ~/.cache/etcd-supervisor/etcd/<version>/ from the etcd Go modules (cold: ~6 CPU-minutes for the
# first three, 3-10 minutes of wall time on two cores depending on load; 3.7.3 adds ~85 CPU-seconds,
# ~1.6 minutes of wall time on two shared cores; then nothing). The local runtime
# runs each member's spec.version from there (or from --etcd-dir / $$ETCD_SUPERVISOR_ETCD_DIR).
# etcd-default builds only the default spec.version, which is all `make run` needs.
DEFAULT_ETCD := $(shell sed -n 's/^DEFAULT_VERSION = "\(.*\)"/\1/p' actors/model.py)
.PHONY: etcd-default
setup: etcd-versions
etcd-versions:
	@tests/envtest/build-etcd.sh >/dev/null \
	  || echo "etcd versions not built; their tests will skip (fail under CI=true)"
etcd-default:
	@tests/envtest/build-etcd.sh $(DEFAULT_ETCD) >/dev/null \
	  || echo "etcd $(DEFAULT_ETCD) not built (Go missing?): the local runtime cannot start members of that version"

# The suite on TEST_WORKERS pytest-xdist workers: tests that need one session-wide component (the
# e2e node, the kube tier's API server, the object-store servers) share the one worker that starts
# it, any other test groups with its module, and the long groups go out first
# (tests/harness/parallel.py). TEST_WORKERS=0 runs it in this one process, in file order.
TEST_WORKERS ?= 3
PARALLEL = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder)

# `make -j4 setup` works too (apt runs once, before the steps that need it), but saves nothing measurable
# on two cores: a cold set-up took 21.2 minutes with -j4 and 21.3 without (2026-11-27/28).
test: setup
	@$(BIN)/pytest $(PARALLEL) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc = 5 ]; then echo "pytest collected no tests: failing loudly"; exit 1; fi; exit $$rc

test-unit: install
	$(BIN)/pytest tests/unit tests/runtime tests/actors $(PYTEST_ARGS)

test-etcd: install etcd34
	$(BIN)/pytest tests/etcd $(PYTEST_ARGS)

test-kube: install envtest prometheus-crds etcd-versions
	$(BIN)/pytest tests/kube $(PYTEST_ARGS)

test-chaos: install etcd-versions
	$(BIN)/pytest tests/chaos $(PYTEST_ARGS)

test-integration: setup
	$(BIN)/pytest tests/etcd tests/kube tests/local tests/chaos tests/cli $(PYTEST_ARGS)

test-coverage: setup
	$(BIN)/pytest --cov=supervisor --cov=actors --cov-report=term-missing $(PYTEST_ARGS)

run: install etcd-default
	$(BIN)/etcd-supervisor --log-format text local deploy/examples/local-cluster.yaml --state-dir $(STATE)

lint: install prometheus
	$(BIN)/ruff check supervisor actors tests bench
	$(BIN)/mypy supervisor actors
	$(BIN)/lint-imports
	promtool check rules deploy/monitoring/rules.yaml

proto: install
	$(BIN)/python proto/generate.py

bench: install
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(STATE) .pytest_cache .mypy_cache .ruff_cache bench/results

# --- kind: a real cluster for end-to-end runs (needs Docker, kind and kubectl) --------------
.PHONY: image
IMAGE ?= etcd-supervisor:dev

image:
	docker build -f deploy/Dockerfile -t $(IMAGE) .

kind-create:
	deploy/kind/create.sh

kind-delete:
	deploy/kind/delete.sh

# Linux only: routes and DNS so `etcd-supervisor run --kubeconfig` on this machine reaches the
# kind cluster's members (uses sudo; UNDO=1 removes them).
.PHONY: kind-laptop-access
kind-laptop-access:
	deploy/kind/laptop-access.sh $(if $(filter 1,$(UNDO)),--undo)

# Build and load the image, deploy the operator and an example, prove put/get works.
deploy-test:
	IMAGE=$(IMAGE) deploy/kind/deploy-test.sh

# create + deploy-test, then delete the cluster (KEEP_CLUSTER=1 keeps it).
test-e2e:
	IMAGE=$(IMAGE) deploy/kind/e2e.sh

# --- the e2e tier's built-in one-node Kubernetes (tests/harness/node.py) ---------------------
# Debian's containerd, runc, CNI plugins and busybox-static, and kubelet, controller-manager,
# scheduler, kube-proxy and CoreDNS built once into ~/.cache (tests/envtest/build-node.sh).
# `make test` runs the e2e tier too (tests/e2e): its set-up builds the node; a node that cannot
# be built (no root, no apt) makes those tests skip, or fail under CI=true.
.PHONY: node test-e2e-node
setup: node
# After envtest: the node's binaries reuse the API server's compiled Kubernetes packages.
node: debian envtest
	@tests/envtest/build-node.sh >/dev/null \
	  || echo "the e2e node could not be built; its tests will skip (fail under CI=true)"

# The NetworkPolicy implementation of the three-node tier: kube-router's policy controller,
# built once into ~/.cache from its Go module (tests/envtest/build-kube-router.sh; ~1.5 minutes
# cold), and Debian's ipset it runs. Missing, the tier runs without enforcement and its
# NetworkPolicy test skips (fails under CI=true).
.PHONY: netpol
setup: netpol
netpol: debian
	@tests/envtest/build-kube-router.sh >/dev/null \
	  || echo "kube-router not built (Go or apt missing?); the NetworkPolicy test will skip (fail under CI=true)"

# cert-manager's controller and CRDs for the three-node tier's issuerRef test, built once into
# ~/.cache from the Go module github.com/cert-manager/cert-manager (tests/envtest/build-certmanager.sh;
# ~5 minutes cold on 2 cores). Missing, that test skips (fails under CI=true).
.PHONY: certmanager
setup: certmanager
certmanager:
	@tests/envtest/build-certmanager.sh >/dev/null \
	  || echo "cert-manager not built (Go missing?); the issuerRef test will skip (fail under CI=true)"

# The e2e tier alone (E2E_KUBECONFIG=<file> runs it against that cluster instead).
test-e2e-node: install envtest node etcd-versions
	$(BIN)/pytest tests/e2e $(PYTEST_ARGS)

# The three-node tier alone (tests/harness/nodes.py: three kubelets, each with its own containerd
# in a network namespace of its own, one control plane). `make test` runs it too, on the one
# node's worker: the two tiers share a lock and never run at once.
.PHONY: test-nodes
test-nodes: install envtest node netpol certmanager
	$(BIN)/pytest tests/nodes $(PYTEST_ARGS)
