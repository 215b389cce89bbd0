"""The Redis inbox against a bare Redis transaction and AWS Powertools' Redis
idempotency, around the same mutation (INCRBY + RPUSH in one MULTI/EXEC);
then the same crash-after-apply scenario against both.

Throughput: in each round the three variants run ``BENCH_REDIS_OPS`` fresh
commands each, in a rotated order; the figure is the median of the per-round
ratios (variant / bare), with the range. Crash: a child process applies a
command and is killed with SIGKILL before it acknowledges; the command is
then delivered again (after Powertools' record TTL has passed, 2 s here) and
the table says how many times the mutation was applied.

    python benchmarks/bench_redis.py            # or: python -m benchmarks redis

Needs Redis on ``INBOXGUARD_REDIS_URL`` and the ``bench`` extra
(``pip install -e '.[bench]'``: aws-lambda-powertools[redis]).
Environment: ``BENCH_REDIS_ROUNDS`` (default 7), ``BENCH_REDIS_OPS`` (500).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from inboxguard import RedisInbox

URL = os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")
ROUNDS = int(os.environ.get("BENCH_REDIS_ROUNDS", "7"))
OPS = int(os.environ.get("BENCH_REDIS_OPS", "500"))
ROOT = Path(__file__).resolve().parents[1]
TTL_SECONDS = 2  # Powertools' record TTL in the crash scenario (its default is 3600)

# Outside Lambda, Powertools warns on every call that it has no Lambda context.
warnings.filterwarnings("ignore", message="Couldn't determine the remaining time left")


def mutate(pipe: Any, prefix: str, cid: str) -> None:
    """The consumer's mutation: add to a counter and record the command."""
    pipe.incrby(f"{prefix}total", 1)
    pipe.rpush(f"{prefix}applied", cid)


def variants(client: Any, prefix: str) -> dict[str, Callable[[str], None]]:
    """bare, guarded (RedisInbox) and powertools, each running one command."""
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
    from aws_lambda_powertools.utilities.idempotency.persistence.cache import (
        CachePersistenceLayer,
    )

    inbox = RedisInbox(client, retention=dt.timedelta(days=1), key_prefix=f"{prefix}ig:")
    layer = CachePersistenceLayer(client=client)
    config = IdempotencyConfig(expires_after_seconds=TTL_SECONDS)

    def bare(cid: str) -> None:
        with client.pipeline() as pipe:
            mutate(pipe, prefix + "b:", cid)
            pipe.execute()

    def guarded(cid: str) -> None:
        with client.pipeline() as pipe:
            with inbox.guard(pipe, consumer="bench", command_id=cid, payload={"cid": cid}) as e:
                if not e.duplicate:
                    mutate(pipe, prefix + "g:", cid)

    @idempotent_function(
        data_keyword_argument="command",
        persistence_store=layer,
        config=config,
        key_prefix=f"{prefix}pt",
    )
    def powertools_handler(command: dict[str, str]) -> dict[str, str]:
        with client.pipeline() as pipe:
            mutate(pipe, prefix + "p:", command["cid"])
            pipe.execute()
        return {"ok": command["cid"]}

    def powertools(cid: str) -> None:
        powertools_handler(command={"cid": cid})

    return {"bare": bare, "guarded": guarded, "powertools": powertools}


def throughput(client: Any, prefix: str) -> dict[str, Any]:
    """Per-op microseconds per variant and round, and the per-round ratios."""
    runs = variants(client, prefix)
    names = list(runs)
    per_op: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(ROUNDS + 1):  # round 0 warms up and is dropped
        order = names[round_ % 3 :] + names[: round_ % 3]
        for name in order:
            ids = [f"{name}-{round_}-{i}-{uuid.uuid4().hex[:6]}" for i in range(OPS)]
            started = time.perf_counter()
            for cid in ids:
                runs[name](cid)
            if round_:
                per_op[name].append((time.perf_counter() - started) / OPS * 1e6)
    ratios = {
        name: [v / b for v, b in zip(per_op[name], per_op["bare"], strict=True)]
        for name in ("guarded", "powertools")
    }
    return {"per_op": per_op, "ratios": ratios}


def crash_child(variant: str, prefix: str) -> None:
    """Apply command ``crash-1`` with ``variant``, print ``applied``, then hang
    (the parent kills this process before it could acknowledge)."""
    client = redis.Redis.from_url(URL)
    variants(client, prefix)[variant]("crash-1")
    print("applied", flush=True)
    time.sleep(600)


def crash_after_apply(client: Any, prefix: str, variant: str) -> int:
    """Run the crash scenario for ``variant``; return how often the mutation applied."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, __file__, "--crash-child", variant, prefix],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "applied":
        msg = f"the {variant} child did not apply the command"
        raise RuntimeError(msg)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    time.sleep(TTL_SECONDS + 0.5)  # the broker redelivers later; Powertools' TTL has passed
    run = variants(client, prefix)[variant]
    try:
        run("crash-1")
    except Exception as error:  # Powertools refuses an in-progress record
        print(f"  {variant}: redelivery raised {type(error).__name__}")
    letter = {"guarded": "g", "powertools": "p"}[variant]
    return int(client.llen(f"{prefix}{letter}:applied"))


def _cleanup(client: Any, prefix: str) -> None:
    keys = list(client.scan_iter(match=prefix + "*", count=1000))
    for start in range(0, len(keys), 500):
        client.delete(*keys[start : start + 500])


def report(result: dict[str, Any], crashes: dict[str, int]) -> str:
    """The markdown table of one run."""
    med = {name: statistics.median(v) for name, v in result["per_op"].items()}
    lines = [
        f"{ROUNDS} rounds x {OPS} commands per variant, variants interleaved (rotated order).",
        "",
        "| variant | median us/command | ratio to bare (median of rounds) | range |",
        "|---|---|---|---|",
        f"| bare MULTI/EXEC | {med['bare']:.0f} | 1.00 | - |",
    ]
    for name, label in (("guarded", "RedisInbox guard"), ("powertools", "Powertools Redis")):
        ratios = result["ratios"][name]
        lines.append(
            f"| {label} | {med[name]:.0f} | {statistics.median(ratios):.2f}"
            f" | {min(ratios):.2f}-{max(ratios):.2f} |"
        )
    lines += [
        "",
        "| crash after apply, before the ack (SIGKILL), then redelivery | times applied |",
        "|---|---|",
        f"| RedisInbox guard | {crashes['guarded']} |",
        f"| Powertools Redis (record TTL {TTL_SECONDS} s passed) | {crashes['powertools']} |",
    ]
    return "\n".join(lines)


def main() -> None:
    client = redis.Redis.from_url(URL)
    prefix = f"bench{uuid.uuid4().hex[:8]}:"
    try:
        result = throughput(client, prefix)
        _cleanup(client, prefix)
        crashes = {v: crash_after_apply(client, prefix, v) for v in ("guarded", "powertools")}
    finally:
        _cleanup(client, prefix)
    print(report(result, crashes))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--crash-child"]:
        crash_child(sys.argv[2], sys.argv[3])
    else:
        main()
