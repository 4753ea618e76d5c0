#!/bin/sh
# t_docs.sh - the repository carries its own documentation: every docs/*.md
# a source file cites exists, every section it names ("docs/MODEL.md, "KDA"")
# is a heading there, every file path it names (engine/io/io.c, tests/t_stream.sh,
# or a bare io.c) is a file of the repository, and nothing cites a design
# document the repository does not contain.
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

readme = open("README.md", encoding="utf-8").read()
m = re.search(r"<!-- options:begin -->\n(.*?)<!-- options:end -->", readme, re.S)
table = subprocess.run(["./k3", "help", "options"], capture_output=True, text=True).stdout
if not m:
    print("FAIL docs: README's option list: no <!-- options:begin --> block")
elif m.group(1) != table or not table:
    print("FAIL docs: README's option list differs from `k3 help options` (run make readme-options)")
else:
    print("PASS docs: README's option list equals the options table (%d options)" % (table.count("\n") - 2))
PY
