# Thin wrapper around CMake. The two commands of the README:
#   make demo   build, start the greeter server, call it, stop it
#   make test   build plain and ASan+UBSan, run every test through ctest
# Both install missing Debian packages first (scripts/install-deps.sh).

JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
ASAN_BUILD ?= build-asan

.PHONY: all deps build build-asan demo test test-plain test-asan format clean \
	bench-testbed

all: build

deps:
	@scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)

test-plain: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

test-asan: build-asan
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

test: test-plain test-asan

# The paper's 5-layer chain on this machine, every strategy at three loads
# (a few minutes); writes docs/results/testbed-<date>.md and plots.
bench-testbed: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target testbed_layer testbed_gen
	examples/testbed/run.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
