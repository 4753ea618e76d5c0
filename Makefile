# k3 - build, test, run. See README.md.
#
# The folders are the architecture (docs/ARCHITECTURE.md):
#   engine/   model, kernels, weights and I/O, tokenizer   -> build/libk3engine.a
#   offline/  gen and pack (never run by a chat)           -> build/libk3offline.a
#   chat/ ui/ history/ app/   the front ends               -> ./k3
#   include/  the door: the only engine headers the front ends may see
# The front ends compile with -Iinclude and their own folders only, so an
# engine-internal header does not resolve there; a relative path that reaches
# into engine/ or offline/ is caught by tools/check_door.sh on the compiler's
# dependency list, and the object is not built.
CC      ?= gcc
OPT     ?= -O2
ARCH    := -mavx2 -mfma -mf16c
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE $(ARCH) -fopenmp
ENGINE_INC := -Iinclude -Iengine
FRONT_INC  := -Iinclude -Ichat -Iui -Ihistory -Iapp
LDLIBS  := -fopenmp -ljansson -lpcre2-8 -luring -lm -lpthread
APPLIBS := -lncursesw -lreadline -lsqlite3 -lmicrohttpd -lcurl
PY      := /usr/bin/python3

BUILD   := build
ENGINE_SRC  := $(wildcard engine/*.c)
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
OFFLINE_LIB := $(BUILD)/libk3offline.a

.PHONY: all deps test bench fuzz run clean asan
all: $(K3BIN) $(TEST_BIN) $(TOOL_BIN)

$(BUILD)/engine/%.o: engine/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ENGINE_INC) -MMD -MP -c $< -o $@

$(BUILD)/offline/%.o: offline/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ENGINE_INC) -Ioffline -MMD -MP -c $< -o $@

# Front-end objects: compiled, then their header list checked (the door).
$(BUILD)/%.o: %.c tools/check_door.sh
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
$(BUILD)/tests/%: tests/%.c $(OFFLINE_LIB) $(ENGINE_LIB) tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_INC) -o $@ $< $(OFFLINE_LIB) $(ENGINE_LIB) $(LDLIBS)

# The history store's unit tests also link the history objects and SQLite.
HISTORY_OBJ := $(filter $(BUILD)/history/%,$(FRONT_OBJ))
$(BUILD)/tests/test_history: tests/test_history.c $(HISTORY_OBJ) $(ENGINE_LIB) tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FRONT_INC) -Itests -o $@ $< $(HISTORY_OBJ) $(ENGINE_LIB) -lsqlite3 $(LDLIBS)

# The chat tool drives the conversation controller: history + chat objects.
CHAT_OBJ := $(HISTORY_OBJ) $(filter $(BUILD)/chat/%,$(FRONT_OBJ))
$(BUILD)/tests/tool_chat: tests/tool_chat.c $(CHAT_OBJ) $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FRONT_INC) -Itests -o $@ $< $(CHAT_OBJ) $(ENGINE_LIB) -lsqlite3 -lcurl $(LDLIBS)

# The remote /metrics parser's unit test links that one chat object.
$(BUILD)/tests/test_remote_metrics: tests/test_remote_metrics.c $(BUILD)/chat/remote_metrics.o tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FRONT_INC) -Itests -o $@ $< $(BUILD)/chat/remote_metrics.o -lm

$(BUILD)/tools/%: tools/%.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_INC) -o $@ $< $(ENGINE_LIB) $(LDLIBS)

deps:
	@sh tools/deps.sh
	@sh tools/node_deps.sh

# The whole test suite; ends with "N passed, N failed".
test: all
	@sh tests/run.sh

# Address/UB sanitizer build and run of the unit tests and main paths
# (build-asan/); also part of `make test`.
asan: all
	@sh tests/t_sanitize.sh

bench: all
	@sh tools/bench.sh

fuzz: all
	@sh tests/fuzz.sh 60

models/demo/config.json: | $(K3BIN)
	./$(K3BIN) gen models/demo --preset demo

run: deps
	@$(MAKE) --no-print-directory $(K3BIN)
	@$(MAKE) --no-print-directory models/demo/config.json
	./k3 chat models/demo --mem 300M

clean:
	rm -rf build build-asan k3 k3-asan

-include $(ENGINE_OBJ:.o=.d) $(OFFLINE_OBJ:.o=.d) $(FRONT_OBJ:.o=.d)
