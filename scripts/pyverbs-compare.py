#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Host side of scripts/pyverbs-guest.sh: parses the guest console that
scripts/pyverbs-run.py wrote (rdma-core's pyverbs tests, unittest's verbose
output per module, on real rdma-core and on ours) and compares the two runs
test by test.

    pyverbs-compare.py --nonce N [--kernel K] [--real-only] [--ours-prefix /guest/ours/]
        [--guest-status RC] [--table all|rest|changed|none] [--markdown] CONSOLE_LOG

Prints a table (test id, real outcome, ours outcome), a verdict line and a
summary in cargo's shape for scripts/test.sh:
    test result: ok. P passed; F failed; I ignored; 0 measured; 0 filtered out
P = tests that pass on both, F = tests that pass on real rdma-core and not
on ours (plus one per harness problem: the real run crashed or timed out in
a module, did not import, or passed nothing), I = the rest. "Pass" is
unittest's `ok` (or `expected failure`). Outcomes: ok, FAIL, ERROR, skipped,
expected failure, unexpected success, crashed (the module's process died by
a signal while this test ran or before it started), timeout (likewise, the
module ran past its bound), not run (the module ended normally but never
reported the test), import failed (pyverbs did not import: every test).
With --real-only: P = tests ok on real rdma-core, F = harness problems.
Exit status: 0 if the verdict is ok, 1 otherwise, 2 on bad usage.
"""

import argparse
import ast
import re
import sys

PASS = ("ok", "expected failure")
SEP_EQ = "=" * 70
SEP_DASH = "-" * 70
KERNEL_LINE = re.compile(r"^\[\s*\d+\.\d+\] ")
# unittest (3.11) describes a test as `name (module.Class.name)`, and a
# class or module fixture as `setUpClass (module.Class)` / `setUpModule (module)`.
HEADER = re.compile(r"^(?P<name>\w+) \((?P<id>tests\.[\w.]+)\)(?P<rest>.*)$")
RESULT = re.compile(
    r"(?P<res>ok|FAIL|ERROR|expected failure|unexpected success|skipped (?P<why>'.*'|\".*\"))$"
)
DETAIL = re.compile(r"^(?P<kind>FAIL|ERROR|UNEXPECTED SUCCESS): (?P<name>\w+) \((?P<id>tests\.[\w.]+)\)")
FIXTURES = ("setUpClass", "tearDownClass", "setUpModule", "tearDownModule")


class Outcome:
    """One test's outcome in one run: a kind (see the module doc) and a reason."""

    def __init__(self, kind, reason=""):
        self.kind = kind
        self.reason = reason

    def passed(self):
        return self.kind in PASS

    def text(self, width=0):
        s = self.kind + (": " + self.reason if self.reason else "")
        if width and len(s) > width:
            s = s[: width - 3] + "..."
        return s


def module_of(test_id):
    parts = test_id.split(".")
    return parts[1] if len(parts) > 1 else test_id


def numbered(ids):
    """Repeated ids (a TestCase class imported into a second module runs twice) get #2, #3..."""
    seen = {}
    out = []
    for i in ids:
        seen[i] = seen.get(i, 0) + 1
        out.append(i if seen[i] == 1 else "%s#%d" % (i, seen[i]))
    return out


class Run:
    """What one library's run printed: libs, import error, test list, module outputs."""

    def __init__(self):
        self.libs = {}
        self.import_error = None
        self.listed = []
        self.list_status = None
        self.modules = {}  # module -> (lines, status or None, secs)
        self.order = []
        self.exited = None


