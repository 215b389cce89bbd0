"""Every public name of the adapters stays importable from where users import it."""

from __future__ import annotations

import importlib

import pytest

from inboxguard._core import headers

#: The adapters' public names before the re-housing (one module per framework).
PUBLIC = {
    "inboxguard.adapters.celery": [
        "REPLAY_WINDOWS_SETTING",
        "SENT_AT_HEADER",
        "InboxTask",
        "ReplayWindows",
        "check_alignment",
        "inbox_task",
        "install_receivers",
        "replay_windows",
        "stamp_sent_at",
    ],
    "inboxguard.adapters.dramatiq": ["InboxMiddleware"],
    "inboxguard.adapters.kombu": [
        "ATTEMPT_HEADER",
        "DEFAULT_MAX_ATTEMPTS",
        "DEFAULT_RETRY_DELAY",
        "RETRY_AT_HEADER",
        "SENT_AT_HEADER",
        "guarded",
    ],
    "inboxguard.adapters.aio_pika": [
        "ATTEMPT_HEADER",
        "DEFAULT_MAX_ATTEMPTS",
        "DEFAULT_RETRY_DELAY",
        "RETRY_AT_HEADER",
        "SENT_AT_HEADER",
        "guarded",
    ],
    "inboxguard.adapters.celery.transport": ["CeleryTransport"],
    "inboxguard.adapters.dramatiq.transport": ["DramatiqTransport"],
    "inboxguard.adapters.kombu.transport": ["KombuTransport"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names_are_importable_and_exported(module: str) -> None:
    loaded = importlib.import_module(module)
    for name in PUBLIC[module]:
        assert getattr(loaded, name) is not None
        assert name in loaded.__all__


def test_every_adapter_names_its_headers_from_the_one_vocabulary() -> None:
    celery = importlib.import_module("inboxguard.adapters.celery")
    for module in ("inboxguard.adapters.kombu", "inboxguard.adapters.aio_pika"):
        loaded = importlib.import_module(module)
        assert loaded.SENT_AT_HEADER == celery.SENT_AT_HEADER == headers.SENT_AT
        assert loaded.ATTEMPT_HEADER == headers.ATTEMPT
        assert loaded.RETRY_AT_HEADER == headers.RETRY_AT
