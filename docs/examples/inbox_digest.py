"""What the digest compares, and the field that turns every redelivery into a mismatch."""

from datetime import UTC, datetime
from decimal import Decimal

import inboxguard
from inboxguard import digest_of

# --8<-- [start:rules]
# Key order, spacing and number notation never matter: the value decides.
assert digest_of({"a": 1, "b": 2.0}) == digest_of({"b": 2, "a": Decimal("1.00")})
# A bool is not a number and a string is not a number.
assert digest_of({"qty": 1}) != digest_of({"qty": True}) != digest_of({"qty": "1"})

# A field the producer sets anew on every send makes each copy a different
# payload: a redelivery would be quarantined as a mismatch. Leave it out.
first = {"order": 7, "qty": 2, "trace_id": "a1", "sent": "2026-11-30T10:00:00Z"}
again = {"order": 7, "qty": 2, "trace_id": "b2", "sent": "2026-11-30T10:05:00Z"}
assert digest_of(first) != digest_of(again)
assert digest_of(first, exclude=("trace_id", "sent")) == digest_of(
    again, exclude=("trace_id", "sent")
)

# A value without one canonical form is refused, naming where it is.
try:
    digest_of({"items": [{"at": datetime(2026, 11, 30, 10, 0)}]})  # naive: which zone?
except inboxguard.PayloadEncodingError as exc:
    print(exc)  # names payload['items'][0]['at']
assert digest_of({"at": datetime(2026, 11, 30, 10, 0, tzinfo=UTC)})  # aware: accepted
# --8<-- [end:rules]