def parse_console(path, nonce):
    mark = re.compile(r"^=== pyverbs:%s: (?P<what>\S+)(?: (?P<rest>.*))?$" % re.escape(nonce))
    runs = {}
    python = None
    buf = None
    cur = None  # (lib, kind, module)
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n").replace("\r", "")
            m = mark.match(line)
            if not m:
                if buf is not None and not KERNEL_LINE.match(line):
                    buf.append(line)
                continue
            what, rest = m.group("what"), (m.group("rest") or "").split()
            if what == "python":
                python = " ".join(rest)
                continue
            if not rest:
                continue
            run = runs.setdefault(rest[0], Run())
            if what == "libs":
                for item in rest[1:]:
                    k, _, v = item.partition("=")
                    run.libs[k] = v.split(",") if v else []
            elif what == "import-failed":
                buf, cur = [], (rest[0], "import", None)
            elif what == "import-end":
                run.import_error = buf or ["(no traceback)"]
                buf = cur = None
            elif what == "list-begin":
                buf, cur = [], (rest[0], "list", None)
            elif what == "list-end":
                run.listed = [l.strip() for l in (buf or []) if re.match(r"^tests\.[\w.]+$", l.strip())]
                run.list_status = field(rest, "status")
                buf = cur = None
            elif what == "begin" and len(rest) >= 2:
                if cur and cur[1] == "module":  # the previous module never ended
                    close_module(runs, cur, buf, None, None)
                buf, cur = [], (rest[0], "module", rest[1])
                run.order.append(rest[1])
            elif what == "end" and len(rest) >= 2:
                close_module(runs, (rest[0], "module", rest[1]), buf or [], field(rest, "status"), field(rest, "secs"))
                buf = cur = None
            elif what == "runner-exit":
                run.exited = field(rest, "rc")
    if cur and cur[1] == "module":
        close_module(runs, cur, buf or [], None, None)
    return python, runs


def field(words, key):
    for w in words:
        if w.startswith(key + "="):
            return w[len(key) + 1 :]
    return None


def close_module(runs, cur, lines, status, secs):
    runs[cur[0]].modules[cur[2]] = (lines, status, secs)


def parse_verbose(lines):
    """unittest's verbose output -> ([(id, Outcome)], fixtures {id: Outcome}, pending id)."""
    results = []
    fixtures = {}
    pending = None
    i = 0
    n = len(lines)

    def record(tid, name, res, why):
        if res == "ok":
            o = Outcome("ok")
        elif res.startswith("skipped"):
            try:
                reason = ast.literal_eval(why)
            except (ValueError, SyntaxError):
                reason = why
            o = Outcome("skipped", str(reason))
        else:
            o = Outcome(res)
        if name in FIXTURES:
            fixtures.setdefault(tid, []).append((name, o))
        else:
            results.append((tid, o))

    while i < n:
        line = lines[i]
        if line == SEP_EQ or line == SEP_DASH:
            break
        h = HEADER.match(line)
        if h and (h.group("id").endswith("." + h.group("name")) or h.group("name") in FIXTURES):
            if pending:
                results.append((pending[0], Outcome("ERROR", "unparsed unittest output")))
            pending = (h.group("id"), h.group("name"))
            line = h.group("rest")
        if pending:
            # the result follows " ... " at the end of the header or of the
            # docstring line, or stands alone after output the test printed
            r = None
            pos = line.rfind(" ... ")
            if pos >= 0:
                r = RESULT.match(line[pos + 5 :])
            if r is None and not h:
                r = RESULT.fullmatch(line.strip())
            if r:
                record(pending[0], pending[1], r.group("res"), r.group("why"))
                pending = None
        i += 1
    # FAIL/ERROR blocks: the reason is the exception, the lines after the
    # traceback's last indented one (a message may span lines)
    blocks = {}
    cur = None
    for line in lines[i:]:
        d = DETAIL.match(line)
        if d:
            cur = blocks.setdefault(d.group("id"), [])
            continue
        if line == SEP_EQ or line.startswith("Ran "):
            cur = None
            continue
        if cur is not None and line != SEP_DASH:
            cur.append(line)
    reasons = {}
    for tid, block in blocks.items():
        last = max([k for k, l in enumerate(block) if l[:1].isspace()] or [-1])
        reasons[tid] = " ".join(l.strip() for l in block[last + 1 :] if l.strip())
    for tid, o in results:
        if o.kind in ("FAIL", "ERROR", "unexpected success") and reasons.get(tid):
            o.reason = reasons[tid]
    for tid, lst in fixtures.items():
        for name, o in lst:
            if o.kind in ("FAIL", "ERROR") and reasons.get(tid):
                o.reason = reasons[tid]
    return results, fixtures, pending[0] if pending else None


