# symphony.cluster — every target bootstraps what it needs on a fresh Debian machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

ROOT      := $(CURDIR)
VENV      := $(ROOT)/.venv
PY        := $(VENV)/bin/python
BIN       := $(VENV)/bin
SHARED    ?= $(abspath $(ROOT)/../shared)
COLL_ROOT := $(ROOT)/build/collections
COLL      := $(COLL_ROOT)/ansible_collections/symphony/cluster
SANITY    := $(ROOT)/build/sanity/ansible_collections/symphony/cluster

# The collection is importable as ansible_collections.symphony.cluster from the build tree;
# community.general & co. come from the `ansible` package in the venv.
export PATH := $(BIN):$(ROOT)/build/tools/bin:$(PATH)
export PYTHONPATH := $(COLL_ROOT):$(ROOT)/tools
export ANSIBLE_COLLECTIONS_PATH := $(COLL_ROOT)
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export SYMPHONY_SHARED := $(SHARED)

# Debian packages the tests and the demo use (installed only when missing).
DEB_PACKAGES := fio stress-ng iperf3 pciutils iproute2 openssh-server openssh-client slurm-wlm munge \
                chromium rsync procps postgresql lldpd
# The RAM-only runtime's builder and the VM-backed nodes (make runtime / make test-runtime only, not make test).
RUNTIME_DEB_PACKAGES := mmdebstrap cpio zstd lz4 xorriso isolinux syslinux-common qemu-system-x86 qemu-utils \
                        fdisk grub-pc-bin

.PHONY: help bootstrap venv debs collection promtool demo-down test test-unit test-sanity test-lint test-molecule \
        test-types test-docs docs test-integration test-under-load bench demo lab-up lab-down lab-calibrate clean \
        pg-up pg-down test-ledger-pg runtime test-runtime \
        device-wheels device-check device-collect

help:
	@echo "make demo   - run the main job (emulated fleet + lab hosts) and show the result"
	@echo "make test   - unit + ansible-test sanity + ansible-lint + molecule + integration"
	@echo "make docs   - the collection's HTML docs site (build/docs/html/index.html)"
	@echo "make test-under-load - unit + integration while stress-ng keeps both cores and the disk busy"
	@echo "make bench  - benchmarks, each writing build/bench/<name>.json"
	@echo "make lab-up / lab-down - the lab hosts (network namespaces, sshd, Slurm; needs root)"
	@echo "make runtime - build the RAM-only provisioning runtime ISO and the OS image into build/ (cached)"
	@echo "make device-check - prepare and test here what tests/device/run.sh carries to a GPU machine"

bootstrap: venv debs collection promtool

# promtool (Prometheus's own metrics linter) for the fleet-audit textfile test: only the binary, unpacked from
# Debian's prometheus package into build/tools (installing the package would also start a Prometheus server).
promtool: build/tools/bin/promtool
build/tools/bin/promtool:
	@mkdir -p build/tools/deb build/tools/bin
	cd build/tools/deb && (apt-get download -q prometheus >/dev/null 2>&1 || \
	  (apt-get update -qq && apt-get download -q prometheus >/dev/null 2>&1))
	dpkg-deb -x build/tools/deb/prometheus_*.deb build/tools/root
	rm -rf build/tools/deb
	ln -sfn ../root/usr/bin/promtool $@

