# k3 - build, test, run. See README.md.
CC      ?= gcc
OPT     ?= -O2
ARCH    := -mavx2 -mfma -mf16c
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE $(ARCH) -fopenmp -Iengine -I.
LDLIBS  := -fopenmp -ljansson -lpcre2-8 -luring -lm -lpthread
APPLIBS := -lncursesw -lreadline -lsqlite3
PY      := /usr/bin/python3

BUILD   := build
ENGINE_SRC := $(wildcard engine/*.c)
APP_SRC    := $(wildcard app/*.c ui/*.c history/*.c)
TEST_SRC   := $(wildcard tests/test_*.c)
TOOL_SRC   := $(wildcard tools/*.c)
K3BIN      ?= k3

ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
APP_OBJ    := $(APP_SRC:%.c=$(BUILD)/%.o)
TEST_BIN   := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%) \
              $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/tool_*.c))
TOOL_BIN   := $(TOOL_SRC:tools/%.c=$(BUILD)/tools/%)

.PHONY: all deps test bench fuzz run clean asan
all: $(K3BIN) $(TEST_BIN) $(TOOL_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libk3engine.a: $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(K3BIN): $(APP_OBJ) $(BUILD)/libk3engine.a
	$(CC) $(CFLAGS) -o $@ $(APP_OBJ) $(BUILD)/libk3engine.a $(APPLIBS) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libk3engine.a tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libk3engine.a $(LDLIBS)

# The history store's unit tests also link the history objects and SQLite.
HISTORY_OBJ := $(filter $(BUILD)/history/%,$(APP_OBJ))
$(BUILD)/tests/test_history: tests/test_history.c $(HISTORY_OBJ) $(BUILD)/libk3engine.a tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(HISTORY_OBJ) $(BUILD)/libk3engine.a -lsqlite3 $(LDLIBS)

# The chat tool drives the conversation controller: history + ui objects.
CHAT_OBJ := $(HISTORY_OBJ) $(BUILD)/ui/conversation.o $(BUILD)/ui/generate.o
$(BUILD)/tests/tool_chat: tests/tool_chat.c $(CHAT_OBJ) $(BUILD)/libk3engine.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(CHAT_OBJ) $(BUILD)/libk3engine.a -lsqlite3 $(LDLIBS)

$(BUILD)/tools/%: tools/%.c $(BUILD)/libk3engine.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libk3engine.a $(LDLIBS)

deps:
	@sh tools/deps.sh

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
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory models/demo/config.json
	./k3 chat models/demo --mem 300M

clean:
	rm -rf build build-asan k3 k3-asan

-include $(ENGINE_OBJ:.o=.d) $(APP_OBJ:.o=.d)