def outcomes(run, expected, guest_status):
    """Per-test outcomes of one run, every id in EXPECTED (module -> ids) included."""
    out = {}
    if run is None or run.import_error is not None:
        why = "no run" if run is None else run.import_error[-1]
        for ids in expected.values():
            for tid in ids:
                out[tid] = Outcome("import failed", why)
        return out
    for mod, ids in expected.items():
        got = run.modules.get(mod)
        if got is None:
            why = "guest timed out" if guest_status == "124" else "module never started"
            kind = "timeout" if guest_status == "124" else "crashed"
            for tid in ids:
                out[tid] = Outcome(kind, why)
            continue
        lines, status, _ = got
        results, fixtures, pending = parse_verbose(lines)
        ran = dict(zip(numbered([t for t, _ in results]), [o for _, o in results]))
        out.update(ran)
        if status is None:
            kind, why = ("timeout", "guest timed out") if guest_status == "124" else ("crashed", "the guest or runner died")
        elif status == "timeout":
            kind, why = "timeout", "module timed out"
        elif status.startswith("signal:"):
            kind, why = "crashed", "module died by signal %s" % status.split(":")[1]
        else:
            kind, why = None, None
        if pending and kind:
            out[numbered_last(out, pending)] = Outcome(kind, why + " while running it")
        for tid in ids:
            if tid in out:
                continue
            if kind:
                out[tid] = Outcome(kind, why)
                continue
            cls = tid.rsplit(".", 1)[0].split("#")[0]
            fx = fixtures.get(cls) or fixtures.get("tests." + mod)
            if fx:
                name, o = fx[0]
                out[tid] = Outcome(o.kind, "%s: %s" % (name, o.reason) if o.reason else name)
            else:
                out[tid] = Outcome("not run", "module %s" % (status or "?"))
    return out


def numbered_last(out, tid):
    k, n = tid, 1
    while k in out:
        n += 1
        k = "%s#%d" % (tid, n)
    return k


