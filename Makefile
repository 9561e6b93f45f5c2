# libgdn's two commands, thin wrappers over the CMake build of record (CMakeLists.txt):
#   make run        build the `gdn` CLI only, then run it (`gdn run`): the main job; CUDA only where a GPU is
#   make test       build everything, then ctest: the suites ("N passed, N failed, K skipped" per suite and in all:
#                   a test that cannot run here, e.g. a CUDA one without a GPU, is skipped), the examples, the CLI,
#                   the export check and the install test
# and: make [all] (configure build/ and build everything), make sanitize (build/san: the suites under ASan + UBSan),
# make tsan (build/tsan: the threaded, fork and layer-stage suites under ThreadSanitizer), make emu512 (build/emu:
# the suites and tests/avx512/avx512_check with the AVX-512 kernels over tests/avx512/avx512_emu.h, for a CPU
# without AVX-512),
# make fuzz (build/fuzz/fuzz_delta, fuzz_layer, fuzz_validate: libFuzzer, clang), make shared (build/pic/libgdn.so for python/ in a checkout),
# make bench, make clean. Builds run -j$(nproc) (J=...). CUDA sources are compiled for sm_90 when nvcc is found;
# GDN_CUDA=0 turns that off, GDN_CUDA=1 insists. CC=... picks the C compiler of a fresh build dir.

BUILD   ?= build
J       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE   ?= cmake
CTEST   ?= ctest
FUZZ_CC ?= clang

# GDN_CUDA from the command line: 0/OFF -> OFF, 1/ON -> ON, unset -> AUTO (as the Makefile did: per invocation)
CUDA_OPT = $(if $(filter 0 OFF off no NO,$(GDN_CUDA)),OFF,$(if $(filter 1 ON on yes YES,$(GDN_CUDA)),ON,AUTO))
# CC only when given (make's default `cc` is left to CMake); a generator only for a fresh build dir (Ninja if there)
CC_OPT  = $(if $(filter default,$(origin CC)),,-DCMAKE_C_COMPILER=$(CC))
GEN_OPT = $(if $(wildcard $(1)/CMakeCache.txt),,$(if $(shell command -v ninja 2>/dev/null),-G Ninja))
# $(call configure,DIR,OPTIONS): configure (or refresh) a build dir; cheap when nothing changed
configure = $(CMAKE) -S . -B $(1) $(call GEN_OPT,$(1)) $(2)

TESTING_OPTS = -DGDN_TESTING=ON -DGDN_CUDA=$(CUDA_OPT) $(CC_OPT)

.PHONY: all configure run test sanitize tsan emu512 fuzz shared bench clean
all: configure
	$(CMAKE) --build $(BUILD) -j $(J)

configure:
	$(call configure,$(BUILD),$(TESTING_OPTS))

# `make run` compiles the CUDA kernels only where a GPU can run them (nvidia-smi lists one, or GDN_CUDA=1); elsewhere
# it builds the CLI in build/cpu without nvcc (most of a CUDA build's time), and `make test` still compiles them.
RUN_GPU   = $(if $(filter 1 ON on yes YES,$(GDN_CUDA)),1,$(if $(filter 0 OFF off no NO,$(GDN_CUDA)),,$(shell nvidia-smi -L 2>/dev/null | grep -q GPU && echo 1)))
RUN_BUILD = $(if $(RUN_GPU),$(BUILD),build/cpu)
run:
	$(if $(RUN_GPU),$(call configure,$(BUILD),$(TESTING_OPTS)),$(call configure,build/cpu,-DGDN_TESTING=ON -DGDN_CUDA=OFF $(CC_OPT)))
	$(CMAKE) --build $(RUN_BUILD) -j $(J) --target gdn
	./$(RUN_BUILD)/gdn run

# the suites print "N passed, N failed, K skipped" each; cmake/ctest_summary.sh gathers them from ctest's log
test: all
	@$(CTEST) --test-dir $(BUILD) --output-on-failure -j $(J); status=$$?; \
	    sh cmake/ctest_summary.sh $(BUILD); exit $$status

# the suites under AddressSanitizer + UndefinedBehaviorSanitizer, CPU only (per-file exceptions: CMakeLists.txt)
sanitize:
	$(call configure,build/san,-DGDN_TESTING=ON -DGDN_CUDA=OFF -DGDN_SANITIZE=ON $(CC_OPT))
	$(CMAKE) --build build/san -j $(J)
	@$(CTEST) --test-dir build/san --output-on-failure -j $(J); status=$$?; \
	    sh cmake/ctest_summary.sh build/san; exit $$status

