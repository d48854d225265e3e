"""Run the Python examples of the documentation, so the docs stay true.

Conventions (in the Markdown source):

- Every fenced ```` ```python ```` block of a page runs, top to bottom, in one namespace
  per page.
- A block preceded by a ``% skip: reason`` line (MyST comment) or a
  ``<!-- skip: reason -->`` line (README) does not run.
- A fenced block preceded by a ``% output`` (or ``<!-- output -->``) line is the exact
  stdout of the Python block before it.
- ``async def test_*`` functions a block defines are run like pytest-trio would, with a
  ``MockClock(autojump_threshold=0)`` for an ``autojump_clock`` parameter.

The Python blocks of every page must also pass ``mypy --strict``: the
runnable ones as their page runs them, and every block (skipped ones too) on its own, as
a reader would copy it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_agent._messages import _registry as _message_registry

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^(`{3,})\s*([\w{}-]*)")
_SKIP = re.compile(r"^(?:%\s*skip\b|<!--\s*skip\b)")
_OUTPUT = re.compile(r"^(?:%\s*output|<!--\s*output\s*-->)\s*$")


@attrs.frozen
class Block:
    """One fenced block of a Markdown page."""

    language: str
    code: str
    line: int
    """1-based line number of the opening fence."""
    marker: str
    """The nearest non-blank line before the fence."""


def parse_blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text``, in order (nested fences are not supported)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    index = 0
    previous = ""
    while index < len(lines):
        line = lines[index]
        match = _FENCE.match(line)
        if match is None:
            if line.strip():
                previous = line.strip()
            index += 1
            continue
        fence, language = match.groups()
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].startswith(fence):
            body.append(lines[end])
            end += 1
        code = "\n".join(body) + "\n" if body else ""
        blocks.append(Block(language=language, code=code, line=index + 1, marker=previous))
        previous = ""
        index = end + 1
    return blocks


@attrs.frozen
class Example:
    code: str
    line: int
    expected_output: str | None


def examples(text: str) -> list[Example]:
    """The runnable Python blocks of a page with their expected output, if any."""
    found: list[Example] = []
    for block in parse_blocks(text):
        if _OUTPUT.match(block.marker):
            assert found, f"line {block.line}: an output block needs a Python block before it"
            assert found[-1].expected_output is None, f"line {block.line}: second output block"
            found[-1] = attrs.evolve(found[-1], expected_output=block.code)
        elif block.language == "python" and not _SKIP.match(block.marker):
            found.append(Example(code=block.code, line=block.line, expected_output=None))
    return found


def _run_test_function(function: Callable[..., Any]) -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    parameters = inspect.signature(function).parameters
    unknown = set(parameters) - {"autojump_clock"}
    assert not unknown, f"{function.__name__}: unsupported fixtures {sorted(unknown)}"
    kwargs = {"autojump_clock": clock} if parameters else {}
    trio.run(functools.partial(function, **kwargs), clock=clock)


def run_page(path: Path) -> int:
    """Run every example of ``path``; return how many ran.

    A page runs as a program of its own would: the application message types its
    examples register are forgotten afterwards (the Chinese edition registers the same
    roles with classes of its own).
    """
    registered = dict(_message_registry)
    try:
        return _run_page(path)
    finally:
        _message_registry.clear()
        _message_registry.update(registered)


def _run_page(path: Path) -> int:
    namespace: dict[str, Any] = {"__name__": f"docs_{path.stem}"}
    found = examples(path.read_text(encoding="utf-8"))
    for example in found:
        before = set(namespace)
        output = io.StringIO()
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
        where = f"{name}:{example.line}"
        with contextlib.redirect_stdout(output):
            # dont_inherit: the code runs as written, not under this module's
            # ``from __future__ import annotations``.
            exec(compile(example.code, where, "exec", dont_inherit=True), namespace)
            for name in sorted(set(namespace) - before):
                value = namespace[name]
                if name.startswith("test_") and inspect.iscoroutinefunction(value):
                    _run_test_function(value)
        if example.expected_output is not None:
            assert output.getvalue() == example.expected_output, f"output of {where}"
    return len(found)


# Every page: README.md and every Markdown page of the documentation, in every language.
_DOCS_PAGES = sorted(
    str(path.relative_to(ROOT))
    for path in (ROOT / "docs").rglob("*.md")
    if "_build" not in path.relative_to(ROOT / "docs").parts
)
# docs/mcp.md shows separate files (tests/test_mcp.py runs them): each block stands alone.
_SEPARATE_FILES = ["docs/mcp.md"]
PAGES = ["README.md", *(page for page in _DOCS_PAGES if page not in _SEPARATE_FILES)]
# The pages with Python examples, which must all run and type-check.
TYPED_PAGES = [
    page
    for page in PAGES
    if any(
        block.language == "python"
        for block in parse_blocks((ROOT / page).read_text(encoding="utf-8"))
    )
]
STANDALONE_PAGES = [*TYPED_PAGES, *_SEPARATE_FILES]


@pytest.mark.parametrize("page", PAGES)
def test_page_examples(page: str) -> None:
    run_page(ROOT / page)  # the pinned counts below make sure the examples are found


def test_the_pages_with_examples() -> None:
    assert {"README.md", "docs/guide.md", "docs/agent.md", "docs/zh/agent.md"} <= set(TYPED_PAGES)


@pytest.mark.parametrize(
    ("page", "runnable", "with_output"),
    [
        ("docs/guide.md", 11, 10),
        ("docs/agent.md", 22, 22),
        ("docs/zh/agent.md", 22, 22),
        ("docs/index.md", 1, 1),
        ("docs/otel.md", 3, 3),
        ("README.md", 1, 1),
    ],
)
def test_pages_have_the_expected_examples(page: str, runnable: int, with_output: int) -> None:
    # A broken marker would silently drop examples or their output checks; pin the counts.
    found = examples((ROOT / page).read_text(encoding="utf-8"))
    assert len(found) == runnable
    assert sum(example.expected_output is not None for example in found) == with_output


def test_parse_blocks_markers() -> None:
    text = (
        "intro\n"
        "```python\nprint('a')\n```\n"
        "% output\n"
        "```text\na\n```\n"
        "% skip: no network\n\n"
        "```python\nimport nothing\n```\n"
        "<!-- skip: needs a key -->\n"
        "```python\nimport nothing_either\n```\n"
        "````python\n```\n````\n"
    )
    assert examples(text) == [
        Example(code="print('a')\n", line=2, expected_output="a\n"),
        Example(code="```\n", line=18, expected_output=None),
    ]


def test_a_wrong_output_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nprint('real')\n```\n% output\n```text\nclaimed\n```\n")
    with pytest.raises(AssertionError, match=r"^output of page\.md:1"):
        run_page(page)


# ---------------------------------------------------------------------------------------
# Type checking


MypyRun = Callable[[list[str]], tuple[str, str, int]]


@pytest.fixture(scope="module")
def mypy_strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MypyRun]:
    """``mypy --strict`` with the project's configuration and a cache shared by the tests
    of this module; returns ``(stdout, stderr, status)``."""
    # Imported here: the type checker is a development tool, not a test requirement.
    run: MypyRun = pytest.importorskip("mypy.api").run
    cache = tmp_path_factory.mktemp("mypy-cache")
    config = ROOT / "pyproject.toml"

    def mypy_strict(arguments: list[str]) -> tuple[str, str, int]:
        common = ["--config-file", str(config), "--strict", "--cache-dir", str(cache)]
        return run([*common, *arguments])

    yield mypy_strict


@pytest.mark.parametrize("page", TYPED_PAGES)
def test_page_examples_type_check(page: str, tmp_path: Path, mypy_strict: MypyRun) -> None:
    found = examples((ROOT / page).read_text(encoding="utf-8"))
    source = tmp_path / f"docs_{Path(page).stem.lower()}.py"
    source.write_text("".join(example.code for example in found), encoding="utf-8")
    # The page's blocks run one after the other in one namespace, and several define their
    # own ``main``: a redefinition is what the reader does, not a mistake.
    result = mypy_strict(["--disable-error-code", "no-redef", str(source)])
    assert result == ("Success: no issues found in 1 source file\n", "", 0)


@pytest.mark.parametrize("page", STANDALONE_PAGES)
def test_every_block_stands_alone(page: str, tmp_path: Path, mypy_strict: MypyRun) -> None:
    # Each block, skipped ones included, must work when copied on its own: its imports
    # complete (mypy reports an undefined name) and its types right.
    blocks = [
        block
        for block in parse_blocks((ROOT / page).read_text(encoding="utf-8"))
        if block.language == "python"
    ]
    sources: list[str] = []
    for block in blocks:
        source = tmp_path / f"{Path(page).stem.lower()}_line{block.line}.py"
        source.write_text(block.code, encoding="utf-8")
        sources.append(str(source))
    result = mypy_strict(sources)
    files = "1 source file" if len(sources) == 1 else f"{len(sources)} source files"
    assert result == (f"Success: no issues found in {files}\n", "", 0)


# ---------------------------------------------------------------------------------------
# The Chinese edition of the Agent chapter


_LABEL = re.compile(r"^\((zh-)?(agent-[\w-]+)\)=$", re.M)


def _python_and_output(page: str) -> list[tuple[str, str | None]]:
    found = examples((ROOT / page).read_text(encoding="utf-8"))
    return [(example.code, example.expected_output) for example in found]


def test_chinese_edition_has_the_same_examples() -> None:
    # Same code, same printed output: the Chinese page runs the English page's examples.
    assert _python_and_output("docs/zh/agent.md") == _python_and_output("docs/agent.md")


def test_chinese_edition_has_every_section() -> None:
    english = [label for prefix, label in _LABEL.findall(_read("docs/agent.md")) if not prefix]
    chinese = [label for prefix, label in _LABEL.findall(_read("docs/zh/agent.md")) if prefix]
    assert len(english) == 16
    assert chinese == english


def _read(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------
# README's two commands and CI


def _readme_commands() -> list[str]:
    setup = _read("README.md").split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [
        block.code.strip()
        for block in parse_blocks(setup)
        if block.language == "sh" and "venv" not in block.code
    ]


def test_readme_has_two_commands() -> None:
    install_and_run, install_and_test = _readme_commands()
    assert install_and_run.endswith('trio-agent run "What is the weather in Paris?"')
    assert install_and_test.endswith("python3 -m pytest")
    assert "\n" not in install_and_run + install_and_test


def test_readme_test_command_installs_the_test_groups() -> None:
    # One short command: the ``test`` extra, which holds everything the ``test`` and
    # ``docs`` dependency groups name, so the docs tests run too.
    import tomllib

    project = tomllib.loads(_read("pyproject.toml"))
    groups = project["dependency-groups"]

    def names(requirements: list[object]) -> set[str]:
        return {
            re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]
            for requirement in requirements
            if isinstance(requirement, str)
        }

    wanted = names(groups["test"]) | names(groups["docs"])
    assert wanted <= names(project["project"]["optional-dependencies"]["test"])
    assert _readme_commands()[1] == 'python3 -m pip install -e ".[test]" && python3 -m pytest'


def test_ci_runs_the_readme_commands() -> None:
    ci = [line.strip() for line in _read(".ci/run").splitlines()]
    commands = [line for line in ci if line and not line.startswith("#")]
    first, second = _readme_commands()
    assert commands.index(first) + 1 == commands.index(second)
    assert commands[-1] == "nox -s lint typecheck"


def test_every_agent_section_has_a_tested_example() -> None:
    # The reading order is a list of files; every other section shows its subject at work.
    sections = re.split(r"^\((agent-[\w-]+)\)=$", _read("docs/agent.md"), flags=re.M)[1:]
    without = [
        label
        for label, body in zip(sections[::2], sections[1::2], strict=True)
        if not examples(body) and label != "agent-reading"
    ]
    assert without == []
