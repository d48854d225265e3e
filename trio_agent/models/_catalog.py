"""The built-in model catalog (``catalog.json``, shipped as package data).

The catalog lists well-known models of OpenAI, Anthropic, OpenRouter, Groq and DeepSeek
with their wire API, base URL, context window, output limit and prices. Prices are USD
per million tokens and **indicative only**: they were right when the catalog was written
and drift as providers change their price lists. Register a :class:`~trio_agent.Model`
with :meth:`~trio_agent.models.Models.register_model` to correct or add one.

File format: ``{"providers": {<provider>: {"api", "baseUrl", "models": [...]}}}``; each
model has ``id``, ``name``, ``reasoning``, ``input``, ``cost`` (``input``, ``output``,
``cacheRead``, ``cacheWrite``), ``contextWindow``, ``maxTokens`` and optionally ``api``,
``baseUrl``, ``headers``, ``compat`` and ``thinkingLevelMap`` overriding the provider's.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from .._messages import Model, ModelCost

__all__ = ["load_catalog"]


def _model_from_json(provider: str, defaults: dict[str, Any], raw: dict[str, Any]) -> Model:
    cost = raw.get("cost", {})
    return Model(
        id=raw["id"],
        name=raw.get("name", raw["id"]),
        api=raw.get("api", defaults["api"]),
        provider=provider,
        base_url=raw.get("baseUrl", defaults["baseUrl"]),
        reasoning=bool(raw.get("reasoning", False)),
        input=list(raw.get("input", ["text"])),
        cost=ModelCost(
            input=float(cost.get("input", 0)),
            output=float(cost.get("output", 0)),
            cache_read=float(cost.get("cacheRead", 0)),
            cache_write=float(cost.get("cacheWrite", 0)),
        ),
        context_window=int(raw.get("contextWindow", 0)),
        max_tokens=int(raw.get("maxTokens", 0)),
        headers=raw.get("headers"),
        compat=raw.get("compat"),
        thinking_level_map=raw.get("thinkingLevelMap"),
    )


@functools.cache
def _load() -> dict[tuple[str, str], Model]:
    text = resources.files(__package__).joinpath("catalog.json").read_text(encoding="utf-8")
    data = json.loads(text)
    catalog: dict[tuple[str, str], Model] = {}
    for provider, entry in data["providers"].items():
        defaults = {"api": entry["api"], "baseUrl": entry["baseUrl"]}
        for raw in entry["models"]:
            model = _model_from_json(provider, defaults, raw)
            catalog[(provider, model.id)] = model
    return catalog


def load_catalog() -> dict[tuple[str, str], Model]:
    """The catalog as ``{(provider, model_id): Model}``, in file order.

    Read once per process; each call returns a new dict of the same (frozen) models.
    """
    return dict(_load())
