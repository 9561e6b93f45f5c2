# libgdn build. `make run`: the main job; `make test`: the whole suite; `make sanitize`: the suite under
# AddressSanitizer + UndefinedBehaviorSanitizer. CUDA sources are compiled for sm_90 when nvcc is found
# (GDN_CUDA=0 turns that off).

BUILD   ?= build
CC      ?= gcc
SAN     ?= 0
CFLAGS_BASE = -std=c11 -O2 -g -Wall -Wextra -Werror -ffp-contract=off -fno-fast-math -pthread \
              -Iinclude -Isrc -Itests -MMD -MP -DGDN_TESTING=1
ifeq ($(SAN),1)
CFLAGS_BASE += -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS_SAN = -fsanitize=address,undefined
endif
ifeq ($(SAN),thread)
CFLAGS_BASE += -O1 -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS_SAN = -fsanitize=thread
endif
CFLAGS ?=
ALL_CFLAGS = $(CFLAGS_BASE) $(CFLAGS)
LDLIBS = -lm -pthread $(LDFLAGS_SAN)

NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
# every .c under src/ is the library (src/cuda/absent.c only without CUDA); every .cu under src/ with CUDA
CU_SRC  = $(shell find src -name '*.cu' | sort)
GDN_CUDA ?= $(if $(and $(NVCC),$(CU_SRC)),1,0)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
NVCC_FLAGS = -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
             --fmad=false -Xptxas -v -Xcompiler -Wall,-Wextra,-Werror,-ffp-contract=off -Werror all-warnings \
             -Iinclude -Isrc -DGDN_TESTING=1
# PIC=1: position-independent objects, for build/pic/libgdn.so (`make shared`, the Python binding's library)
PIC ?= 0
ifeq ($(PIC),1)
CFLAGS_BASE += -fPIC
NVCC_FLAGS += -Xcompiler -fPIC
endif

LIB_SRC = $(filter-out src/cuda/absent.c,$(shell find src -name '*.c' | sort))
ifeq ($(GDN_CUDA),1)
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
LDLIBS += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
else
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/src/cuda/absent.o
endif

