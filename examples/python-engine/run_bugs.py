#!/usr/bin/python3
"""Runs `baton check` against the Python engine (make python-bugs; README.md).

  run_bugs.py check [--producer py|go] [--consumer py|go] [--label-filter EXPR]
      one Core run: starts E, PD and the aggregated baseline on loopback ports with one shared
      cache directory (the E and PD of either implementation, the baseline always Python's),
      writes the profile, runs `baton check`, stops everything, checks that nothing is left in
      the cache directory, prints the rule table; exits with baton check's exit code.

  run_bugs.py bugs [NAME ...]
      for every seeded bug (bugs.py), or the ones named: starts all three roles with
      `--bug NAME`, runs `baton check`, and compares the rules that failed with the rules the
      bug declares; prints bug x {declared, failed, verdict} and exits 1 unless every row
      matches (a bug whose run ends with other rules in `error` is reported too).

  run_bugs.py hashes [FILE.png ...]
      H-1 across implementations: publishes every PNG (default: fixtures/images and Go's
      image/png testdata when installed) to baton's encoder (preset tiny) and compares the
      content hash it answers with this engine's decoder and hash over preset "tiny"; exits 1
      on any difference (both rejecting a file counts as agreement).

Options: --baton PATH (default bin/baton at the repository root), --go-baton PATH (the binary
started for Go roles; default --baton), --engine PATH (the Python launcher), --report-dir DIR
(check: default out/python-engine/<producer>-<consumer>), --keep (keep the work directory with
the engines' logs, the profile and, for bugs, each run's report).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ENGINE = os.path.join(HERE, "baton-py-engine")
sys.path.insert(0, HERE)
from pyengine import bugs as bugs_mod  # noqa: E402

QUOTA = 2 << 20  # py-tiny entries are 50 KiB: ~40 publishes fill it
GO_QUOTA = 16 << 20  # Go's tiny entries are 392 KiB
START_TIMEOUT_S = 30


class Role:
    def __init__(self, impl, role, cache, workdir, args=(), go_baton=None, engine=ENGINE):
        self.impl, self.role = impl, role
        self.ready = os.path.join(workdir, "%s-%s.addr" % (impl, role))
        self.logpath = os.path.join(workdir, "%s-%s.log" % (impl, role))
        if impl == "py":
            cmd = [engine, "--role", role, "--listen", "127.0.0.1:0", "--ready-file", self.ready,
                   "--producer-quota-bytes", str(QUOTA)]
        else:
            cmd = [go_baton, "serve", "--role", role, "--listen", "127.0.0.1:0", "--ready-file", self.ready,
                   "--preset", "tiny", "--producer-quota-bytes", str(GO_QUOTA)]
        if role in ("encoder", "pd"):
            cmd += ["--cache-dir", cache]
        cmd += list(args)
        self.cmd = cmd
        self.log = open(self.logpath, "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.addr = None
        self.startup_s = None

    def wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s %s exited %d at start; log %s" % (self.impl, self.role, self.proc.returncode, self.logpath))
            if os.path.exists(self.ready) and os.path.getsize(self.ready) > 0:
                with open(self.ready) as f:
                    self.addr = f.read().strip()
                self.startup_s = time.monotonic() - self.t0
                return self.addr
            time.sleep(0.02)
        raise RuntimeError("%s %s not ready within %ds" % (self.impl, self.role, START_TIMEOUT_S))

    def stop(self):
        """SIGTERM (a drain like an accepted Shutdown), then the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def profile(path, producer, consumer, baseline, quota, name, level="core", test_hooks=False):
    with open(path, "w") as f:
        f.write("\n".join([
            "name: %s" % name,
            "implementation: {vendor: baton project, product: baton-py-engine, version: 0.1.0, contact: examples/python-engine}",
            "level: %s" % level,
            "endpoints: {producer: %s, consumer: %s, baseline: %s}" % (producer, consumer, baseline),
            "topologies: [E+PD]",
            "backends: [shared_dir]",
            "observables: true",
            "test_hooks: %s" % ("true" if test_hooks else "false"),
            "destructive: true",
            "producer_quota_bytes: %d" % quota,
            "reference_format: baton-json-v1",
            "case_timeout: 60s",
            ""]))


