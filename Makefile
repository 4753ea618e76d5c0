# k3 - build, test, run. See README.md.
#
# The folders are the architecture (docs/ARCHITECTURE.md):
#   engine/   model, kernels, weights and I/O, tokenizer   -> build/libk3engine.a
#     model/    the forward pass (KDA, MLA, MoE), config, sessions
#     kernels/  matvec and the number formats, a scalar reference beside each SIMD path
#     weights/  checkpoints and packed layouts, the I/O engine, the expert cache, planning
#     text/     tokenizer, pre-tokenizer, chat template, sampler
#     base/     errors, hashing, file reads and writes, statistics, test hooks
#   offline/  gen and pack (never run by a chat)           -> build/libk3offline.a
#   chat/ ui/ history/ app/   the front ends               -> ./k3
#   include/  the door: the only engine headers the front ends may see
# The front ends compile with -Iinclude and their own folders only, so an
# engine-internal header does not resolve there; a relative path that reaches
# into engine/ or offline/ is caught by tools/check_door.sh on the compiler's
# dependency list, and the object is not built.
CC      ?= gcc
OPT     ?= -O2

# ---- ARCH: the numeric kernels' back end, chosen at compile time ----------
#   x86-64-v3  AVX2 + FMA + F16C (engine/kernels/kernels_x86.h)
#   aarch64    NEON (engine/kernels/kernels_neon.h); native, or CC=aarch64-linux-gnu-gcc
#   generic    portable C11, no SIMD header (engine/kernels/kernels_generic.h)
# Default: the target of $(CC). All three give bit-identical logits (the
# canonical summation order of engine/kernels/matvec.c); only x86-64-v3 adds x86
# flags. README.md "Platforms" says how to build and test each.
CC_MACHINE := $(shell $(CC) -dumpmachine 2>/dev/null)
ifneq ($(filter x86_64-%,$(CC_MACHINE)),)
ARCH ?= x86-64-v3
else ifneq ($(filter aarch64-%,$(CC_MACHINE)),)
ARCH ?= aarch64
else
ARCH ?= generic
endif
ifeq ($(ARCH),x86-64-v3)
ifeq ($(filter x86_64-%,$(CC_MACHINE)),)
$(error ARCH=x86-64-v3 needs an x86-64 compiler; $(CC) targets $(CC_MACHINE))
endif
ARCH_FLAGS := -mavx2 -mfma -mf16c
else ifeq ($(ARCH),aarch64)
ifeq ($(filter aarch64-%,$(CC_MACHINE))$(origin CC),default)
CC := aarch64-linux-gnu-gcc   # ARCH=aarch64 on another machine: cross-compile
CC_MACHINE := $(shell $(CC) -dumpmachine 2>/dev/null)
endif
ifeq ($(filter aarch64-%,$(CC_MACHINE)),)
$(error ARCH=aarch64 needs an aarch64 compiler (CC=aarch64-linux-gnu-gcc); $(CC) targets $(CC_MACHINE))
endif
ARCH_FLAGS :=
else ifeq ($(ARCH),generic)
ARCH_FLAGS := -DK3_KERNELS_GENERIC
else
$(error ARCH=$(ARCH): expected x86-64-v3, aarch64 or generic)
endif
# io_uring is optional: without liburing's header the pool of pread threads
# is the only I/O backend (engine/weights/io.c, K3_HAVE_URING).
K3_HAVE_URING ?= $(shell printf '\043include <liburing.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo 1 || echo 0)
ifeq ($(K3_HAVE_URING),1)
ARCH_FLAGS += -DK3_HAVE_URING
URING_LIB  := -luring
endif

CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE $(ARCH_FLAGS) -fopenmp
ENGINE_DIRS := model kernels weights text base
ENGINE_INC := -Iinclude $(addprefix -Iengine/,$(ENGINE_DIRS))
FRONT_INC  := -Iinclude -Ichat -Iui -Ihistory -Iapp
LDLIBS  := -fopenmp -ljansson -lpcre2-8 $(URING_LIB) -lm -lpthread
APPLIBS := -lncursesw -lreadline -lsqlite3 -lmicrohttpd -lcurl
PY      := /usr/bin/python3

# The host's own ARCH builds into build/ and ./k3; any other into its own
# folder (build-generic/, build-aarch64/ with build-aarch64/k3), so the
# builds live side by side.
HOST_ARCH := $(if $(filter x86_64,$(shell uname -m)),x86-64-v3,$(if $(filter aarch64 arm64,$(shell uname -m)),aarch64,generic))
ifeq ($(ARCH),$(HOST_ARCH))
BUILD   ?= build
else
BUILD   ?= build-$(ARCH)
K3BIN   ?= $(BUILD)/k3
endif
# Objects remember the ARCH and compiler they were built for: changing
# either in the same BUILD rebuilds everything instead of mixing back ends.
ARCH_STAMP := $(BUILD)/arch-$(ARCH)-$(notdir $(CC)).stamp
ENGINE_SRC  := $(wildcard $(addsuffix /*.c,$(addprefix engine/,$(ENGINE_DIRS))))
OFFLINE_SRC := $(wildcard offline/*.c)
FRONT_SRC   := $(wildcard app/*.c chat/*.c ui/*.c history/*.c)
TEST_SRC    := $(wildcard tests/test_*.c)
TOOL_SRC    := $(wildcard tools/*.c)
K3BIN       ?= k3

ENGINE_OBJ  := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
OFFLINE_OBJ := $(OFFLINE_SRC:%.c=$(BUILD)/%.o)
FRONT_OBJ   := $(FRONT_SRC:%.c=$(BUILD)/%.o)
TEST_BIN    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%) \
               $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/tool_*.c))
TOOL_BIN    := $(TOOL_SRC:tools/%.c=$(BUILD)/tools/%)
ENGINE_LIB  := $(BUILD)/libk3engine.a

# The snapshot-compatibility key: a hash of the sources that decide what a
# saved session's numbers mean (kernels, the forward pass, the state layout,
# config parsing), comments stripped. Session files carry it; a file written
# by a build whose numerics differ is refused (docs/ARCHITECTURE.md, "Session
# files"), and no one has to remember to bump a version by hand.
NUMERIC_SRC := $(wildcard engine/kernels/matvec.c engine/kernels/convert.c engine/kernels/mxfp4.c engine/kernels/mxfp4_q8.c engine/kernels/dtype.c engine/kernels/ops.c \
               engine/kernels/delta_rule.c engine/kernels/delta_rule.h \
               engine/kernels/ops.h engine/kernels/kernels.h engine/kernels/kernels_arch.h engine/kernels/kernels_x86.h \
               engine/kernels/kernels_neon.h engine/kernels/kernels_generic.h engine/model/kda.c engine/model/mla.c engine/model/moe.c engine/model/forward.c \
               engine/model/forward.h engine/model/model.h engine/model/config.c engine/model/config.h engine/model/session.c \
               engine/model/session_file.c)
K3_NUMERICS_KEY := $(shell $(CC) -fpreprocessed -dD -E -P $(NUMERIC_SRC) 2>/dev/null | sha256sum | cut -c1-16)
OFFLINE_LIB := $(BUILD)/libk3offline.a

.PHONY: all deps deps-run deps-cross deps-test test test-engine check readme-options print-numerics-key print-arch print-build print-arch-flags bench bench-plan fuzz run clean asan tsan install uninstall
all: $(K3BIN) $(TEST_BIN) $(TOOL_BIN)

$(ARCH_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/arch-*.stamp
	@touch $@

$(BUILD)/engine/%.o: engine/%.c $(ARCH_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ENGINE_INC) -MMD -MP -c $< -o $@

# The SiTU-GLU loop (ops.c) vectorises only when GCC may evaluate both arms
# of its selects; the values are the same either way (no code here reads the
# floating-point exception flags).
$(BUILD)/engine/kernels/ops.o: CFLAGS += -fno-trapping-math
# session_file.o embeds the key, so it is rebuilt whenever a numeric source changes.
$(BUILD)/engine/model/session_file.o: CFLAGS += -DK3_NUMERICS_KEY='"$(K3_NUMERICS_KEY)"'
$(BUILD)/engine/model/session_file.o: $(NUMERIC_SRC)

$(BUILD)/offline/%.o: offline/%.c $(ARCH_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ENGINE_INC) -Ioffline -MMD -MP -c $< -o $@

# `k3 --version` says which source and flags made the binary: git describe
# and the compiler flags, baked into app/version.o (rebuilt when they change).
GIT_DESCRIBE := $(shell git describe --always --dirty --tags 2>/dev/null || echo unknown)
VERSION_DEFS := -DK3_GIT_DESCRIBE='"$(GIT_DESCRIBE)"' -DK3_BUILD_FLAGS='"$(CC) $(CFLAGS)"'
$(BUILD)/version.stamp: FORCE
	@mkdir -p $(BUILD)
	@echo '$(VERSION_DEFS)' | cmp -s - $@ || echo '$(VERSION_DEFS)' > $@
$(BUILD)/app/version.o: $(BUILD)/version.stamp
$(BUILD)/app/version.o: CFLAGS += $(VERSION_DEFS)
.PHONY: FORCE
FORCE:

# Front-end objects: compiled, then their header list checked (the door).
$(BUILD)/%.o: %.c tools/check_door.sh $(ARCH_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FRONT_INC) -MMD -MP -c $< -o $@
	@sh tools/check_door.sh $(@:.o=.d) || { rm -f $@; exit 1; }

$(ENGINE_LIB): $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(OFFLINE_LIB): $(OFFLINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(K3BIN): $(FRONT_OBJ) $(OFFLINE_LIB) $(ENGINE_LIB)
	$(CC) $(CFLAGS) -o $@ $(FRONT_OBJ) $(OFFLINE_LIB) $(ENGINE_LIB) $(APPLIBS) $(LDLIBS)

# Unit tests and tools are white-box: they may include engine internals.
TEST_INC := $(ENGINE_INC) -Ioffline -Itests
$(BUILD)/tests/%: tests/%.c $(OFFLINE_LIB) $(ENGINE_LIB) tests/test.h tests/tool_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_INC) -o $@ $< $(OFFLINE_LIB) $(ENGINE_LIB) $(LDLIBS)

# The history store's unit tests also link the history objects and SQLite.
HISTORY_OBJ := $(filter $(BUILD)/history/%,$(FRONT_OBJ))
$(BUILD)/tests/test_history: tests/test_history.c $(HISTORY_OBJ) $(ENGINE_LIB) tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FRONT_INC) -Itests -o $@ $< $(HISTORY_OBJ) $(ENGINE_LIB) -lsqlite3 $(LDLIBS)

# The chat's text helpers (markdown lines, """ input) are plain C: tested alone.
$(BUILD)/tests/test_chat_text: tests/test_chat_text.c $(BUILD)/ui/markdown.o $(BUILD)/chat/multiline.o $(BUILD)/chat/text_append.o tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FRONT_INC) -Itests -o $@ $< $(BUILD)/ui/markdown.o $(BUILD)/chat/multiline.o $(BUILD)/chat/text_append.o

# The chat tool drives the conversation controller: history + chat objects.
CHAT_OBJ := $(HISTORY_OBJ) $(filter $(BUILD)/chat/%,$(FRONT_OBJ))
$(BUILD)/tests/tool_chat: tests/tool_chat.c $(CHAT_OBJ) $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FRONT_INC) -Itests -o $@ $< $(CHAT_OBJ) $(ENGINE_LIB) -lsqlite3 -lcurl $(LDLIBS)

# The drafter and its policy (chat/draft.c) link the engine for the passes.
$(BUILD)/tests/test_draft: tests/test_draft.c $(BUILD)/chat/draft.o $(ENGINE_LIB) tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FRONT_INC) -Itests -o $@ $< $(BUILD)/chat/draft.o $(ENGINE_LIB) $(LDLIBS)

# The remote /metrics parser's unit test links that one chat object.
$(BUILD)/tests/test_remote_metrics: tests/test_remote_metrics.c $(BUILD)/chat/remote_metrics.o tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FRONT_INC) -Itests -o $@ $< $(BUILD)/chat/remote_metrics.o -lm

$(BUILD)/tools/%: tools/%.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_INC) -o $@ $< $(ENGINE_LIB) $(LDLIBS)

# Everything `make test` needs on a fresh machine, the cross toolchain of
# tests/t_arch.sh included (so `make deps && make test` runs the whole suite).
deps: deps-run deps-cross deps-test
	@sh tools/node_deps.sh

# PyTorch and a word list: the checks of the trained demo model (models/k3-mini).
deps-test:
	@sh tools/deps.sh --test

# What the chat itself needs (`make run`).
deps-run:
	@sh tools/deps.sh

# The aarch64 cross toolchain, qemu-user and the arm64 libraries (multiarch)
# that tests/t_arch.sh needs; separate because only CI and porters need it.
deps-cross:
	@sh tools/deps.sh --cross

# The whole test suite; ends with "N passed, N failed".
test: all
	@sh tests/run.sh

# README's option list, regenerated from the options table (app/options.c).
readme-options: $(K3BIN)
	@/usr/bin/python3 -c 'import re,subprocess; t=subprocess.check_output(["./$(K3BIN)","help","options"],text=True); r=open("README.md").read(); open("README.md","w").write(re.sub(r"(<!-- options:begin -->\n).*?(<!-- options:end -->)", lambda m: m.group(1)+t+m.group(2), r, flags=re.S))'

# The fast subset: unit tests + the forward pass against the reference on
# two models (< 60 s); `make test` is the whole suite.
check: all
	@sh tests/check.sh
# This ARCH's engine unit tests, its forward pass against the numpy
# reference (generic) and its logits byte for byte against the host build's
# (./k3); an aarch64 build on another machine runs under qemu-aarch64.
test-engine: all
	@sh tests/arch_check.sh $(ARCH)

# For scripts: the ARCH and build folder this invocation resolves to.
print-arch:
	@echo $(ARCH)
print-numerics-key:
	@echo $(K3_NUMERICS_KEY)
print-build:
	@echo $(BUILD)
print-arch-flags:
	@echo $(ARCH_FLAGS)

# The whole suite (unit tests and every tests/t_*.sh) on an Address/UB
# sanitizer build (build-asan/); also part of `make test`.
asan: all
	@sh tests/t_sanitize.sh

# The threaded paths on a ThreadSanitizer build (build-tsan/; OpenMP at one
# thread, libgomp being uninstrumented); also part of `make test`.
tsan: all
	@sh tests/t_tsan.sh

bench: all
	@sh tools/bench.sh

# k3 plan's predictions against k3 bench in the same run (figures).
bench-plan: all
	@sh tools/bench_plan.sh

# Every fuzz target for 60 s each (tests/fuzz.sh; `make test` runs a few seconds each).
fuzz: all
	@sh tests/fuzz.sh 60

models/demo/config.json: | $(K3BIN)
	./$(K3BIN) gen models/demo --preset demo

# The chat on the trained demo model (models/k3-mini, committed; tools/train_demo.py).
# The random `demo` preset (models/demo) stays for size and speed tests.
run: deps-run
	@$(MAKE) --no-print-directory $(K3BIN)
	./k3 chat models/k3-mini

# make install [PREFIX=/usr/local] [DESTDIR=staging]: the one binary (it
# needs nothing else at run time; models and the history live elsewhere).
PREFIX  ?= /usr/local
install: $(K3BIN)
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 755 $(K3BIN) "$(DESTDIR)$(PREFIX)/bin/k3"

uninstall:
	rm -f "$(DESTDIR)$(PREFIX)/bin/k3"

clean:
	rm -rf build build-asan build-tsan build-generic build-aarch64 k3 k3-asan

-include $(ENGINE_OBJ:.o=.d) $(OFFLINE_OBJ:.o=.d) $(FRONT_OBJ:.o=.d)
