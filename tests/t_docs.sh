#!/bin/sh
# t_docs.sh - the repository carries its own documentation: every docs/*.md
# a source file cites exists, every section it names ("docs/MODEL.md, "KDA"")
# is a heading there, every file path it names (engine/io/io.c, tests/t_stream.sh,
# or a bare io.c) is a file of the repository, and nothing cites a design
# document the repository does not contain; docs/OPTIONS.md's option list
# is current; the README is short (the "Chatting" keys within 60 lines), no
# sentence is said in two paragraphs, every exit code is documented, and
# every k3 example of the README runs as printed (from another directory,
# after make install).
cd "$(dirname "$0")/.." || exit 1
/usr/bin/python3 - <<'PY'
import os, re, subprocess

files = subprocess.check_output(["git", "ls-files", "--cached", "--others", "--exclude-standard"], text=True).split()
sources = [f for f in files if re.search(r"\.(c|h|sh|py)$|(^|/)Makefile$", f) and os.path.exists(f)]
names = {os.path.basename(f) for f in files}
sys_inc = ["/usr/include", subprocess.run(["gcc", "-print-file-name=include"], capture_output=True, text=True).stdout.strip()]
headings = {}
for f in files:
    if f.startswith("docs/") and f.endswith(".md") and os.path.exists(f):
        headings[f] = {re.sub(r"^#+\s*", "", l).strip() for l in open(f, encoding="utf-8") if l.startswith("#")}

def report(name, problems):
    if problems and os.environ.get("VERBOSE"):
        print("\n".join(problems))
    if problems:
        print("FAIL %s: %d problem(s), first: %s" % (name, len(problems), problems[0]))
    else:
        print("PASS %s" % name)

foreign, missing_doc, missing_section, missing_path, missing_name = [], [], [], [], []
doc_ref = re.compile(r"""(docs/[A-Za-z_]+\.md)((?:,? \(?(?:"[^"\n]+"|'[^'\n]+'))*)""")
path_ref = re.compile(r'\b((?:engine|app|chat|ui|history|include|offline|tests|tools|docs)/[A-Za-z0-9_/.-]*[A-Za-z0-9_]\.(?:c|h|sh|py|md))\b')
bare_ref = re.compile(r'(?<![/\w.-])([a-z][a-z0-9_]*\.[ch])\b')
for f in sources:
    text = open(f, encoding="utf-8", errors="replace").read()
    for n, line in enumerate(text.split("\n"), 1):
        if f == "tests/t_docs.sh" and n < 8:
            continue
        where = "%s:%d" % (f, n)
        if f != "tests/t_docs.sh" and re.search(r"DESIGN\.md|DESIGN §|kimi_(linear|k3)_spec|/work/shared|\bspec §", line):
            foreign.append("%s cites a document outside the repository" % where)
        for m in doc_ref.finditer(line):
            doc = m.group(1)
            if doc not in headings:
                missing_doc.append("%s: %s does not exist" % (where, doc))
                continue
            for sec in re.findall(r'"([^"]+)"|\'([^\']+)\'', m.group(2)):
                sec = sec[0] or sec[1]
                if sec not in headings[doc]:
                    missing_section.append('%s: %s has no section "%s"' % (where, doc, sec))
        for m in path_ref.finditer(line):
            p = m.group(1)
            if "/out/" not in p and not os.path.exists(p):
                missing_path.append("%s: %s does not exist" % (where, p))
        is_comment = re.match(r"\s*(/\*|\*|//)", line) or "/*" in line
        if f.endswith((".c", ".h")) and is_comment and not line.lstrip().startswith("#"):
            for m in bare_ref.finditer(line):
                if m.group(1) not in names and not any(os.path.exists(os.path.join(d, m.group(1))) for d in sys_inc):
                    missing_name.append("%s: %s is not a file of the repository" % (where, m.group(1)))
report("docs: no comment cites a design document the repository lacks", foreign)
report("docs: every cited docs/*.md exists", missing_doc)
report("docs: every cited section is a heading of its document", missing_section)
report("docs: every path named in a source file exists", missing_path)
report("docs: every bare file name in a C comment is a file of the repository", missing_name)

# Every C file of the program is named in docs/ARCHITECTURE.md's tables (a
# header counts as named with its .c file).
arch = open("docs/ARCHITECTURE.md", encoding="utf-8").read()
def named(base):
    return re.search(r"(?<![\w.-])%s(?!\w)" % re.escape(base), arch) is not None
unnamed = []
for f in files:
    if not re.match(r"(engine|app|chat|ui|history|offline|include)/.*\.[ch]$", f) or not os.path.exists(f):
        continue
    base = os.path.basename(f)
    if not named(base) and not (base.endswith(".h") and named(base[:-2] + ".c")):
        unnamed.append("%s is not named in docs/ARCHITECTURE.md" % f)
report("docs: every source file is named in docs/ARCHITECTURE.md", unnamed)

options_doc = open("docs/OPTIONS.md", encoding="utf-8").read()
m = re.search(r"<!-- options:begin -->\n(.*?)<!-- options:end -->", options_doc, re.S)
table = subprocess.run(["./k3", "help", "options"], capture_output=True, text=True).stdout
if not m:
    print("FAIL docs: docs/OPTIONS.md's option list: no <!-- options:begin --> block")
