"""The Redis inbox against a bare Redis transaction and AWS Powertools' Redis
idempotency, around the same mutation (INCRBY + RPUSH in one MULTI/EXEC);
then the same crash-after-apply scenario against both.

Throughput: in each round the three variants run ``BENCH_REDIS_OPS`` fresh
commands each, in a rotated order (``benchmarks._harness``); the figure is the
median of the per-round ratios (variant / bare), with the range. Crash: a child process applies a
command and is killed with SIGKILL before it acknowledges; the command is
then delivered again (after Powertools' record TTL has passed, 2 s here) and
the table says how many times the mutation was applied.

    python -m benchmarks redis

Needs Redis on ``INBOXGUARD_REDIS_URL`` and the ``bench`` extra
(``pip install -e '.[bench]'``: aws-lambda-powertools[redis]).
Environment: ``BENCH_ROUNDS`` (default 7), ``BENCH_REDIS_OPS`` (1000). The
section of docs/benchmarks.md is written by a run of 5 rounds or more.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from benchmarks._harness import Load, Target, median, ratio, record, rounds, run_rounds
from benchmarks._report import table, write_section
from inboxguard import RedisInbox

URL = os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")
OPS = int(os.environ.get("BENCH_REDIS_OPS", "1000"))
ROOT = Path(__file__).resolve().parents[1]
TTL_SECONDS = 2  # Powertools' record TTL in the crash scenario (its default is 3600)
#: RedisInbox's time a command / Powertools', at most (issue 37; the moonshot 0.8):
#: Powertools adds two round trips to the bare transaction, the guard one (RD17).
POWERTOOLS_BOUND = 1.00

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


VARIANTS = ("bare", "guarded", "powertools")


def throughput(client: Any, prefix: str, n_rounds: int) -> list[dict[str, float]]:
    """Microseconds per command of each variant, per round (variants rotated)."""
    runs = variants(client, prefix)

    def timed(name: str, tag: str) -> float:
        ids = [f"{name}-{tag}-{i}-{uuid.uuid4().hex[:6]}" for i in range(OPS)]
        started = time.perf_counter()
        for cid in ids:
            runs[name](cid)
        return (time.perf_counter() - started) / OPS * 1e6

    for name in VARIANTS:  # a warm-up pass of each, not timed
        timed(name, "warm")
    return run_rounds(
        VARIANTS, lambda order, i: {name: timed(name, f"r{i}") for name in order}, n_rounds
    )


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


def report(per_round: list[dict[str, float]], crashes: dict[str, int]) -> str:
    """The section's text for one run."""
    guarded = ratio(per_round, "guarded", "bare")
    powertools = ratio(per_round, "powertools", "bare")
    versus = ratio(per_round, "guarded", "powertools")
    rows = [
        ["bare MULTI/EXEC", f"{median(per_round, 'bare'):.0f}", "1.00", "-"],
        ["RedisInbox guard", f"{median(per_round, 'guarded'):.0f}", str(guarded), str(versus)],
        [
            "Powertools Redis idempotency",
            f"{median(per_round, 'powertools'):.0f}",
            str(powertools),
            "1.00",
        ],
    ]
    crash = [
        ["RedisInbox guard", crashes["guarded"]],
        [f"Powertools Redis (record TTL {TTL_SECONDS} s passed)", crashes["powertools"]],
    ]
    faster = (
        "faster than" if versus.median < 1 else "slower than" if versus.median > 1 else "level with"
    )
    return (
        f"{OPS:,} fresh commands per variant per round after an untimed warm-up pass, the"
        " variants in a rotated order each round; each ratio is taken within a round,"
        " median (min-max) shown, and the times per command are medians over the rounds."
        " Every variant does `INCRBY` plus `RPUSH` in one `MULTI`/`EXEC` on the local"
        " Redis: bare, inside `RedisInbox.guard`, and inside AWS Powertools'"
        " `idempotent_function` with its Redis persistence layer (a `SET NX` of an"
        " in-progress record before the function and a `SET` of the completed record"
        f" after it). Target: the guard's time <= {POWERTOOLS_BOUND:.2f}x Powertools'."
        " Powertools adds two round trips to the bare transaction (its two records); the"
        " guard adds one, its `WATCH` and lease script written together (RD17)."
        f" In this run the guard is {faster}"
        f" Powertools (guard / Powertools time {versus}:"
        f" {'met' if versus.median <= POWERTOOLS_BOUND else 'missed'}).\n\n"
        + table(["variant", "median us/command", "time / bare", "time / Powertools"], rows)
        + "\n\nThen the same crash once against each: a child process applies a command"
        " and is killed with SIGKILL before it acknowledges; the command is delivered"
        " again after Powertools' record TTL has passed (a count of applications, not a"
        " timing, so played once):\n\n"
        + table(["crash after apply, before the ack, then redelivery", "times applied"], crash)
    )


def main() -> None:
    n_rounds = rounds(default=7)
    load = Load()
    began = time.monotonic()
    client = redis.Redis.from_url(URL)
    prefix = f"bench{uuid.uuid4().hex[:8]}:"
    try:
        per_round = throughput(client, prefix, n_rounds)
        _cleanup(client, prefix)
        crashes = {v: crash_after_apply(client, prefix, v) for v in ("guarded", "powertools")}
    finally:
        _cleanup(client, prefix)
    load.stop()
    target = Target(
        "redis",
        "RedisInbox guard / Powertools on Redis, time a command",
        POWERTOOLS_BOUND,
        "lower",
        ratio(per_round, "guarded", "powertools"),
    )
    record("redis", [target], load, n_rounds, command="python -m benchmarks redis")
    write_section(
        "redis",
        "Redis inbox beside AWS Powertools (`benchmarks/bench_redis.py`)",
        report(per_round, crashes),
        load=load,
        rounds=n_rounds,
        command="python -m benchmarks redis",
    )
    print(f"elapsed {time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--crash-child"]:
        crash_child(sys.argv[2], sys.argv[3])
    else:
        main()
