#!/bin/sh
# t_options.sh - one options table (app/options.c) for every command:
#  - no command source compares argv with an option name of its own
#    (strcmp(a, "--x") or a {"--x", ...} list): the table's parser is the
#    only one, outside the files listed below as not yet moved;
#  - every option a command's --help lists is a row of `k3 help options`
#    (docs/OPTIONS.md's list), and no name is listed twice for one command;
#  - a bad value gets the same one-line error from every command that takes
#    the option, a missing value says so, and an option of another command
#    is refused.
cd "$(dirname "$0")/.." || exit 1
OUT=tests/out/options
rm -rf $OUT
mkdir -p $OUT
K3=./k3
/usr/bin/python3 - "$K3" "$OUT" <<'PY'
import re, subprocess, sys, glob
k3, out = sys.argv[1], sys.argv[2]

def check(name, problems):
    if problems:
        print("FAIL %s: %d problem(s), first: %s" % (name, len(problems), problems[0]))
    else:
        print("PASS %s" % name)

# Files that still parse some options by hand, and why (a reason each).
not_moved = {
    "app/main.c": "the dispatcher: --version, --help",
    "app/cli.c": "cli_wants_help: --help, -h",
}
hand = re.compile(r'strcmp\s*\([^;]*"-[-a-zA-Z]|\{\s*"--[a-z]')
dispatch = 'strcmp(argv[i], "--endpoint")) return cmd_bench_remote'   # which of bench's two command lines
problems = []
for f in sorted(glob.glob("app/*.c") + glob.glob("chat/*.c")):
    if f == "app/options.c" or f in not_moved or f.startswith("chat/commands"):   # chat/commands*: /slash words
        continue
    for n, line in enumerate(open(f, encoding="utf-8"), 1):
        if hand.search(line) and dispatch not in line:
            problems.append("%s:%d parses an option by hand: %s" % (f, n, line.strip()[:80]))
check("options: no command outside app/options.c parses an option by hand (still by hand: %s)"
      % ", ".join(sorted(not_moved)), problems)

# The table as docs/OPTIONS.md shows it.
md = subprocess.run([k3, "help", "options"], capture_output=True, text=True).stdout
names = set()
for m in re.finditer(r"^\| `([^`]+)`", md, re.M):
    names.update(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", m.group(1)))

def help_names(cmd):
    text = subprocess.run([k3] + cmd + ["--help"], capture_output=True, text=True).stdout
    sections = [[]]          # one per command line the help describes (k3 bench and k3 bench --endpoint)
    for line in text.split("\n"):
        if re.match(r"k3 \w+ --endpoint URL", line):
            sections.append([])
        m = re.match(r"  (-\S.*?)  +\S", line)       # the label, then two spaces and its help
        if m:
            sections[-1] += re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", m.group(1))
    return sections

commands = [["run"], ["chat"], ["eval"], ["serve"], ["plan"], ["tokenize"], ["history"], ["bench"], ["gen"], ["pack"]]
missing, twice, empty = [], [], []
for cmd in commands:
    sections = help_names(cmd)
    if not sections[0]:
        empty.append("k3 %s --help lists no option" % cmd[0])
    for found in sections:
        missing += ["k3 %s --help lists %s, which the table lacks" % (cmd[0], o) for o in found if o not in names]
        twice += ["k3 %s --help lists %s twice" % (cmd[0], o) for o in sorted(set(found)) if found.count(o) > 1]
check("options: every command's --help lists options (%s)" % ", ".join(c[0] for c in commands), empty)
check("options: every option in a command's --help is a row of k3 help options", missing)
check("options: no option is listed twice for one command line", twice)

def err(args):
    p = subprocess.run([k3] + args, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    return p.returncode, p.stderr.strip()

def same_error(name, runs, want):
    got = [(" ".join(a),) + err(a) for a in runs]
    bad = ["k3 %s: exit %d, %r" % g for g in got if g[1] != 2 or g[2] != want]
    check("options: %s: the same error from every command (%s)" % (name, want), bad)

m = "tests/out/options/none"
same_error("--threads 0", [["run", m, "-p", "x", "--threads", "0"], ["chat", m, "--threads", "0"],
                           ["eval", m, "--threads", "0"], ["serve", m, "--threads", "0"],
                           ["plan", m, "--threads", "0"], ["bench", m, "--threads", "0"]],
           "k3: --threads: expected an integer in [1, 1024], got '0'")
same_error("--mem 8X", [["run", m, "-p", "x", "--mem", "8X"], ["chat", m, "--mem", "8X"], ["serve", m, "--mem", "8X"],
                        ["plan", m, "--mem", "8X"], ["eval", m, "--mem", "8X"]],
           "k3: --mem: expected a size such as 8G or 512M, got '8X'")
same_error("--ctx 3", [["run", m, "-p", "x", "--ctx", "3"], ["chat", m, "--ctx", "3"], ["serve", m, "--ctx", "3"]],
           "k3: --ctx: expected an integer in [16, 16777216], got '3'")
same_error("--ctx 0 (plan: any context the engine takes)", [["plan", m, "--ctx", "0"]],
           "k3: --ctx: expected an integer in [1, 16777216], got '0'")
same_error("--timeout 0", [["run", "-p", "x", "--endpoint", "http://127.0.0.1:9", "--timeout", "0"],
                           ["chat", "--endpoint", "http://127.0.0.1:9", "--timeout", "0"],
                           ["bench", "--endpoint", "http://127.0.0.1:9", "--timeout", "0"]],
           "k3: --timeout: expected an integer in [1, 86400], got '0'")
same_error("a missing value", [["plan", m, "--prompt"], ["run", m, "--prompt"],
                                                      ["bench", "--endpoint", "http://127.0.0.1:9", "--prompt"]],
           "k3: --prompt needs a value")
same_error("--state-cache-entries 0", [["serve", m, "--state-cache-entries", "0"]],
           "k3: --state-cache-entries: expected an integer in [1, 64], got '0'")
same_error("--disk fast", [["plan", m, "--disk", "fast"]], "k3: --disk: expected a number in [0.001, 1000], got 'fast'")
refused = []
for args, opt in [(["run", m, "-p", "x", "--port", "1"], "--port"), (["serve", m, "--system", "x"], "--system"),
                  (["plan", m, "--endpoint", "http://127.0.0.1:9"], "--endpoint"), (["eval", m, "--temp", "1"], "--temp"),
                  (["chat", m, "--disk", "2"], "--disk"), (["history", "list", "--temp", "1"], "--temp")]:
    rc, e = err(args)
    if rc != 2 or "unknown option '%s'" % opt not in e:
        refused.append("k3 %s: exit %d, %r" % (" ".join(args), rc, e))
check("options: a command refuses another command's option (run --port, serve --system, plan --endpoint, "
      "eval --temp, chat --disk, history list --temp)", refused)
PY