def run_once(args, name, producer="py", consumer="py", bug=None, report_dir=None, quiet=False):
    """Starts the roles, runs baton check; returns (exit code, results or None, info)."""
    work = tempfile.mkdtemp(prefix="baton-py-")
    cache = os.path.join(work, "cache")
    extra = (["--bug", bug] if bug else []) + (["--test-hooks"] if args.test_hooks else [])
    roles = []
    info = {"work": work}
    try:
        go_extra = ["--test-hooks"] if args.test_hooks else []
        e = Role(producer, "encoder", cache, work, extra if producer == "py" else go_extra, args.go_baton, args.engine)
        pd = Role(consumer, "pd", cache, work, extra if consumer == "py" else go_extra, args.go_baton, args.engine)
        agg = Role("py", "aggregated", cache, work, extra, args.go_baton, args.engine)
        roles = [e, pd, agg]
        for r in roles:
            r.wait_ready()
        info["startup_s"] = {"%s-%s" % (r.impl, r.role): round(r.startup_s, 2) for r in roles}
        prof = os.path.join(work, "profile.yaml")
        profile(prof, e.addr, pd.addr, agg.addr, QUOTA if producer == "py" else GO_QUOTA, name, args.level, args.test_hooks)
        report_dir = report_dir or os.path.join(work, "report")
        info["logs"] = [r.logpath for r in roles]
        cmd = [args.baton, "check", "--config", prof, "--report-dir", report_dir]
        if args.label_filter:
            cmd += ["--label-filter", args.label_filter]
        t0 = time.monotonic()
        out = subprocess.run(cmd, capture_output=True, text=True)
        info["check_s"] = round(time.monotonic() - t0, 1)
        if not quiet:
            sys.stdout.write("".join(l + "\n" for l in out.stdout.splitlines()
                                     if l[:5] in ("PASS ", "FAIL ", "N/A  ", "N/V  ", "ERR  ", "ERROR") or l.startswith("verdict")))
            if out.returncode == 3:
                sys.stdout.write(out.stdout[-3000:] + out.stderr[-3000:])
        results = None
        rp = os.path.join(report_dir, "results.json")
        if os.path.exists(rp):
            with open(rp) as f:
                results = json.load(f)
        info["report_dir"] = report_dir
        return out.returncode, results, info
    finally:
        codes = {}
        for r in roles:
            codes["%s-%s" % (r.impl, r.role)] = r.stop()
        info["exit_codes"] = codes
        left = []
        if os.path.isdir(cache):
            for dirpath, dirnames, filenames in os.walk(cache):
                left += [os.path.join(dirpath, n) for n in dirnames + filenames]
        info["cache_left"] = left
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def outcomes(results):
    by = {}
    for r in (results or {}).get("rules", []):
        by.setdefault(r["outcome"], set()).add(r["rule"])
    return by


def cmd_check(args):
    name = "baton-py-engine" if (args.producer, args.consumer) == ("py", "py") else \
        "mixed %s-E + %s-PD + py baseline" % (args.producer, args.consumer)
    code, results, info = run_once(args, name, args.producer, args.consumer,
                                   report_dir=args.report_dir or os.path.join(REPO, "out", "python-engine", "%s-%s" % (args.producer, args.consumer)))
    print("baton check exit %d in %.1fs; start-up %s; engines exited %s; cache left: %s; report %s"
          % (code, info.get("check_s", 0), info.get("startup_s"), info["exit_codes"], info["cache_left"] or "nothing",
             info.get("report_dir")))
    if info["cache_left"]:
        return code or 1
    return code


def cmd_bugs(args):
    names = args.names or sorted(bugs_mod.BUGS)
    rows = []
    ok = True
    t_all = time.monotonic()
    for name in names:
        bug = bugs_mod.BUGS[name]
        declared = set(bug.rules)
        known = set(bug.harness_also)
        missed = set(bug.harness_misses)
        t0 = time.monotonic()
        code, results, info = run_once(args, "baton-py-engine --bug " + name, bug=name, quiet=True)
        by = outcomes(results)
        failed = by.get("failed", set())
        errored = by.get("error", set()) | by.get("not verifiable", set())
        if code == 1 and failed == declared:
            verdict = "OK"
        elif code == 1 and known and failed == declared | known:
            verdict = "OK (harness also fails %s)" % ",".join(sorted(known))
        elif missed and failed == (declared - missed) and code in (0, 1):
            verdict = "OK (harness misses %s: known gap)" % ",".join(sorted(missed))
        else:
            verdict = "MISMATCH"
            ok = False
        rows.append((name, declared, failed, errored, verdict, time.monotonic() - t0))
        print("%-22s declared %-12s failed %-18s %s%s (%.1fs)" % (
            name, ",".join(sorted(declared)), ",".join(sorted(failed)) or "-", verdict,
            (" errors: " + ",".join(sorted(errored))) if errored else "", time.monotonic() - t0), flush=True)
        if results:
            for c in results.get("cases", []):
                if c.get("outcome") == "failed" and c.get("rule") not in declared:
                    print("    %s %s: %s" % ("known:" if c.get("rule") in known else "UNEXPECTED:", c.get("name"),
                                             (c.get("message") or "").split("\n")[0][:300]))
    print()
    print("%-22s | %-12s | %-18s | %s" % ("bug", "declared", "failed", "verdict"))
    print("-" * 90)
    for name, declared, failed, errored, verdict, dt in rows:
        print("%-22s | %-12s | %-18s | %s" % (name, ",".join(sorted(declared)), ",".join(sorted(failed)) or "-", verdict))
    print("%d bugs, %d matched, %.0fs" % (len(rows), sum(r[4].startswith("OK") for r in rows), time.monotonic() - t_all))
    return 0 if ok else 1