elif m.group(1) != table or not table:
    print("FAIL docs: docs/OPTIONS.md's option list differs from `k3 help options` (run make readme-options)")
else:
    print("PASS docs: docs/OPTIONS.md's option list equals the options table (%d options)" % (table.count("\n") - 2))

# README is the two-minute read: short, and the chat's keys come early
readme_lines = open("README.md", encoding="utf-8").read().split("\n")
chatting = [i + 1 for i, l in enumerate(readme_lines) if l.strip() == "## Chatting"]
if len(readme_lines) <= 120 and chatting and chatting[0] <= 60:
    print("PASS docs: README is %d lines (at most 120), \"Chatting\" starts at line %d (at most 60)"
          % (len(readme_lines), chatting[0]))
else:
    print("FAIL docs: README is %d lines (at most 120), \"Chatting\" at line %s (at most 60)"
          % (len(readme_lines), chatting[0] if chatting else "none"))

# no paragraph said twice: a sentence of 40 characters or more in two paragraphs
owned = ["README.md", "docs/COMMANDS.md", "docs/OPTIONS.md", "docs/RUNNING.md"]
seen, doubled = {}, []
for f in owned:
    if not os.path.exists(f):
        doubled.append("%s does not exist" % f)
        continue
    in_code = False
    paras, cur = [], []
    for l in open(f, encoding="utf-8").read().split("\n"):
        if l.startswith("```"):
            in_code = not in_code
            continue
        if in_code or l.startswith("|") or not l.strip():
            if cur: paras.append(" ".join(cur)); cur = []
            continue
        cur.append(l.strip())
    if cur: paras.append(" ".join(cur))
    for n, p in enumerate(paras):
        for sent in re.split(r"(?<=[.;:])\s+", p):
            if len(sent) < 40:
                continue
            where = (f, n)
            if sent in seen and seen[sent] != where:
                doubled.append("%s and %s paragraph %d both say '%s'" % (seen[sent][0], f, n, sent[:80]))
            seen.setdefault(sent, where)
report("docs: no sentence of the README and docs/{COMMANDS,OPTIONS,RUNNING}.md is said in two paragraphs", doubled)

# the exit codes app/cli.h defines are the ones docs/COMMANDS.md lists
codes = sorted(set(int(c) for c in re.findall(r"K3_EXIT_[A-Z_]+ = (\d+)", open("app/cli.h").read())))
listed = set()
if os.path.exists("docs/COMMANDS.md"):
    sec = open("docs/COMMANDS.md", encoding="utf-8").read().split("## Exit codes", 1)
    if len(sec) == 2:
        listed = set(int(c) for c in re.findall(r"^\| (\d+) \|", sec[1].split("\n## ", 1)[0], re.M))
if codes and listed == set(codes):
    print("PASS docs: docs/COMMANDS.md's \"Exit codes\" lists every K3_EXIT_* code (%s)" % ", ".join(map(str, codes)))
else:
    print("FAIL docs: exit codes in app/cli.h %s, in docs/COMMANDS.md %s" % (codes, sorted(listed)))
PY

# Every k3 example in the README's sh blocks runs as printed: `./k3 ...`
# here, `k3 ...` from another directory with the installed k3 first on PATH;
# a command waiting for input gets /quit (the full screen is not tested here).
OUT=tests/out/docs
rm -rf $OUT
mkdir -p $OUT/elsewhere $OUT/xdg
make --no-print-directory install PREFIX=/usr DESTDIR=$PWD/$OUT/stage > $OUT/install.log 2>&1
/usr/bin/python3 - "$PWD/$OUT" <<'PY'
import os, re, subprocess, sys
out = sys.argv[1]
env = dict(os.environ, PATH=out + "/stage/usr/bin:" + os.environ.get("PATH", ""),
           XDG_DATA_HOME=out + "/xdg", XDG_STATE_HOME=out + "/xdg", HOME=out + "/elsewhere")
env.pop("K3_MODEL", None)
env.pop("K3_MODELS", None)
examples, failed = [], []
for block in re.findall(r"```sh\n(.*?)```", open("README.md", encoding="utf-8").read(), re.S):
    for line in block.split("\n"):
        cmd = re.sub(r"\s+#.*$", "", line).strip()
        if re.match(r"(\./)?k3 ", cmd) or re.search(r"\| *(\./)?k3 ", cmd):
            examples.append(cmd)
for cmd in examples:
    cwd = os.getcwd() if "./k3" in cmd else out + "/elsewhere"
    try:
        r = subprocess.run(["sh", "-c", cmd], cwd=cwd, env=env, input="/quit\n", capture_output=True,
                           text=True, timeout=120)
        if r.returncode != 0:
            failed.append("%s: exit %d: %s" % (cmd, r.returncode, r.stderr.strip().split("\n")[-1][:150]))
    except subprocess.TimeoutExpired:
        failed.append("%s: still running after 120 s" % cmd)
if examples and not failed:
    print("PASS docs: the README's %d k3 examples run as printed (k3 from another directory after make install)"
          % len(examples))
else:
    print("FAIL docs: README k3 examples: %s" % (failed[0] if failed else "none found"))
PY