# ThreadSanitizer over the suites that call from many threads and across fork (TSan refuses new threads after a
# multi-threaded fork unless told: die_after_fork=0)
tsan:
	$(call configure,build/tsan,-DGDN_TESTING=ON -DGDN_CUDA=OFF -DGDN_TSAN=ON $(CC_OPT))
	$(CMAKE) --build build/tsan -j $(J) --target test_gdn
	GDN_TEST_QUICK=1 TSAN_OPTIONS="halt_on_error=1 die_after_fork=0" ./build/tsan/test_gdn concurrency
	GDN_TEST_QUICK=1 TSAN_OPTIONS="halt_on_error=1 die_after_fork=0" ./build/tsan/test_gdn fork
	GDN_TEST_QUICK=1 TSAN_OPTIONS="halt_on_error=1 die_after_fork=0" ./build/tsan/test_gdn runner
	GDN_TEST_QUICK=1 TSAN_OPTIONS="halt_on_error=1 die_after_fork=0" ./build/tsan/test_gdn layer_cpu_kernels
	GDN_TEST_QUICK=1 TSAN_OPTIONS="halt_on_error=1 die_after_fork=0" ./build/tsan/test_gdn layer_sequences

# The AVX-512 kernels on any x86 CPU: their files over the C emulation of tests/avx512/avx512_emu.h
# (GDN_AVX512_EMULATED), the suites through ctest, then tests/avx512/avx512_check's sweep against ref
emu512:
	$(call configure,build/emu,-DGDN_TESTING=ON -DGDN_CUDA=OFF -DGDN_AVX512_EMULATED=ON $(CC_OPT))
	$(CMAKE) --build build/emu -j $(J)
	@$(CTEST) --test-dir build/emu --output-on-failure -j $(J); status=$$?; \
	    sh cmake/ctest_summary.sh build/emu; exit $$status
	$(CC) -std=c11 -O2 -Iinclude tests/avx512/avx512_check.c build/emu/libgdn.a -lm -pthread -o build/emu/avx512_check
	./build/emu/avx512_check

# `make fuzz`: the libFuzzer targets over gdn_delta and gdn_layer, and over their validators alone with hostile
# sizes (clang, ASan + UBSan that abort on the first report, library instrumented for coverage), built as
# build/fuzz/fuzz_delta, fuzz_layer and fuzz_validate. Run: build/fuzz/fuzz_delta -max_total_time=60
# build/fuzz/corpus fuzz/corpus; build/fuzz/fuzz_layer -max_total_time=60 build/fuzz/corpus_layer;
# build/fuzz/fuzz_validate -max_total_time=30 build/fuzz/corpus_validate fuzz/corpus_validate
fuzz:
	$(call configure,build/fuzz,-DGDN_TESTING=ON -DGDN_CUDA=OFF -DGDN_FUZZ=ON -DCMAKE_C_COMPILER=$(FUZZ_CC))
	$(CMAKE) --build build/fuzz -j $(J) --target fuzz_delta fuzz_layer fuzz_validate
	@mkdir -p build/fuzz/corpus build/fuzz/corpus_layer build/fuzz/corpus_validate

# build/pic/libgdn.so, the library python/libgdn loads in a checkout: every object is PIC now, so it is $(BUILD)'s
# libgdn.so, linked there, unless build/pic is a build dir of its own (scripts/gpu_run.sh's), which is then built
shared:
	@if [ -f build/pic/CMakeCache.txt ]; then \
	    $(CMAKE) --build build/pic -j $(J) --target libgdn_shared; \
	else \
	    $(call configure,$(BUILD),$(TESTING_OPTS)) && $(CMAKE) --build $(BUILD) -j $(J) --target libgdn_shared && \
	    if [ "$$(realpath -sm $(BUILD))" != "$$(realpath -sm build/pic)" ]; then mkdir -p build/pic && \
	        ln -sfn "$$(realpath -s --relative-to=build/pic $(BUILD)/libgdn.so)" build/pic/libgdn.so; fi; \
	fi
	@ls -l build/pic/libgdn.so

# the old Makefile's file targets, for scripts that name them (e.g. BUILD=build/pic build/pic/libgdn.so)
$(BUILD)/libgdn.a $(BUILD)/libgdn.so $(BUILD)/gdn $(BUILD)/test_gdn: configure
	$(CMAKE) --build $(BUILD) -j $(J) --target $(patsubst libgdn.a,libgdn_static,$(patsubst libgdn.so,libgdn_shared,$(notdir $@)))

bench: configure
	$(CMAKE) --build $(BUILD) -j $(J) --target gdn
	./$(BUILD)/gdn bench

clean:
	rm -rf build
