"""Small internal helpers shared by several modules."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import Any, TypeVar

import attrs

T = TypeVar("T")

__all__ = ["fixup_module_metadata", "maybe_await"]


async def maybe_await(value: Awaitable[T] | T) -> T:
    """Return ``value``, awaiting it first when a hook returned an awaitable.

    Every hook of trio_agent may be a plain function or an ``async def``; callers pass the
    hook's return value here.
    """
    if inspect.isawaitable(value):
        return await value
    return value


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
    """Pick the one exception to raise from a nursery's group.

    Policy (used wherever the public API can only fail with one error): a
    ``KeyboardInterrupt`` wins; otherwise the first exception that is not
    ``trio.Cancelled``; otherwise the first ``Cancelled`` (so an enclosing cancel scope
    still catches it). Siblings are cancelled before a group forms, so the others are
    almost always ``Cancelled`` echoes of the first.
    """
    import trio

    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    for exc in leaves:
        if isinstance(exc, KeyboardInterrupt):
            return exc
    for exc in leaves:
        if not isinstance(exc, trio.Cancelled):
            return exc
    return leaves[0]
