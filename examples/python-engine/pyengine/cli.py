"""Command line: baton-py-engine --role encoder|pd|aggregated --listen HOST:PORT [...]

Exit codes (as `baton serve`): 0 after a clean drain (Shutdown or SIGTERM, CONTRACT S-4),
3 for a bad flag or configuration, 4 otherwise.
"""

import argparse
import os
import sys

from . import bugs, encoder


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        sys.stderr.write("%s: error: %s\n" % (self.prog, message))
        sys.exit(3)


def parser():
    p = _Parser(prog="baton-py-engine", description=__doc__.split("\n")[0] + " (a second, independent implementation "
                "of the baton.encoder.v1 wire profile, in Python)")
    p.add_argument("--role", required=True, choices=("encoder", "pd", "aggregated"),
                   help="encoder (E: publishes), pd (consumes and generates), aggregated (the B-1 baseline)")
    p.add_argument("--listen", default="127.0.0.1:7300", help="host:port to listen on (port 0 picks a free one)")
    p.add_argument("--cache-dir", default="", help="shared directory root (roles encoder and pd); created 0700 if missing")
    p.add_argument("--ready-file", default="", help="write the bound host:port here once listening")
    p.add_argument("--preset", default="py-tiny", choices=sorted(encoder.PRESETS),
                   help="preprocessing preset (every role of one topology must use the same)")
    p.add_argument("--producer-quota-bytes", type=int, default=256 << 20,
                   help="bound on published payload bytes held by the encoder (CONTRACT L-5)")
    p.add_argument("--consumer-quota-bytes", type=int, default=256 << 20,
                   help="bound on receive bytes in flight on the consumer (CONTRACT L-5)")
    p.add_argument("--ttl-ms", type=int, default=60000, help="TTL of a published entry without ttl_ms (CONTRACT X-2)")
    p.add_argument("--drain-timeout-ms", type=int, default=30000, help="drain deadline when Shutdown gives none (S-2)")
    p.add_argument("--test-hooks", action="store_true", help="honour the baton.* test hooks (CONTRACT section 4); never in production")
    p.add_argument("--bug", action="append", default=[], choices=sorted(bugs.BUGS), metavar="NAME",
                   help="seeded bug (see bugs.py): " + ", ".join(sorted(bugs.BUGS)))
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warn", "error"))
    return p


def main(argv=None):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    cfg = parser().parse_args(argv)
    if cfg.producer_quota_bytes < 0 or cfg.consumer_quota_bytes < 0 or cfg.ttl_ms <= 0 or cfg.drain_timeout_ms <= 0:
        sys.stderr.write("baton-py-engine: quotas must be >= 0, --ttl-ms and --drain-timeout-ms > 0\n")
        return 3
    from . import server  # after the flags: imports the generated stubs
    try:
        return server.serve(cfg)
    except (ValueError, OSError, RuntimeError) as e:
        sys.stderr.write("baton-py-engine: %s\n" % e)
        return 3
