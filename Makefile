# Thin wrapper around CMake. The two commands of the README:
#   make demo   build, start the greeter server, call it, stop it
#   make test   build plain and ASan+UBSan, run every test through ctest
#   make test-tsan  the unit and e2e tests under ThreadSanitizer
#   make fuzz   the libFuzzer targets, FUZZ_SECONDS (60) each (clang)
#   make failmalloc  every allocation of four operations failed in turn
#   make soak   the soak and chaos test, SOAK_SECONDS (300), ASan then TSan
# Both install missing Debian packages first (scripts/install-deps.sh).
# And for users of the library:
#   make install [PREFIX=/usr/local] [DESTDIR=stage]
#   make deb     .deb packages (libsluice1, libsluice-dev, protoc-gen-sluice)
#   make docs    API reference (Doxygen) into build/docs/api/html

JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
PREFIX ?= /usr/local
CONFIGURE = cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
ASAN_BUILD ?= build-asan

.PHONY: all deps build build-asan demo test test-plain test-asan format clean \
	bench-testbed install

all: build

deps:
	@scripts/install-deps.sh

build: deps
	$(CONFIGURE) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

ASAN_CONFIGURE = cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	-DSLUICE_SANITIZE=ON

build-asan: deps
	$(ASAN_CONFIGURE) >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# Only what the demo runs, so that the first run is quick.
demo: deps
	$(CONFIGURE) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target greeter_server greeter_client
	@scripts/demo.sh $(BUILD)

# The library, headers, plugin, options.proto, CMake package and sluice.pc
# (cmake/SluiceInstall.cmake). The prefix is configured too, so that the
# library directory follows it (lib/<multiarch> for /usr, else lib).
install: deps
	$(CONFIGURE) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target sluice sluice_shared \
		protoc-gen-sluice
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix $(PREFIX)

test-plain: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

test-asan: build-asan
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

test: test-plain test-asan

# ThreadSanitizer over the unit and end-to-end tests (not part of make test:
# it needs its own build and takes a few minutes more). Examples, tools and
# benchmarks are left out of this build.
TSAN_BUILD ?= build-tsan
.PHONY: build-tsan test-tsan
TSAN_CONFIGURE = cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DCMAKE_C_FLAGS="-fsanitize=thread -g -O1" \
	-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
	-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
	-DSLUICE_BUILD_BENCH=OFF -DSLUICE_BUILD_TOOLS=OFF
TSAN_ENV = TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp"

build-tsan: deps
	$(TSAN_CONFIGURE) >/dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS)

test-tsan: build-tsan
	cd $(TSAN_BUILD) && $(TSAN_ENV) \
		ctest --output-on-failure -j $(JOBS) --timeout 600 -R "^(unit|e2e)\."

# The soak and chaos test (tests/soak, docs/soak.md): SOAK_SECONDS (300) of
# every kind of call against servers that are killed, paused and cut off
# meanwhile, first under ASan+UBSan (LeakSanitizer at every normal exit, a
# small quarantine so that the RSS check means something), then under
# TSan; fails if either run does. Driver options through SOAK_ARGS (e.g.
# "--seed 42 --workers 4"). make test runs 30 s of it (ctest soak.short).
SOAK_SECONDS ?= 300
SOAK_ARGS ?=
SOAK_RUN = tests/soak/soak_driver --server tests/soak/soak_server \
	--certs-script $(CURDIR)/scripts/gen-test-certs.sh \
	--seconds $(SOAK_SECONDS) $(SOAK_ARGS)
.PHONY: soak soak-asan soak-tsan
soak: soak-asan soak-tsan

soak-asan: deps
	$(ASAN_CONFIGURE) >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target soak_driver soak_server
	cd $(ASAN_BUILD) && ASAN_OPTIONS=quarantine_size_mb=16:detect_leaks=1 \
		$(SOAK_RUN)

soak-tsan: deps
	$(TSAN_CONFIGURE) >/dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target soak_driver soak_server
	cd $(TSAN_BUILD) && $(TSAN_ENV) $(SOAK_RUN)