TEST_SRC = $(shell find tests -name '*.c' | sort)
TOOL_SRC = $(wildcard tools/*.c)

.PHONY: all lib shared run test sanitize tsan fuzz bench clean
all: $(BUILD)/gdn $(BUILD)/test_gdn

lib: $(BUILD)/libgdn.a

shared:
	$(MAKE) BUILD=build/pic PIC=1 build/pic/libgdn.so

$(BUILD)/libgdn.so: $(LIB_OBJ)
	$(CC) -shared $^ -o $@ $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# one ISA per file: only files named *_avx2.c get the AVX2 flags
AVX2_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(filter %avx2.c,$(LIB_SRC)))
$(AVX2_OBJ): ALL_CFLAGS += -mavx2 -mfma
AVX512_FLAGS = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma
AVX512_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(filter %avx512.c,$(LIB_SRC)))
$(AVX512_OBJ): ALL_CFLAGS += $(AVX512_FLAGS)
# portable.c's 32-byte vectors pass only between inlined functions: GCC's note on their ABI does not apply
$(BUILD)/src/delta/cpu/portable.o: ALL_CFLAGS += -Wno-psabi
# the CLI: the FMA-peak microbenchmarks are AVX2 and AVX-512; the CUDA side sees the CUDA runtime header in a CUDA build
$(BUILD)/tools/peak_avx2.o: ALL_CFLAGS += -mavx2 -mfma
$(BUILD)/tools/peak_avx512.o: ALL_CFLAGS += $(AVX512_FLAGS)
ifeq ($(GDN_CUDA),1)
$(BUILD)/tools/gdn_cuda.o: ALL_CFLAGS += -DGDN_HAVE_CUDA -I$(CUDA_HOME)/include
$(BUILD)/tests/delta/test_cuda.o: ALL_CFLAGS += -DGDN_HAVE_CUDA -I$(CUDA_HOME)/include
$(BUILD)/tests/delta/test_cuda_streams.o: ALL_CFLAGS += -DGDN_HAVE_CUDA -I$(CUDA_HOME)/include
endif

$(BUILD)/%.cu.o: %.cu $(shell find src -name '*.cuh') src/gdn_internal.h src/common/gdn_math.h include/gdn.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@ 2> $(@:.o=.ptxas.log) || { cat $(@:.o=.ptxas.log); exit 1; }

$(BUILD)/libgdn.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/gdn: $(TOOL_SRC:%.c=$(BUILD)/%.o) $(BUILD)/libgdn.a
	$(CC) $^ -o $@ $(LDLIBS)

$(BUILD)/test_gdn: $(TEST_SRC:%.c=$(BUILD)/%.o) $(BUILD)/libgdn.a
	$(CC) $^ -o $@ $(LDLIBS)

run: $(BUILD)/gdn
	./$(BUILD)/gdn run

# the README's minimal program, built against the public header alone
$(BUILD)/example_minimal: examples/minimal.c $(BUILD)/libgdn.a
	$(CC) -std=c11 -Wall -Wextra -Werror -pedantic $(filter -O% -g -f%,$(CFLAGS_BASE)) -Iinclude $< $(BUILD)/libgdn.a -o $@ $(LDLIBS)

test: $(BUILD)/test_gdn $(BUILD)/example_minimal $(BUILD)/gdn
	./$(BUILD)/test_gdn
	./$(BUILD)/example_minimal
	bash tests/cli/test_cli.sh ./$(BUILD)/gdn

sanitize:
	$(MAKE) BUILD=build/san SAN=1 GDN_CUDA=0 test

# ThreadSanitizer (gcc or clang) over the suites that call from many threads and across fork
tsan:
	$(MAKE) BUILD=build/tsan SAN=thread GDN_CUDA=0 build/tsan/test_gdn
	GDN_TEST_QUICK=1 TSAN_OPTIONS=halt_on_error=1 ./build/tsan/test_gdn concurrency
	GDN_TEST_QUICK=1 TSAN_OPTIONS="halt_on_error=1 die_after_fork=0" ./build/tsan/test_gdn fork

# UBSan instrumentation of the blocked kernels' unrolled code takes over ten CPU-minutes per file: in the sanitizer
# build they get AddressSanitizer only (UBSan still covers everything else; the fuzz and hostile tests drive them)
build/san/src/delta/cpu/packed_avx2.o build/san/src/delta/cpu/portable.o: ALL_CFLAGS += -fno-sanitize=undefined

# `make fuzz`: the libFuzzer target over gdn_delta (clang, ASan + UBSan, library instrumented for coverage),
# built as build/fuzz/fuzz_delta. Run: build/fuzz/fuzz_delta -max_total_time=60 build/fuzz/corpus fuzz/corpus
FUZZ_CC ?= clang
fuzz:
	$(MAKE) BUILD=build/fuzz CC=$(FUZZ_CC) SAN=1 GDN_CUDA=0 CFLAGS=-fsanitize=fuzzer-no-link build/fuzz/fuzz_delta
	@mkdir -p build/fuzz/corpus

$(BUILD)/fuzz_delta: $(BUILD)/fuzz/fuzz_delta.o $(BUILD)/libgdn.a
	$(CC) $^ -o $@ $(LDLIBS) -fsanitize=fuzzer

# the blocked kernels take minutes to compile under UBSan and coverage: in the fuzz build they get ASan at -O0 only
build/fuzz/src/delta/cpu/packed_avx2.o build/fuzz/src/delta/cpu/portable.o: ALL_CFLAGS += -O0 -fno-sanitize=undefined,fuzzer-no-link

bench: $(BUILD)/gdn
	./$(BUILD)/gdn bench

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
