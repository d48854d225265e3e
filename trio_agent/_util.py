"""Small internal helpers shared by several modules."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import Any, TypeVar

import attrs

T = TypeVar("T")

__all__ = [
    "collapse_errors",
    "error_text",
    "collapse_exception_group",
    "exception_leaves",
    "fixup_module_metadata",
    "maybe_await",
]


async def maybe_await(value: Awaitable[T] | T) -> T:
    """Return ``value``, awaiting it first when a hook returned an awaitable.

    Every hook of trio_agent may be a plain function or an ``async def``; callers pass the
    hook's return value here.
    """
    if inspect.isawaitable(value):
        return await value
    return value


def error_text(exc: BaseException) -> str:
    """The text of ``exc`` as the model or a user reads it: its message, else its type's
    name."""
    return str(exc) or type(exc).__name__


def fixup_module_metadata(module_name: str, namespace: dict[str, Any]) -> None:
    """Make public names re-exported from private modules report ``module_name``.

    Mirrors trio's helper of the same name: reprs and docs say ``trio_agent.Agent`` rather
    than ``trio_agent._agent.Agent``.
    """
    seen: set[int] = set()

    def fix_one(qualname: str, name: str, obj: Any) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        mod = getattr(obj, "__module__", None)
        if mod is not None and mod.startswith("trio_agent."):
            if isinstance(obj, type) and attrs.has(obj):
                # Resolve string annotations while the defining module is still named,
                # so cattrs and typing never look them up in the public namespace.
                attrs.resolve_types(obj)
            try:
                obj.__module__ = module_name
            except (AttributeError, TypeError):
                return
            if isinstance(obj, type):
                obj.__name__ = name
                obj.__qualname__ = qualname
                for attr_name, attr_value in obj.__dict__.items():
                    fix_one(f"{qualname}.{attr_name}", attr_name, attr_value)

    for objname, obj in namespace.items():
        if not objname.startswith("_"):
            fix_one(objname, objname, obj)


def collapse_exception_group(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception to raise for a nursery's group, by trio's policy.

    Policy (the one place it is written down): a ``BaseException`` that is not an
    ``Exception`` comes first (``KeyboardInterrupt`` or ``SystemExit`` before any other),
    as itself, with the other errors chained at the end of its ``__context__`` chain;
    otherwise ``Cancelled`` echoes are dropped when a real error is there, a single real
    error is raised as itself, and several real errors are kept together in a group (never
    "the first one wins"); a group of ``Cancelled`` only becomes one ``Cancelled`` so the
    enclosing cancel scope still catches it.

    Raise the result after the ``except`` clause that caught the group, as trio does:
    raising it inside would replace its own ``__context__`` with the group, and
    ``raise ... from None`` would hide its cause and context.
    """
    return collapse_errors(exception_leaves(group))


def collapse_errors(errors: list[BaseException]) -> BaseException:
    """:func:`collapse_exception_group` for a plain list of (non-empty) errors."""
    import trio

    leaves = [leaf for error in errors for leaf in exception_leaves(error)]
    real = [exc for exc in leaves if not isinstance(exc, trio.Cancelled)]
    if not real:
        return leaves[0]
    first = _first_interrupt(real)
    if first is None:
        return _group(real)
    others = [other for other in real if other is not first]
    if others:
        _chain_at_end(first, _group(others))
    return first


def _first_interrupt(errors: list[BaseException]) -> BaseException | None:
    """``KeyboardInterrupt`` or ``SystemExit`` first, else any other non-``Exception``."""
    bases = [exc for exc in errors if not isinstance(exc, Exception)]
    for exc in bases:
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            return exc
    return bases[0] if bases else None


def _chain_at_end(exc: BaseException, context: BaseException) -> None:
    """Chain ``context`` after the last link of ``exc``'s ``__context__`` chain."""
    seen = {id(exc)}
    last = exc
    while last.__context__ is not None:
        if id(last.__context__) in seen or last.__context__ is context:
            return  # a cycle, or already chained
        seen.add(id(last.__context__))
        last = last.__context__
    if id(context) not in seen:
        last.__context__ = context


def exception_leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, its nested groups flattened (``[exc]`` if no group)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in exception_leaves(inner)]
    return [exc]


def _group(errors: list[BaseException]) -> BaseException:
    if len(errors) == 1:
        return errors[0]
    if all(isinstance(exc, Exception) for exc in errors):
        return ExceptionGroup("several errors", errors)  # type: ignore[type-var]  # checked
    return BaseExceptionGroup("several errors", errors)