# The libFuzzer targets of tests/fuzz (docs/fuzzing.md): a clang build of
# the library, the plugin and the targets only, every object instrumented
# (libFuzzer coverage, ASan, UBSan), in its own tree; then each target runs
# FUZZ_SECONDS (default 60) over a copy of its corpus and the per-target
# executions, coverage and crash files are printed (scripts/run-fuzz.sh:
# FUZZ_TARGETS, FUZZ_JOBS, FUZZ_MERGE=1, FUZZ_ARGS). Fails on a finding.
# make test replays the checked-in corpora without clang (ctest fuzz.*).
FUZZ_BUILD ?= build-fuzz
.PHONY: build-fuzz fuzz
build-fuzz:
	@scripts/install-deps.sh fuzz
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_FUZZ=ON \
		-DSLUICE_BUILD_EXAMPLES=OFF -DSLUICE_BUILD_TOOLS=OFF \
		-DSLUICE_BUILD_BENCH=OFF -DSLUICE_INSTALL=OFF >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

fuzz: build-fuzz
	scripts/run-fuzz.sh $(FUZZ_BUILD)

# Allocation-failure injection (docs/failmalloc.md): in the ASan+UBSan
# tree, a unary call, a bidi call, a TLS call and a server's start and
# first accept, each run again failing its n-th allocation for every n.
# make test runs the same (the TLS one sampled: every 13th n).
.PHONY: failmalloc
failmalloc: build-asan
	scripts/gen-test-certs.sh $(ASAN_BUILD)/failmalloc-certs
	for s in unary stream accept tls; do \
		$(ASAN_BUILD)/tests/failmalloc/failmalloc $$s \
			$(ASAN_BUILD)/failmalloc-certs || exit 1; \
	done

# The API reference (Doxygen, docs/Doxyfile) in build/docs/api/html; fails
# on any warning, such as an undocumented function, parameter or return
# value (make test runs the same check: ctest docs_doxygen).
.PHONY: docs
docs: deps
	@scripts/check-docs.sh $(BUILD)/docs/api

# Debian packages libsluice1, libsluice-dev, protoc-gen-sluice in build-deb/
# (scripts/make-deb.sh: CPack, cmake/SluicePackaging.cmake).
.PHONY: deb test-deb
deb:
	@scripts/make-deb.sh

# Installs them (root), builds and runs examples/external against them four
# ways, removes them and checks that nothing is left (exit 77: skipped, not
# root or sluice already installed). .ci/run runs it after make test.
test-deb: deb
	tests/package/test_debs.sh build-deb

# The paper's 5-layer chain on this machine, every strategy at three loads
# (a few minutes); writes docs/results/testbed-<date>.md and plots.
bench-testbed: deps
	@scripts/apt-install.sh bench-testbed gnuplot-nox
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target testbed_layer testbed_gen
	-cmake --build $(BUILD) -j $(JOBS) --target sluice-bench
	examples/testbed/run.sh $(BUILD)

# Circuit breakers and retries in a 3-tier chain with fan-out (issue 13,
# docs/resilience-experiment.md): breaker placement, a retry storm and the
# library's defaults at 0.8/1.0/1.2 x capacity and a load spike, two runs
# each (about 10 minutes); writes docs/results/resilience-<date>.md and
# plots. Settings through the environment (examples/testbed/resilience.sh).
.PHONY: bench-resilience
bench-resilience: deps
	@scripts/apt-install.sh bench-resilience gnuplot-nox
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target testbed_layer testbed_gen \
		sluice-bench
	examples/testbed/resilience.sh $(BUILD)

# sluice vs gRPC C++ side by side (bench/run_compare.sh, a few minutes):
# installs the benchmark packages (gRPC C++, h2load, gnuplot) first.
# Options through BENCH_ARGS, e.g. make bench BENCH_ARGS="--duration 3".
.PHONY: bench
bench: deps
	@scripts/install-bench-deps.sh
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target echo_server echo_client \
		grpcxx_echo_server grpcxx_echo_client
	-cmake --build $(BUILD) -j $(JOBS) --target sluice-bench
	bench/run_compare.sh --build $(BUILD) $(BENCH_ARGS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
