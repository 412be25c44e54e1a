# The front door. Everything goes through CMake in build/; this file only names the steps.
#
#   make ch01 && ./ch01_napkin    build one chapter and link its program into this folder
#   make test                     build everything, run every test, then count passed,
#                                 skipped (and why) and failed
#   make bench                    run the Google Benchmark programs, each named as it starts
#   make golden CH=02             regenerate a chapter's golden output and show the diff
#   make plots                    run the chapters with --csv and draw docs/images/*.png
#                                 (figures of timings only with REFRESH=1; see plots/plotting.py)
#   make docs                     the Doxygen site in build/docs/html (chapters and API)
#   make grade                    tests by chapter: a scoreboard, line by line, with each
#                                 failure's reason, and build/grade/junit-*.xml
#   make starter DIR=../mine      a student's copy, with the exercises' solutions removed
#                                 (CH=03: only chapter 03's, the earlier ones stay solved)
#   make gpu-check                on a GPU machine: build with CUDA, run every test and benchmark
#                                 (a line per stage as it goes, logs in build-gpu/, a summary)
#   make sanitize                 clang with ASan + UBSan in build-sanitize/, then every test
#   make fuzz FUZZ_SECONDS=600    run each libFuzzer harness (tests/fuzz/) that long, count runs
#                                 (FUZZ_JOBS of them at once, one per core by default)
#   make check-install            build examples/my_mlp against the library as a user would:
#                                 installed (find_package, pkg-config) and as a subproject
#   make third_party              copy GoogleTest's source into third_party/ for such a machine
#   make deps                     install what the build needs (run for you when configuring)
#   make help                     this list

BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
GENERATOR := $(if $(shell command -v ninja 2>/dev/null),-G Ninja,)
CMAKE_FLAGS ?=
CHAPTERS := $(notdir $(wildcard chapters/ch[0-9][0-9]_*))

# Debian's Python, which has (or gets) python3-matplotlib for the figures.
PLOT_PYTHON ?= /usr/bin/python3
CSV_DIR ?= $(BUILD)/csv

.PHONY: all help deps configure build test bench golden plots docs grade starter gpu-check check-install sanitize fuzz third_party clean $(foreach c,$(CHAPTERS),$(firstword $(subst _, ,$(c))))

all: build

help:
	@sed -n '3,/^$$/s/^# \{0,1\}//p' Makefile

deps:
	@scripts/deps.sh

# Configure once; CMake re-runs itself when its inputs change.
$(BUILD)/CMakeCache.txt:
	@scripts/deps.sh
	cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# chNN (or chNN_topic): build chapters/chNN_topic/ and link ./chNN_topic to the executable.
define chapter_rule
$(firstword $(subst _, ,$(1))): configure
	cmake --build $(BUILD) --target $(1) -j $(JOBS)
	@ln -sf $(BUILD)/$(1) $(1)
	@echo "built ./$(1)"
$(1): $(firstword $(subst _, ,$(1)))
endef
$(foreach c,$(CHAPTERS),$(eval $(call chapter_rule,$(c))))

# `make ch03_autograd` does what `make ch03` does (the rule above); a chapter that does not
# exist yet gets a sentence instead of "No rule to make target".
.PHONY: $(CHAPTERS)
ch%:
	@echo "chapter $@ is not written yet; the chapters so far: $(foreach c,$(CHAPTERS),$(firstword $(subst _, ,$(c))))"; exit 2

# ctest's own last line counts a skipped test as passed; scripts/ctest_results.py then reads
# its JUnit file and says how many passed, how many were skipped and why, and how many failed.
# make test exits with ctest's status.
test: build
	@rm -f $(BUILD)/Testing/junit.xml
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --output-junit Testing/junit.xml; \
	  rc=$$?; python3 $(CURDIR)/scripts/ctest_results.py Testing/junit.xml; exit $$rc

bench: build
	@scripts/bench.sh $(BUILD)

golden: build
	@test -n "$(CH)" || (echo "usage: make golden CH=02" && exit 2)
	python3 tests/golden/update.py $(BUILD) $(CH)

plots: build
	@scripts/deps.sh plots
	@for c in $(CHAPTERS); do $(BUILD)/$$c --csv $(CSV_DIR) > /dev/null || exit 1; done
	@for p in plots/ch*.py; do TINY_PLOTS_REFRESH=$(REFRESH) $(PLOT_PYTHON) $$p $(CSV_DIR) docs/images || exit 1; done

docs:
	@scripts/deps.sh docs
	@mkdir -p build/docs
	cd docs && doxygen Doxyfile
	@# The pages show figures by their path in the repository (../../docs/images/...), which
	@# from build/docs/html/ is build/docs/images/.
	@mkdir -p build/docs/images && cp docs/images/*.png build/docs/images/
	@echo "open build/docs/html/index.html"

grade: build
	python3 scripts/grade.py $(BUILD) $(CHAPTERS)

starter:
	@test -n "$(DIR)" || (echo "usage: make starter DIR=path/to/new/folder" && exit 2)
	python3 scripts/make_starter.py . $(DIR) $(CH)

gpu-check:
	scripts/gpu_check.sh

# The sanitizers' build: clang, AddressSanitizer and UndefinedBehaviorSanitizer (float-to-int
# casts included), stopping at the first report; the fuzzers are built in the same folder.
SANITIZE_BUILD ?= build-sanitize
FUZZ_SECONDS ?= 600
# How many fuzzers run at once, one core each.
FUZZ_JOBS ?= $(JOBS)
FUZZERS := $(basename $(notdir $(wildcard tests/fuzz/fuzz_*.cpp)))
SANITIZE_FLAGS := -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DTINY_CUDA=OFF \
  -DTINY_BENCH=OFF -DTINY_TESTS=ON -DTINY_SANITIZE=ON -DTINY_FUZZ=ON

$(SANITIZE_BUILD)/CMakeCache.txt:
	@scripts/deps.sh
	@scripts/deps.sh sanitize
	cmake -S . -B $(SANITIZE_BUILD) $(GENERATOR) $(SANITIZE_FLAGS)

sanitize: $(SANITIZE_BUILD)/CMakeCache.txt
	cmake --build $(SANITIZE_BUILD) -j $(JOBS)
	cd $(SANITIZE_BUILD) && ctest --output-on-failure -j $(JOBS)

fuzz: $(SANITIZE_BUILD)/CMakeCache.txt
	cmake --build $(SANITIZE_BUILD) -j $(JOBS) --target $(FUZZERS)
	FUZZ_JOBS=$(FUZZ_JOBS) scripts/fuzz.sh $(SANITIZE_BUILD) $(FUZZ_SECONDS) $(FUZZERS)

check-install: build
	scripts/check_install.sh $(BUILD)

third_party:
	@mkdir -p third_party && rm -rf third_party/googletest && cp -r /usr/src/googletest third_party/googletest
	@echo "third_party/googletest ready (git ignores it; carry it to a machine without GoogleTest)"

clean:
	rm -rf $(BUILD) build-gpu* $(SANITIZE_BUILD) $(CHAPTERS)
