"""A framework's settlement table: the settings that decide when a delivery is
acked, requeued, redelivered or dropped, and the values the adapter accepts.

Each adapter declares one :class:`SettlementTable` next to its driver. Its
start-up check and its delivery path read that table, and so do its docs
page (rendered by :meth:`SettlementTable.markdown`) and its guarantee table
(:meth:`SettlementTable.shown`, :meth:`SettlementTable.summary`). A value is
accepted because a row says it is safe, never because no row says it is bad:
a value no row matches is refused with a message naming the safe ones. Imports no framework.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from inboxguard._core.guarantee import Setting as Shown
from inboxguard.errors import ConfigurationError

__all__ = ["Choice", "Setting", "SettlementTable", "equals"]

Verdict = Literal["accepts", "adjusts", "refuses"]
#: What a choice is judged against: the setting's value and the rest of the
#: configuration it depends on (``max_attempts`` for a redelivery cap).
Matcher = Callable[[Any, Mapping[str, Any]], bool]


def equals(*values: object) -> Matcher:
    """A matcher for values equal to one of ``values`` (``True`` is not ``1``)."""

    def match(value: Any, _: Mapping[str, Any]) -> bool:
        return any(type(value) is type(v) and value == v for v in values)

    return match


@dataclass(frozen=True, slots=True)
class Choice:
    """One value (or range of values) of a setting, and what the adapter does with it."""

    #: The value as the docs write it (``True``, ``explicit``, ``> max_attempts``).
    value: str
    verdict: Verdict
    #: What the value does to a delivery, and why the verdict.
    why: str
    matches: Matcher


@dataclass(frozen=True, slots=True)
class Setting:
    """A setting that decides settlement, and its known values."""

    name: str
    #: Where the setting is made (``task option``, ``ConsumerConfig``).
    where: str
    choices: tuple[Choice, ...]
    #: The option that accepts a refused value on purpose, if any.
    opt_in: str | None = None

    def choice(self, value: Any, context: Mapping[str, Any]) -> Choice | None:
        """The first choice matching ``value``, or None (not known to be safe)."""
        return next((c for c in self.choices if c.matches(value, context)), None)

    def safe_values(self) -> str:
        """The accepted values, as the docs write them."""
        return ", ".join(c.value for c in self.choices if c.verdict != "refuses")


@dataclass(frozen=True, slots=True)
class SettlementTable:
    """Every setting of one framework that decides how a delivery is settled."""

    framework: str
    settings: tuple[Setting, ...]

    def setting(self, name: str) -> Setting:
        """The row of ``name``."""
        for setting in self.settings:
            if setting.name == name:
                return setting
        raise KeyError(name)

    def check(
        self,
        values: Mapping[str, Any],
        where: str,
        *,
        context: Mapping[str, Any] | None = None,
        accepted: Mapping[str, bool] | None = None,
    ) -> None:
        """Refuse any value in ``values`` this table does not know to be safe.

        ``values`` maps setting names to their values (a setting absent from
        it is not checked); ``accepted`` maps an opt-in option to whether the
        user set it.

        Raises:
            ConfigurationError: a refused value without its opt-in, or a value
                no row knows; the message names the setting, the safe values
                and the opt-in.
        """
        ctx = context or {}
        for name, value in values.items():
            setting = self.setting(name)
            choice = setting.choice(value, ctx)
            if choice is not None and choice.verdict != "refuses":
                continue
            if choice is not None and setting.opt_in and (accepted or {}).get(setting.opt_in):
                continue
            problem = (
                choice.why
                if choice is not None
                else f"not a value the {self.framework} adapter knows to be safe"
            )
            fix = f"use {setting.safe_values()}"
            if choice is not None and setting.opt_in:
                fix += f", or set {setting.opt_in}=True to accept the loss"
            msg = f"{where}: {name}={value!r}: {problem}; {fix}"
            raise ConfigurationError(msg)

    def refusals(
        self, values: Mapping[str, Any], *, context: Mapping[str, Any] | None = None
    ) -> list[tuple[str, str]]:
        """(setting, why) for each value in ``values`` this table does not
        know to be safe, as a guarantee table lists its contradictions."""
        found = []
        for name, value in values.items():
            setting = self.setting(name)
            choice = setting.choice(value, context or {})
            if choice is None or choice.verdict == "refuses":
                why = choice.why if choice is not None else "not known to be safe"
                shown = _shown(value)
                found.append((name, f"{name}={shown!r}: {why}; use {setting.safe_values()}"))
        return found

    def markdown(self) -> str:
        """The table as a Markdown table (rendered into the adapter's docs page)."""
        lines = [
            "| setting | set on | value | the adapter | why |",
            "|---|---|---|---|---|",
        ]
        for setting in self.settings:
            for choice in setting.choices:
                verdict: str = choice.verdict
                if verdict == "refuses" and setting.opt_in:
                    verdict = f"refuses (unless `{setting.opt_in}=True`)"
                lines.append(
                    f"| `{setting.name}` | {setting.where} | `{choice.value}` | {verdict}"
                    f" | {choice.why} |"
                )
            lines.append(
                f"| `{setting.name}` | {setting.where} | any other value | refuses"
                " | not known to be safe |"
            )
        return "\n".join(lines) + "\n"

    def summary(self) -> str:
        """One line per setting, for the guarantee tables: the safe values."""
        return "; ".join(f"{s.name}: {s.safe_values()}" for s in self.settings)

    def shown(
        self, values: Mapping[str, Any], *, unseen: str = "judged on each delivery"
    ) -> dict[str, Shown]:
        """Every row as a guarantee-table setting: its value in ``values``, or,
        for a row absent from it, ``unseen`` and the values the row accepts."""
        return {
            s.name: _shown(values[s.name])
            if s.name in values
            else f"{unseen}; accepts {s.safe_values()}"
            for s in self.settings
        }


def _shown(value: object) -> Shown:
    """A setting's value as a guarantee table writes it: a scalar as itself,
    an enum member as its value, a callable as its dotted name."""
    value = getattr(value, "value", value) if not callable(value) else value
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if callable(value):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', value)}"
    return repr(value)
