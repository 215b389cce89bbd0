"""One worker process executing one effect, run by test_processes.py.

Usage: python effect_worker.py --url URL --prefix P --key K [options]

The ledger and the sandbox gateway share a clock read from --clock-file (real
time while it is missing). --go-file makes the worker wait for a start signal;
--hold-file stalls it right after the gateway applied the charge, until the
file exists; --kill-after-apply makes it die there (os._exit) instead.
--retry-for retries retryable errors (as a broker would redeliver) for that
many seconds, writing "busy" to --status-file after the first one. Prints one
JSON line: {"result": reference} or {"error": class name}.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
from pathlib import Path

from sqlalchemy import create_engine

from inboxguard import EffectLedger, InboxGuardError, is_retryable
from integrations.ledger.gateway import FileClock, SandboxGateway


def wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} never appeared")
        time.sleep(0.02)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--clock-file", required=True)
    p.add_argument("--lookup", action="store_true")
    p.add_argument("--window-seconds", type=float, default=86400)
    p.add_argument("--lease-seconds", type=float, default=30)
    p.add_argument("--go-file")
    p.add_argument("--hold-file")
    p.add_argument("--kill-after-apply", action="store_true")
    p.add_argument("--status-file")
    p.add_argument("--retry-for", type=float, default=0)
    args = p.parse_args()

    engine = create_engine(args.url)
    clock = FileClock(args.clock_file)
    ledger = EffectLedger(engine, table_prefix=args.prefix, clock=clock)
    gateway = SandboxGateway(
        engine,
        table_prefix=args.prefix,
        window=dt.timedelta(seconds=args.window_seconds),
        supports_lookup=args.lookup,
        clock=clock,
    )

    def after_apply(key: str) -> None:
        if args.kill_after_apply:
            os._exit(137)
        if args.hold_file:
            wait_for(Path(args.hold_file))

    gateway.after_apply = after_apply
    if args.go_file:
        wait_for(Path(args.go_file))
    lease = dt.timedelta(seconds=args.lease_seconds)
    deadline = time.monotonic() + args.retry_for
    reported = False
    while True:
        try:
            receipt = ledger.execute(args.key, gateway, {"amount": 1500}, lease=lease)
        except InboxGuardError as error:
            if not is_retryable(error) or time.monotonic() > deadline:
                print(json.dumps({"error": type(error).__name__}), flush=True)
                return
            if args.status_file and not reported:
                Path(args.status_file).write_text("busy")
                reported = True
            gateway.after_apply = None  # a redelivery is an ordinary attempt
            time.sleep(0.05)  # the broker's redelivery delay
            continue
        print(json.dumps({"result": receipt.reference}), flush=True)
        return


if __name__ == "__main__":
    main()