# The RAM-only provisioning runtime (images/runtime: mmdebstrap root packed as the initramfs, BIOS ISO) and the
# production OS image provisioning writes last (images/os: mmdebstrap root as an ext4 partition of a raw BIOS disk
# image), cached in build/runtime and build/os: a rerun with the same inputs returns at once. Needs root.
runtime: debs
	@missing=$$(for p in $(RUNTIME_DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	images/runtime/build.sh $(ROOT)/build/runtime
	images/os/build.sh $(ROOT)/build/os

# The runtime booted in VM-backed nodes (QEMU, TCG): about 7.5 min to build the image uncached plus 2-4 min of
# boots on 2 cores, so it is its own target; make test runs tests/integration/test_runtime_vm.py only when the
# image is already built (it says so when it skips).
test-runtime: bootstrap runtime
	SYMPHONY_TEST_RUNTIME=1 $(PY) -m pytest -q tests/integration/test_runtime_vm.py

venv: $(VENV)/.stamp
$(VENV)/.stamp: requirements.txt test-requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r test-requirements.txt
	touch $@

debs: build/.debs-stamp
build/.debs-stamp: Makefile
	@mkdir -p build
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "need root for apt-get (missing: $$missing)"; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@touch $@

collection: $(COLL)
$(COLL):
	mkdir -p $(dir $(COLL))
	ln -sfn $(ROOT) $(COLL)

test: bootstrap test-unit test-types test-docs test-sanity test-lint test-molecule test-integration

test-unit: venv collection
	$(PY) -m pytest -q -n 2 tests/unit

# mypy on the base packages (issue 14); the stage packages are annotated as they are touched.
test-types: venv collection
	MYPYPATH=$(COLL_ROOT) $(BIN)/mypy --config-file mypy.ini \
	  $(foreach p,_core _redfish _fleet _host,-p ansible_collections.symphony.cluster.plugins.module_utils.$(p))

# Collection docs as Ansible collections do them: antsibull-docs lint, changelog fragments lint; `make docs` builds
# the HTML site into build/docs/html (tests/integration/test_docs_site.py opens it in Chromium).
test-docs: venv collection
	$(BIN)/antsibull-docs lint-collection-docs --plugin-docs .
	$(BIN)/antsibull-changelog lint

docs: venv collection
	bash docs/build.sh $(ROOT)/build/docs

test-sanity: venv collection
	mkdir -p ~/.ansible/test/cache
	@if [ -d "$(SHARED)/tools" ]; then \
	  for v in 24_2 25_0 25_1 25_2; do cp $(SHARED)/tools/ansible-test-get-pip.py ~/.ansible/test/cache/get_pip_$$v.py; done; fi
	rm -rf $(SANITY) && mkdir -p $(SANITY)
	# Only what the collection ships (galaxy.yml build_ignore): tools/ and .ci/ are project tooling.
	git ls-files -co --exclude-standard | grep -vE '^(tools/|\.ci/|molecule/)' | \
	  while IFS= read -r f; do [ -f "$$f" ] && printf '%s\n' "$$f"; done | tar -cf - -T - | tar -xf - -C $(SANITY)
	# A repository of its own, so ansible-test lists this tree (not the outer repo, where build/ is ignored).
	cd $(SANITY) && git init -q . && $(BIN)/ansible-test sanity --local --python 3.11 --color no

test-lint: venv collection
	$(BIN)/ansible-lint --profile production --offline

test-molecule: bootstrap
	@set -e; for s in $$(ls molecule 2>/dev/null); do \
	  [ -f molecule/$$s/molecule.yml ] || continue; \
	  echo "== molecule scenario $$s"; $(BIN)/molecule test -s $$s; done

test-integration: bootstrap
	$(PY) -m pytest -q tests/integration

# The suite while stress-ng keeps every core and the disk busy: verdicts must not depend on the machine being idle.
# stress-ng runs at most LOAD_MAX_S seconds (its own --timeout, so it cannot outlive a killed make either); the
# trap stops it by its pid whatever way the suite ends.  Timeouts in tests/ are scaled (tests/timescale.py).
LOAD_MAX_S      ?= 3600
LOAD_TIME_SCALE ?= 3
test-under-load: bootstrap
	@set -u; mkdir -p build/load; \
	stress-ng --cpu $$(nproc) --hdd 1 --hdd-bytes 256M --temp-path build/load --timeout $(LOAD_MAX_S)s \
	  --metrics-brief > build/load/stress-ng.log 2>&1 & load=$$!; \
	trap 'kill $$load 2>/dev/null; wait $$load 2>/dev/null; rm -rf build/load/tmp-stress-ng-*' EXIT INT TERM; \
	echo "stress-ng (pid $$load): $$(nproc) CPU workers + 1 disk writer for at most $(LOAD_MAX_S) s"; \
	sleep 2; kill -0 $$load || { echo "stress-ng did not start (build/load/stress-ng.log)"; exit 1; }; \
	export SYMPHONY_TEST_TIME_SCALE=$(LOAD_TIME_SCALE); \
	$(PY) -m pytest -q -n 2 tests/unit && $(PY) -m pytest -q tests/integration

bench: bootstrap
	mkdir -p build/bench
	@# BENCH_FA_LAB=1: fleet_audit.json's lab exercise (detect_s .. return_s) brings up its own lab when none is up
	@# BENCH_SCALE_FLEET=10000: scale.json's pre_deployment over 10,000 emulated BMCs (issue 19; about 13 minutes here)
	@set -e; for b in tests/bench/bench_*.py; do echo "== $$b"; BENCH_FA_LAB=$${BENCH_FA_LAB:-1} \
	  BENCH_SCALE_FLEET=$${BENCH_SCALE_FLEET:-10000} $(PY) $$b; done
	@for f in build/bench/*.json; do echo "$$f: $$(cat $$f)"; done

# DEMO_VM_NODES (2; 0 leaves them out): VM-backed nodes provisioned for real after the main job (QEMU guests, the
# runtime and OS images of make runtime, cached: the first demo builds them in about 5 minutes).
DEMO_VM_NODES ?= 2
demo: bootstrap $(if $(filter-out 0,$(DEMO_VM_NODES)),runtime)
	$(PY) -m symphony_demo --vm-nodes $(DEMO_VM_NODES) $(ARGS)

demo-down: venv collection
	$(PY) -m symphony_demo down

# The device check (tests/device/run.sh, issue 20) runs on a GPU machine with no package index: it carries the
# collection's requirements as wheels for that machine's Python (3.12, x86-64).  `make device-check` builds them
# into build/device/wheels, checks that they fit what one device call carries (64 MiB with the tree), runs
# tests/device (an offline install from the bundle alone, run.sh on a fake GPU) and prints the one call to make.
DEVICE_WHEELS    := $(ROOT)/build/device/wheels
DEVICE_PYTHON    ?= 3.12
DEVICE_MAX_MIB   ?= 40
DEVICE_PLATFORMS := manylinux1_x86_64 manylinux2014_x86_64 manylinux_2_17_x86_64 manylinux_2_24_x86_64 \
                    manylinux_2_27_x86_64 manylinux_2_28_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64
device-wheels: $(DEVICE_WHEELS)/.stamp
$(DEVICE_WHEELS)/.stamp: requirements.txt tests/device/requirements.txt | venv
	rm -rf $(DEVICE_WHEELS) && mkdir -p $(DEVICE_WHEELS)
	$(PY) -m pip download -q --only-binary=:all: --python-version $(DEVICE_PYTHON) --implementation cp \
	  $(foreach p,$(DEVICE_PLATFORMS),--platform $(p)) -d $(DEVICE_WHEELS) -r tests/device/requirements.txt
	@size=$$(du -sm $(DEVICE_WHEELS) | cut -f1); \
	echo "device wheels: $$(ls $(DEVICE_WHEELS)/*.whl | wc -l) wheels, $$size MiB in $(DEVICE_WHEELS)"; \
	test $$size -le $(DEVICE_MAX_MIB) || { echo "over $(DEVICE_MAX_MIB) MiB: one device call carries 64 MiB in all"; exit 1; }
	touch $@

device-check: device-wheels collection
	SYMPHONY_DEVICE_BUNDLE=$(DEVICE_WHEELS) $(PY) -m pytest -q tests/device
	@echo "ready: device run(command='bash tests/device/run.sh', carry=['build/device/wheels'], timeout_s=480)"

# After a device run: DEVICE_OUT=<the folder its files came back to> make device-collect keeps its figures as
# build/bench/validation_gpu.json and its nvidia-smi outputs as fixtures (tests/unit/burnin/test_device_fixtures.py).
device-collect:
	@test -n "$(DEVICE_OUT)" -a -f "$(DEVICE_OUT)/validation_gpu.json" || \
	  { echo "set DEVICE_OUT to the folder holding the device run's validation_gpu.json"; exit 1; }
	mkdir -p build/bench tests/fixtures
	cp "$(DEVICE_OUT)/validation_gpu.json" build/bench/validation_gpu.json
	cp "$(DEVICE_OUT)"/nvidia-smi-*.txt tests/fixtures/
	@cat "$(DEVICE_OUT)/summary.txt"

# A throw-away PostgreSQL server (Debian postgresql) under build/pg/make for trying the shared ledger by hand;
# the tests start their own under build/pg/<worker> (tests/conftest.py) and fail, not skip, when it cannot start
# (SYMPHONY_TEST_PG=skip opts out).  `make test-ledger-pg` runs the ledger suite on both backends.
pg-up: bootstrap
	$(PY) -m symphony_awx.pg up

pg-down: venv collection
	$(PY) -m symphony_awx.pg down

test-ledger-pg: bootstrap
	$(PY) -m pytest -q tests/unit/core/test_ledger.py tests/unit/core/test_ledger_pg.py tests/unit/core/test_gate.py \
	  tests/unit/core/test_gate_latest.py tests/unit/core/test_gate_ledger_smoke.py tests/unit/fleet/test_fleet_leases.py

# The lab hosts: LAB_N network namespaces (1..16) with sshd + slurmd, slurmctld in the root namespace; needs root.
# `lab-up` cleans up a crashed lab first and reuses an identical healthy one; files go under build/lab/, with
# calibration.json: this machine measured once at lab-up (the lab profile's floors are fractions of it).
LAB_N ?= 4
lab-up: bootstrap
	$(PY) -m symphony_lab up -n $(LAB_N)

lab-down: venv collection
	$(PY) -m symphony_lab down

# Measure this machine again (fio, iperf3 between two lab hosts, stress-ng) into build/lab/calibration.json.
lab-calibrate: venv collection
	$(PY) -m symphony_lab calibrate

clean:
	rm -rf build .pytest_cache
