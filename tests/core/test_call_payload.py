"""One call, one payload: arguments bound to the signature before digesting."""

from __future__ import annotations

from typing import Any

from inboxguard import digest_of
from inboxguard._core.extract import payload_of


def charge(session: object, invoice_id: str, amount: int, currency: str = "EUR") -> None:
    """A handler with a default."""


def test_positional_keyword_and_explicit_default_are_one_payload() -> None:
    """Every named parameter lands in kwargs under its name; a default, filled in
    or written out, is left out."""
    forms = [
        payload_of(("inv-9", 100), {}, charge, skip=1),
        payload_of((), {"invoice_id": "inv-9", "amount": 100}, charge, skip=1),
        payload_of(("inv-9",), {"amount": 100, "currency": "EUR"}, charge, skip=1),
    ]
    expected = {"args": [], "kwargs": {"invoice_id": "inv-9", "amount": 100}}
    assert forms == [expected] * 3
    assert len({digest_of(p) for p in forms}) == 1
    usd = payload_of(("inv-9", 100, "USD"), {}, charge, skip=1)
    assert usd == {"args": [], "kwargs": {"invoice_id": "inv-9", "amount": 100, "currency": "USD"}}


def varargs(a: int, /, b: int, *rest: int, c: int = 3, **extra: Any) -> None:
    """Positional-only, *args and **kwargs."""


def test_star_args_stay_positional_and_star_kwargs_join_the_names() -> None:
    """Positional-only values and *args extras go to args in order; **kwargs
    extras join the named parameters."""
    payload = payload_of((1, 2, 4, 5), {"d": 6}, varargs)
    assert payload == {"args": [1, 4, 5], "kwargs": {"b": 2, "d": 6}}
    assert payload == payload_of((1,), {"b": 2, "c": 3, "d": 6}, varargs) | {"args": [1, 4, 5]}
    assert digest_of(payload_of((1, 2), {"z": 1}, varargs)) == digest_of(
        payload_of((1,), {"z": 1, "b": 2}, varargs)
    )


def test_arguments_that_do_not_fit_are_digested_as_passed() -> None:
    """The call will fail on its own; its payload is the arguments as given."""
    payload = payload_of(("a",), {"nope": 1}, charge, skip=1)
    assert payload == {"args": ["a"], "kwargs": {"nope": 1}}


def test_without_a_function_the_payload_is_as_passed() -> None:
    """payload_of(args, kwargs) keeps its earlier shape."""
    assert payload_of((1,), {"k": 2}) == {"args": [1], "kwargs": {"k": 2}}


def test_the_plain_binding_agrees_with_signature_bind(monkeypatch: Any) -> None:
    """A signature of positional-or-keyword parameters only is bound without
    ``Signature.bind``: the payload and the command ID (or the error) are
    those of the general path, for every fit and misfit of a call."""
    import itertools

    from inboxguard._core import extract

    def fields(a: int, b: int, c: float = 3, d: object = None) -> None: ...

    calls = [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3.0), (1, 2, 3, 4), (1, 2, 3, 4, 5)]
    kwargs_s: list[dict[str, Any]] = [
        {}, {"a": 1}, {"b": 2}, {"c": 3}, {"d": None}, {"e": 1}, {"b": 2, "c": 4.0},
    ]  # fmt: skip

    def outcome(getter: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        try:
            return getter(args, kwargs)
        except TypeError as error:
            return ("TypeError", str(error))

    fast = {
        "payload": [payload_of(a, k, fields) for a, k in itertools.product(calls, kwargs_s)],
        "ids": {s: extract.command_id_getter(s, fields) for s in "abcd"},
    }
    monkeypatch.setattr(extract, "_plain_of", lambda fn, skip: None)
    monkeypatch.setattr(extract, "_plain_parameters", lambda signature: None)
    general = [payload_of(a, k, fields) for a, k in itertools.product(calls, kwargs_s)]
    assert fast["payload"] == general
    for spec, getter in fast["ids"].items():
        slow = extract.command_id_getter(spec, fields)
        for args, kwargs in itertools.product(calls, kwargs_s):
            assert outcome(getter, args, kwargs) == outcome(slow, args, kwargs), spec
