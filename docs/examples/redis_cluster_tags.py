"""On Redis Cluster, the keys one command writes share a hash slot.

Name your keys with a hash tag (the part in braces) and put the same tag in
the command ID: the inbox's own keys of that command are then tagged alike,
and the claim and your writes can commit in one EXEC. The tag is part of the
command ID, so the command's identity stays the consumer and the ID. With ``cluster=True`` (the
default when the client is a RedisCluster) a key in another slot is refused
before EXEC, naming the key. Run: python docs/examples/redis_cluster_tags.py
(on a single server too: the check is computed client-side).
"""

# needs: redis

from __future__ import annotations

import datetime as dt
import os
import uuid

import redis

from inboxguard import ConfigurationError, RedisInbox

URL = os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")


def main() -> None:
    """Commit tagged keys, then see an untagged one refused."""
    client = redis.Redis.from_url(URL)
    try:
        client.ping()
    except redis.ConnectionError:
        print(f"no Redis at {URL}; nothing to show")
        return
    prefix = f"example-{uuid.uuid4().hex[:8]}:"
    inbox = RedisInbox(client, retention=dt.timedelta(days=7), key_prefix=prefix, cluster=True)
    account = "acct-42"
    try:
        with client.pipeline() as pipe:
            with inbox.guard(
                pipe, consumer="ledger", command_id=f"{{{account}}}:t-1", payload={"n": 5}
            ):
                pipe.incrby(f"{prefix}balance:{{{account}}}", 5)
                pipe.rpush(f"{prefix}history:{{{account}}}", "t-1")
        try:
            with client.pipeline() as pipe:
                with inbox.guard(
                    pipe, consumer="ledger", command_id=f"{{{account}}}:t-2", payload={}
                ):
                    pipe.incrby(f"{prefix}balance:{{acct-7}}", 1)  # another slot
        except ConfigurationError as error:
            print("refused before EXEC:", str(error)[:100], "...")
        assert client.get(f"{prefix}balance:{{acct-7}}") is None
        assert inbox.lookup("ledger", f"{{{account}}}:t-1") is not None
    finally:
        inbox.drop_keys()
        client.close()


if __name__ == "__main__":
    main()