def cmd_hashes(args):
    import glob
    sys.path[:0] = [os.path.join(HERE, "build", "gen")]
    import grpc
    from openengine.v1 import common_pb2, control_pb2, control_pb2_grpc, encoder_pb2, inference_pb2, inference_pb2_grpc
    from pyengine import contenthash, png
    files = args.files or sorted(glob.glob(os.path.join(REPO, "fixtures", "images", "*.png")) +
                                 glob.glob("/usr/local/go/src/image/png/testdata/*.png") +
                                 glob.glob("/usr/local/go/src/image/png/testdata/pngsuite/*.png"))
    work = tempfile.mkdtemp(prefix="baton-py-h1-")
    e = Role("go", "encoder", os.path.join(work, "cache"), work, (), args.go_baton)
    same = rejected = 0
    diffs = []
    try:
        ch = grpc.insecure_channel(e.wait_ready())
        gen, ctl = inference_pb2_grpc.InferenceStub(ch), control_pb2_grpc.ControlStub(ch)
        for f in files:
            with open(f, "rb") as fh:
                data = fh.read()
            try:
                w, h, px = png.decode(data, 1 << 24)
                mine = contenthash.content_hash("tiny", w, h, px)
            except png.PNGError as err:
                mine = "rejected (%s)" % err
            try:
                ev = list(gen.Generate(inference_pb2.GenerateRequest(
                    media=[common_pb2.MediaItem(modality=common_pb2.MODALITY_IMAGE, raw_bytes=data)],
                    encoder=encoder_pb2.EncoderOptions(publish=encoder_pb2.EncoderPublish())), timeout=60))
                theirs = ev[0].encoder_ready.items[0].content_hash
                ctl.Abort(control_pb2.AbortRequest(encoder_cache=ev[0].encoder_ready.ref))
            except grpc.RpcError as err:
                theirs = "rejected (%s)" % err.code().name
            if mine == theirs:
                same += 1
            elif mine.startswith("rejected") and theirs.startswith("rejected"):
                rejected += 1
            else:
                diffs.append((os.path.basename(f), mine, theirs))
        ch.close()
    finally:
        e.stop()
        shutil.rmtree(work, ignore_errors=True)
    for name, mine, theirs in diffs:
        print("DIFF %-28s this engine: %s\n     %-28s baton:       %s" % (name, mine[:90], "", theirs[:90]))
    print("%d PNGs: %d equal hashes, %d rejected by both, %d different" % (len(files), same, rejected, len(diffs)))
    return 1 if diffs else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baton", default=os.path.join(REPO, "bin", "baton"))
    p.add_argument("--go-baton", default=None)
    p.add_argument("--label-filter", default="")
    p.add_argument("--report-dir", default="")
    p.add_argument("--engine", default=ENGINE, help="the Python engine's launcher (default: baton-py-engine here)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, profile, cache)")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--producer", choices=("py", "go"), default="py")
    c.add_argument("--consumer", choices=("py", "go"), default="py")
    c.add_argument("--level", choices=("core", "lifecycle"), default="core")
    c.add_argument("--test-hooks", action="store_true", help="start every role with --test-hooks and declare test_hooks")
    b = sub.add_parser("bugs")
    b.add_argument("names", nargs="*", choices=sorted(bugs_mod.BUGS) + [[]], metavar="NAME")
    h = sub.add_parser("hashes")
    h.add_argument("files", nargs="*")
    args = p.parse_args()
    args.test_hooks = getattr(args, "test_hooks", False)
    args.level = getattr(args, "level", "core")
    args.go_baton = args.go_baton or args.baton
    if not os.path.exists(args.baton):
        sys.stderr.write("no %s: run make build\n" % args.baton)
        return 3
    return {"check": cmd_check, "bugs": cmd_bugs, "hashes": cmd_hashes}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