def lib_problem(run, lib, ours_prefix, require_rdmacm=False):
    """Why RUN did not load the libraries it should have (None if it did)."""
    if run is None or not run.libs:
        return None if run is None or run.import_error else "%s: no library map printed" % lib
    ibv = run.libs.get("libibverbs.so", [])
    if len(ibv) != 1:
        return "%s: libibverbs mapped %d times: %s" % (lib, len(ibv), " ".join(ibv))
    if lib == "real":
        if ours_prefix and ibv[0].startswith(ours_prefix):
            return "real: libibverbs from %s" % ibv[0]
        return None
    for k in ("libibverbs.so", "libmlx5.so", "libefa.so") + (("librdmacm.so",) if require_rdmacm else ()):
        paths = run.libs.get(k, [])
        if not paths or not all(p.startswith(ours_prefix) for p in paths):
            return "ours: %s came from %s, not from %s" % (k + ".1", ",".join(paths) or "nowhere", ours_prefix)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("console")
    ap.add_argument("--nonce", required=True)
    ap.add_argument("--kernel", default="?")
    ap.add_argument("--real-only", action="store_true")
    ap.add_argument("--ours-prefix", default="/guest/ours/")
    ap.add_argument("--guest-status", default="0", help="run-guest.sh's exit status")
    ap.add_argument("--table", choices=("all", "rest", "changed", "none"), default="all",
                    help="rows: all, rest (not ok on both), changed (the outcome differs), none")
    ap.add_argument("--markdown", action="store_true", help="the table in Markdown")
    ap.add_argument("--known-gaps", metavar="FILE",
                    help="tests (`module.Class.test  reason` per line, # comments) that pass on "
                         "real rdma-core and are known not to on ours yet: listed, not failed")
    ap.add_argument("--width", type=int, default=60, help="outcome column width (0: no limit)")
    ap.add_argument("--no-lib-check", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--require-rdmacm", action="store_true",
                    help="ours must have mapped librdmacm.so from --ours-prefix too")
    ap.add_argument("--skip-must-skip", action="store_true",
                    help="a test skipped on real rdma-core must be skipped (or pass) on ours: "
                         "a failure, an error, a crash or a hang there counts failed")
    ap.add_argument("--problem", action="append", default=[], metavar="TEXT",
                    help="a harness problem found by the caller (counted failed)")
    ap.add_argument("--print-lost", type=int, metavar="N",
                    help="only print the ids of the tests that pass on real rdma-core and not on ours, "
                    "one a line, if there are 1..N of them and ours imported (the guest retries them)")
    opts = ap.parse_args()
    tag = "[%s] " % opts.kernel

    python, runs = parse_console(opts.console, opts.nonce)
    real, ours = runs.get("real"), runs.get("ours")
    problems = list(opts.problem)  # harness problems: each one counts as a failed test
    notes = []  # what went wrong on ours: the per-test counts carry it

    # the test ids: the real run's --list-tests, else ours', else what ran
    listed = (real and real.listed) or (ours and ours.listed) or []
    expected = {}
    for tid in numbered(listed):
        expected.setdefault(module_of(tid), []).append(tid)
    for run in (real, ours):
        for mod in run.order if run else []:
            expected.setdefault(mod, [])
    if real is None:
        problems.append("the real run printed nothing (guest status %s)" % opts.guest_status)
    elif not listed:
        problems.append("no test list (list status %s)" % (real.list_status,))

    r = outcomes(real, expected, opts.guest_status)
    o = {} if opts.real_only else outcomes(ours, expected, opts.guest_status)
    p = None if opts.no_lib_check else lib_problem(real, "real", opts.ours_prefix)
    if p:
        problems.append(p)
    p = None if opts.real_only or opts.no_lib_check else lib_problem(ours, "ours", opts.ours_prefix, opts.require_rdmacm)
    lib_bad = p is not None
    if p:
        # not our library: nothing of ours was tested, every test fails
        notes.append(p[len("ours: "):])
        for tid in o:
            o[tid] = Outcome("import failed", p)
    if real is not None:
        if real.import_error:
            problems.append("real rdma-core: pyverbs did not import: %s" % real.import_error[-1])
        for mod in expected:
            st = real.modules.get(mod, (None, None, None))[1]
            if st is None or st == "timeout" or st.startswith("signal:"):
                problems.append("real rdma-core: module %s %s" % (mod, st or "did not finish"))
    if not opts.real_only and ours is not None and ours.import_error:
        notes.append("pyverbs did not import (%s): every test counted failed" % ours.import_error[-1])
    if not opts.real_only and ours is None and real is not None:
        notes.append("no run at all (guest status %s): every test counted failed" % opts.guest_status)
    if not opts.real_only and ours is not None:
        for mod in expected:
            st = ours.modules.get(mod, (None, None, None))[1]
            if ours.import_error is None and (st is None or st == "timeout" or st.startswith("signal:")):
                notes.append("module %s %s" % (mod, st or "did not finish"))

    ids = [t for mod in expected for t in expected[mod]]
    ids += sorted(set(r) - set(ids))
    ids += sorted(set(o) - set(ids))
    none = Outcome("-")

    # A test that passes on real and not on ours was run once more on ours
    # (the guest's retry run, "ours-retry", one process per test): passing
    # then makes it a flaky pass, shown as such.
    first_lost = [t for t in ids if r.get(t, none).passed() and not o.get(t, none).passed()]
    if opts.print_lost is not None:
        # retry failures, not crashes or hangs (those are findings of their own)
        again = [t for t in first_lost if o[t].kind in ("FAIL", "ERROR", "skipped", "unexpected success")]
        if ours is not None and ours.import_error is None and not lib_bad and 0 < len(again) <= opts.print_lost:
            for t in dict.fromkeys(t.split("#")[0] for t in again):
                print(t)
        return 0
    retry = runs.get("ours-retry")
    flaky = []
    for t in first_lost if retry and not opts.real_only else []:
        got = retry.modules.get(t.split("#")[0])
        if not got:
            continue
        results, _, _ = parse_verbose(got[0])
        again = [res for tid, res in results if tid == t.split("#")[0]]
        if got[1] == "exit:0" or again:
            if again and again[0].passed():
                flaky.append((t, o[t].text()))
                o[t] = Outcome(again[0].kind, "on retry; first %s" % o[t].text())
            elif again:
                o[t].reason += " (retry: %s)" % again[0].text()
    both = [t for t in ids if r.get(t, none).passed() and (opts.real_only or o.get(t, none).passed())]
    lost = [] if opts.real_only else [t for t in ids if r.get(t, none).passed() and not o.get(t, none).passed()]
    # A skip on real rdma-core is the library saying "not supported here";
    # ours must say so too (skip) or do the work (pass), never fail.
    broke = []
    if opts.skip_must_skip and not opts.real_only:
        broke = [t for t in ids if r.get(t, none).kind == "skipped"
                 and not (o.get(t, none).passed() or o.get(t, none).kind == "skipped")]
        lost += broke
    # Known gaps: what the library does not do yet (each with its reason),
    # shown apart and not counted failed; one that passes now is reported,
    # for its line to go.
    gaps = {}
    if opts.known_gaps:
        with open(opts.known_gaps) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    tid, _, why = line.partition(" ")
                    gaps["tests." + tid] = why.strip()
    known = [t for t in lost if t in gaps]
    lost = [t for t in lost if t not in gaps]
    broke = [t for t in broke if t in lost]
    stale = [t for t in ids if t in gaps and t in both]
    extra = [] if opts.real_only else [t for t in ids if o.get(t, none).passed() and not r.get(t, none).passed()]
    real_pass = sum(1 for t in ids if r.get(t, none).passed())
    if real is not None and real_pass == 0:
        problems.append("real rdma-core passed no test")

    # the table
    rows = []
    for t in ids:
        ro, oo = r.get(t, none), o.get(t, none)
        if opts.table == "rest" and ro.kind == "ok" and (opts.real_only or oo.kind == "ok"):
            continue
        if opts.table == "changed" and (opts.real_only or (ro.kind == oo.kind and not oo.reason.startswith("on retry"))):
            continue
        flag = "!s" if t in broke else "!!" if t in lost else ("??" if t in extra else "")
        rows.append((flag, t[len("tests."):] if t.startswith("tests.") else t, ro, oo))
    if opts.table != "none" and rows:
        w = opts.width
        if opts.markdown:
            print("| test | real rdma-core | ours |" if not opts.real_only else "| test | real rdma-core |")
            print("|---|---|---|" if not opts.real_only else "|---|---|")
            for flag, t, ro, oo in rows:
                cells = [("**%s**" % t) if flag else t, ro.text(w)] + ([] if opts.real_only else [oo.text(w)])
                print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        else:
            # !! = passes on real rdma-core, not on ours; !s = skipped on real
            # rdma-core, an error on ours; ?? = passes on ours only
            tw = max(len(t) for _, t, _, _ in rows)
            rw = max(len(ro.text(w)) for _, _, ro, _ in rows)
            print("%spyverbs, test by test:" % tag)
            print(("   %-*s  %-*s  %s" % (tw, "test", rw, "real rdma-core", "" if opts.real_only else "ours")).rstrip())
            for flag, t, ro, oo in rows:
                line = "%-2s %-*s  %-*s  %s" % (flag, tw, t, rw, ro.text(w), "" if opts.real_only else oo.text(w))
                print(line.rstrip())
        print()

    def counts(res):
        c = {}
        for t in ids:
            k = res.get(t, none).kind
            c[k] = c.get(k, 0) + 1
        return ", ".join("%d %s" % (v, k) for k, v in sorted(c.items(), key=lambda kv: -kv[1]))

    print("%spyverbs on %s (python %s): %d tests in %d modules" % (tag, opts.kernel, python or "?", len(ids), len(expected)))
    print("%s  real rdma-core: %s" % (tag, counts(r)))
    if not opts.real_only:
        print("%s  ours:           %s" % (tag, counts(o)))
        for t in extra:
            print("%s  note: passes on ours only (real: %s): %s" % (tag, r.get(t, none).text(), t))
        for t, first in flaky:
            print("%s  flaky on ours: %s: passed on retry, first %s" % (tag, t, first))
    for t in known:
        print("%s  known gap (%s): %s" % (tag, gaps[t], t))
    for t in stale:
        print("%s  note: listed as a known gap but passes now (remove it from %s): %s"
              % (tag, opts.known_gaps, t))
    for p in notes:
        print("%s  ours: %s" % (tag, p))
    for p in problems:
        print("%sFAILED: harness: %s" % (tag, p))
    failed = len(lost) + len(problems)
    if opts.real_only:
        verdict = "baseline only: %d of %d tests pass on real rdma-core" % (real_pass, len(ids))
    elif not lost and known:
        verdict = ("every test that passes on real rdma-core (%d) passes on ours but %d known gap(s)"
                   % (real_pass, len(known)))
    elif not lost:
        verdict = "every test that passes on real rdma-core (%d) passes on ours" % real_pass
        if opts.skip_must_skip:
            verdict += ", and every test it skips is skipped or passes"
    else:
        verdict = "%d of the %d tests that pass on real rdma-core do not pass on ours" % (len(lost) - len(broke), real_pass)
        if broke:
            verdict += "; %d it skips end in an error on ours" % len(broke)
    ok = failed == 0
    print("%sverdict: %s: %s" % (tag, "ok" if ok else "FAILED", verdict))
    print(
        "%stest result: %s. %d passed; %d failed; %d ignored; 0 measured; 0 filtered out (pyverbs %s, %s)"
        % (tag, "ok" if ok else "FAILED", len(both), failed, len(ids) - len(both) - len(lost),
           "real rdma-core only" if opts.real_only else "ours vs real rdma-core", opts.kernel)
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
