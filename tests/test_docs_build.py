"""Build the documentation and check that the API reference describes every public name.

Needs the ``docs`` dependency group (Sphinx, MyST, furo); skipped without it. The build
runs as ``nox -s docs`` runs it, with warnings as errors.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
import types
from pathlib import Path

import attrs
import pytest

import trio_agent
import trio_agent.compaction
import trio_agent.loop
import trio_agent.models
import trio_agent.serialization
import trio_agent.sessions
import trio_agent.testing
import trio_agent.web

ROOT = Path(__file__).resolve().parents[1]
MODULES: list[types.ModuleType] = [
    trio_agent,
    trio_agent.compaction,
    trio_agent.loop,
    trio_agent.models,
    trio_agent.serialization,
    trio_agent.sessions,
    trio_agent.testing,
    trio_agent.web,
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built HTML site."""
    for module in ("sphinx", "myst_parser", "furo"):
        pytest.importorskip(module)
    out = tmp_path_factory.mktemp("html")
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(ROOT / "docs"), str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    return out


@pytest.fixture(scope="module")
def api_html(site: Path) -> str:
    return (site / "api.html").read_text(encoding="utf-8")


_TAG = re.compile(r"<[^>]+>")


def _text(fragment: str) -> str:
    return " ".join(html.unescape(_TAG.sub(" ", fragment)).split())


def descriptions(page: str) -> dict[str, str]:
    """Rendered object id -> its own description text (members of a class excluded)."""
    found: dict[str, str] = {}
    for match in re.finditer(r'<dt class="sig sig-object py" id="([^"]+)">', page):
        body_start = page.index("<dd>", match.end()) + len("<dd>")
        ends = [page.find(tag, body_start) for tag in ("<dl", "</dd>")]
        body = page[body_start : min(end for end in ends if end != -1)]
        found[match.group(1)] = re.sub(r"^Bases: \S+", "", _text(body)).strip()
    return found


def _public_names() -> list[tuple[str, object]]:
    names: list[tuple[str, object]] = []
    for module in MODULES:
        for name in sorted(vars(module)):
            value = getattr(module, name)
            if name.startswith("_") or isinstance(value, types.ModuleType):
                continue
            if name in ("annotations",):  # ``from __future__ import annotations``
                continue
            names.append((f"{module.__name__}.{name}", value))
    return names


def test_the_reference_has_no_attrs_sentinels(api_html: str) -> None:
    assert "NOTHING" not in _text(api_html)
    assert "TypeAliasForwardRef" not in _text(api_html)


def test_every_public_name_is_described(api_html: str) -> None:
    rendered = descriptions(api_html)
    missing = []
    for name, value in _public_names():
        home = getattr(value, "__module__", None)
        candidates = {name}
        if isinstance(home, str) and home.startswith("trio_agent"):
            candidates.add(f"{home}.{name.rpartition('.')[2]}")
        if not any(rendered.get(candidate) for candidate in candidates):
            missing.append(name)
    assert missing == []


def test_every_attrs_field_is_described(api_html: str) -> None:
    rendered = descriptions(api_html)
    missing = []
    for _name, value in _public_names():
        if not (isinstance(value, type) and attrs.has(value)):
            continue
        owner = f"{value.__module__}.{value.__name__}"
        for field in attrs.fields(value):
            if field.name.startswith("_") or field.name == "type":
                # ``type`` discriminators are rendered without a target (dozens of classes
                # have one); conf.py always gives them a description.
                continue
            if not rendered.get(f"{owner}.{field.name}"):
                missing.append(f"{owner}.{field.name}")
    assert sorted(missing) == []


@pytest.mark.parametrize(
    ("page", "label", "count"),
    [("guide.html", "Output", 10), ("agent.html", "Output", 22), ("zh/agent.html", "输出", 22)],
)
def test_output_blocks_are_labelled(site: Path, page: str, label: str, count: int) -> None:
    text = (site / page).read_text(encoding="utf-8")
    captions = re.findall(
        r'<div class="code-block-caption"><span class="caption-text">([^<]*)<', text
    )
    assert captions == [label] * count
