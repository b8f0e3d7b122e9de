#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Guest side of scripts/pyverbs-guest.sh: runs rdma-core's pyverbs tests
(Debian's python3-pyverbs 44.0-2, its tests/ gunzipped) one module at a time
and prints each module's unittest verbose output between markers on stdout,
for scripts/pyverbs-compare.py to parse.

    python3.11 pyverbs-run.py --lib NAME --nonce N --tests DIR
        [--dev rxe0] [--port 1] [--gid 1] [--timeout S] [--exec] [--no-list]
        [--netdev-from-rdma-link] ITEM...

--netdev-from-rdma-link (fork mode only): v44's RDMATestCase finds a device's
IP address through /sys/class/infiniband/DEV/device/net/, which rxe does not
have, so every RDMACMBaseTest (test_rdmacm) skips with "doesn't have net
interface". This option replaces, in the preloaded suite, the lookup of the
network device by what `rdma -j link show DEV/PORT` names (rdma-core v46's
tests ask `rdma link` the same way), for real rdma-core and ours alike; the
IP and MAC then come from the suite's own `ip -j addr show` as before.

An ITEM is a module (test_qp: `-k tests.test_qp.`) or a test id
(tests.test_cq.CQTest.test_resize_cq: `-k` that id, for a retry). Every item
runs as `run_tests.py --dev D --port P --gid G -v -k PATTERN` in a process of
its own, so a crash in one cannot hide the others. By default that process
is forked from this one after it has imported what run_tests.py imports
(tests/__init__.py imports every test module, and with them pyverbs' 35
extension modules), then executes run_tests.py itself (runpy) with the
item's arguments and exits through the interpreter's normal exit. `--exec`
starts a fresh `python3.11 run_tests.py ...` per item instead: the literal
form, ~2.4 s more per item under TCG (~45 s per library for 19 modules);
both give the same outcomes test by test (checked on the 170 tests).

An item's run is bounded by --timeout: then SIGABRT to its process group
(faulthandler prints where every thread was), SIGKILL 10 s later.

Output (markers on their own lines, <N> = --nonce):
    === pyverbs:<N>: python <version> mode fork|exec
    === pyverbs:<N>: libs <lib> <soname>=<path>...        (from /proc/self/maps)
    === pyverbs:<N>: import-failed <lib>  / import-end <lib>  (the traceback between)
    === pyverbs:<N>: list-begin <lib> / list-end <lib> status=S
    === pyverbs:<N>: begin <lib> <item>
    === pyverbs:<N>: end <lib> <item> status=exit:C|signal:S|timeout secs=T
The list is `run_tests.py --list-tests -k P1 -k P2 ...`: every test id the
items hold, so tests a crash left unrun are still known (--no-list: none).
Standard library only (it runs under the guest's python3.11).
"""

import argparse
import faulthandler
import os
import runpy
import select
import signal
import sys
import time
import traceback

LIBS = ("libibverbs.so", "libmlx5.so", "libefa.so", "librdmacm.so", "libpython3.11.so")


def mapped_libs():
    """The files this process mapped for the libraries in LIBS."""
    found = {}
    with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
        for line in maps:
            path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
            base = os.path.basename(path)
            for lib in LIBS:
                if base.startswith(lib):
                    found.setdefault(lib, set()).add(path)
    return found


def preload(tests_dir):
    """Import what run_tests.py imports, as run_tests.py would."""
    from importlib.machinery import SourceFileLoader

    sys.path[0] = tests_dir
    import args_parser  # noqa: F401  (run_tests.py's first import)

    SourceFileLoader("tests", os.path.join(tests_dir, "__init__.py")).load_module()


def netdev_from_rdma_link():
    """Patch tests.base.RDMATestCase._get_ip_mac (see --netdev-from-rdma-link)."""
    import json
    import subprocess

    cls = sys.modules["tests.base"].RDMATestCase
    sysfs_lookup = cls._get_ip_mac

    def netdev(dev, port):
        try:
            out = subprocess.check_output(["rdma", "-j", "link", "show", "%s/%s" % (dev, port)])
            links = json.loads(out.decode())
        except (OSError, subprocess.CalledProcessError, ValueError):
            return None
        return links[0].get("netdev") if links else None

    def _get_ip_mac(self, dev, port, idx):
        if os.path.exists("/sys/class/infiniband/{}/device/net/".format(dev)):
            return sysfs_lookup(self, dev, port, idx)
        name = netdev(dev, port)
        ip_addr = mac_addr = None
        if name:
            try:
                ip_addr, mac_addr = self.get_ip_mac_address(name)
            except (KeyError, IndexError):
                pass
        self.args.append([dev, port, idx, ip_addr, mac_addr])

    cls._get_ip_mac = _get_ip_mac


def child_main(run_tests, argv, log):
    """In the forked child: run run_tests.py with ARGV, output to LOG.

    Never returns: it ends in SystemExit, which unwinds to the interpreter's
    normal exit (objects left alive are finalized, as at the end of
    `python3.11 run_tests.py`); os._exit only if the setup itself fails."""
    try:
        os.setpgid(0, 0)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        sys.argv = [run_tests] + argv
    except BaseException:
        os._exit(126)
    try:
        runpy.run_path(run_tests, run_name="__main__")
    except SystemExit:
        raise
    except BaseException:  # report it, then exit as python would
        traceback.print_exc()
        raise SystemExit(1)
    raise SystemExit(0)


def wait_bounded(pid, timeout):
    """Wait for PID (a process group leader); returns (status text, seconds)."""
    start = time.monotonic()
    pidfd = os.pidfd_open(pid)
    timed_out = False
    try:
        if not select.select([pidfd], [], [], timeout)[0]:
            timed_out = True
            try:
                os.killpg(pid, signal.SIGABRT)
            except ProcessLookupError:
                pass
            if not select.select([pidfd], [], [], 10)[0]:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(pidfd)
    secs = time.monotonic() - start
    # whatever the module left behind in its group (forked helpers) goes too
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if timed_out:
        return "timeout", secs
    if os.WIFSIGNALED(status):
        return "signal:%d" % os.WTERMSIG(status), secs
    return "exit:%d" % os.waitstatus_to_exitcode(status), secs


def run_one(opts, argv, log):
    """Run run_tests.py ARGV in a process of its own; output in LOG."""
    run_tests = os.path.join(opts.tests, "run_tests.py")
    sys.stdout.flush()
    sys.stderr.flush()
    if opts.exec:
        pid = os.fork()
        if pid == 0:
            try:
                os.setpgid(0, 0)
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.chdir(opts.tests)
                os.execv(sys.executable, [sys.executable, run_tests] + argv)
            finally:
                os._exit(127)
    else:
        pid = os.fork()
        if pid == 0:
            child_main(run_tests, argv, log)  # raises SystemExit, up to the interpreter
    try:
        os.setpgid(pid, pid)  # also done by the child: no race either way
    except (ProcessLookupError, PermissionError):
        pass
    return wait_bounded(pid, opts.timeout)


def dump(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        text = "pyverbs-run: cannot read %s: %s\n" % (path, e)
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--nonce", required=True)
    ap.add_argument("--tests", required=True, help="the gunzipped tests/ directory")
    ap.add_argument("--dev", default="rxe0")
    ap.add_argument("--port", default="1")
    ap.add_argument("--gid", default="1")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--exec", action="store_true", help="a fresh python per module")
    ap.add_argument("--no-list", action="store_true", help="no --list-tests run")
    ap.add_argument("--work", default="/tmp/pyverbs")
    ap.add_argument("--netdev-from-rdma-link", action="store_true",
                    help="find a device's netdev with `rdma link` (fork mode)")
    ap.add_argument("items", nargs="+", metavar="ITEM", help="a module or a test id")
    opts = ap.parse_args()
    mark = "=== pyverbs:%s:" % opts.nonce
    lib = opts.lib
    os.makedirs(opts.work, exist_ok=True)
    os.chdir(opts.tests)
    faulthandler.enable()
    print(mark, "python", sys.version.split()[0], "mode", "exec" if opts.exec else "fork")

    # The import is the probe: which libibverbs/libmlx5/libefa this process got.
    try:
        preload(opts.tests)
        if opts.netdev_from_rdma_link:
            if opts.exec:
                raise SystemExit("--netdev-from-rdma-link patches the preloaded suite: not with --exec")
            netdev_from_rdma_link()
            print(mark, "patched", lib, "RDMATestCase._get_ip_mac: netdev from rdma link")
    except BaseException:
        print(mark, "import-failed", lib)
        traceback.print_exc(file=sys.stdout)
        print(mark, "import-end", lib)
        libs = mapped_libs()
        print(mark, "libs", lib, " ".join("%s=%s" % (k, ",".join(sorted(v))) for k, v in sorted(libs.items())))
        return 0
    libs = mapped_libs()
    print(mark, "libs", lib, " ".join("%s=%s" % (k, ",".join(sorted(v))) for k, v in sorted(libs.items())))

    base = ["--dev", opts.dev, "--port", str(opts.port), "--gid", str(opts.gid), "-v"]

    def pattern(item):
        return item if item.startswith("tests.") else "tests.%s." % item

    if not opts.no_list:
        pats = []
        for item in opts.items:
            pats += ["-k", pattern(item)]
        log = os.path.join(opts.work, "%s-list.log" % lib)
        status, _ = run_one(opts, ["--list-tests"] + pats, log)
        print(mark, "list-begin", lib)
        dump(log)
        print(mark, "list-end", lib, "status=%s" % status)

    for item in opts.items:
        log = os.path.join(opts.work, "%s-%s.log" % (lib, item))
        print(mark, "begin", lib, item)
        sys.stdout.flush()
        status, secs = run_one(opts, base + ["-k", pattern(item)], log)
        dump(log)
        print(mark, "end", lib, item, "status=%s" % status, "secs=%.1f" % secs)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
