"""The docs stand alone and stay true: links, anchors, repository paths and the module map.

Every relative link and #anchor in README.md and docs/*.md resolves; every repository path
in backticks exists; docs/DESIGN.md's module map names every module, and says why for one
over 500 lines.

Anchors follow GitHub's rule for heading ids (lower case, punctuation dropped, spaces to
hyphens, ``-1``, ``-2`` for repeats), so a renamed heading or a moved page fails here
instead of leaving a dead link.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"`+[^`]*`+")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def github_slug(heading: str) -> str:
    """GitHub's id for a heading: markup and punctuation dropped, spaces become hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def links(path: Path) -> list[str]:
    found = []
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        # Code spans hold example syntax, not links; keep a link whose text is a code span.
        line = INLINE_CODE.sub("code", line)
        found.extend(LINK.findall(line))
    return found


def test_slug_follows_github() -> None:
    assert github_slug("Migrating a legacy checkpoint: `checkpoints`, `migrate`, `sidecars verify`") == (
        "migrating-a-legacy-checkpoint-checkpoints-migrate-sidecars-verify"
    )
    assert github_slug("The receipt `migration_receipt.json`") == "the-receipt-migration_receiptjson"
    assert github_slug("5. Streaming dataset state and a rank's cursor") == (
        "5-streaming-dataset-state-and-a-ranks-cursor"
    )


def test_pages_exist() -> None:
    names = {p.relative_to(REPO).as_posix() for p in PAGES}
    for page in ("README.md", "docs/console.md", "docs/cli.md", "docs/formats.md", "docs/performance.md",
                 "docs/reliability.md", "docs/development.md", "docs/DESIGN.md"):
        assert page in names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists() or REPO not in (dest, *dest.parents):
            broken.append(f"{target}: no such file in the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_docs_do_not_point_outside_the_repository(page: Path) -> None:
    """The project carries its own format contract; nothing may lean on a sibling checkout."""
    assert "../shared" not in page.read_text(encoding="utf-8")


# --- Repository paths the docs name ------------------------------------------------------

CODE_SPAN = re.compile(r"`([^`\n]+)`")
PACKAGE = REPO / "fvconsole"
#: A path is resolved from the repository root or from the package (the docs say `core/shared/walk.py`).
PATH_ROOTS = (REPO, PACKAGE)
#: A path in FastVideo's repository is introduced so: "FastVideo's `scripts/train/...`".
OTHER_REPOSITORY = "FastVideo's "
PATH_SUFFIX = re.compile(r"\.(py|md|toml|tcss|txt|json|cfg|ini|sh)$")


def _brace_expand(text: str) -> list[str]:
    """``core/migration/{defaults,published}.py`` -> both paths."""
    match = re.search(r"\{([^{}]*)\}", text)
    if not match:
        return [text]
    return [path for alt in match.group(1).split(",")
            for path in _brace_expand(text[:match.start()] + alt + text[match.end():])]


def repository_path(span: str) -> str | None:
    """The repository path a code span names, or None when it names none.

    A span is a path when its first component is a top-level entry of the repository or of
    the package (``docs/``, ``tests/``, ``core/``, ``tui/`` ...) and it has a ``/`` or a file
    suffix; text after the path (``core/journal/log.py: read_journal``, ``::test``) is dropped.
    Absolute paths (``/dev/shm/x``) and placeholders (``<out>``) are runtime paths, not ours.
    """
    token = re.split(r"[\s:(]", span.strip(), maxsplit=1)[0].rstrip(".,;")
    if not token or token.startswith(("/", "~", "$", "-", ".<")) or "<" in token:
        return None
    if "/" not in token and not PATH_SUFFIX.search(token):
        return None
    first = token.split("/", 1)[0]
    tops = {p.name for p in REPO.iterdir() if p.name != ".git"} | {p.name for p in PACKAGE.iterdir()}
    return token if first in tops else None


def _exists(path: str) -> bool:
    return any(any(root.glob(path)) if "*" in path else (root / path).exists() for root in PATH_ROOTS)


def test_repository_path_recognises_paths_and_leaves_runtime_ones() -> None:
    assert repository_path("core/shared/walk.py") == "core/shared/walk.py"
    assert repository_path("core/journal/log.py: read_journal") == "core/journal/log.py"
    assert repository_path("tests/architecture/test_doors.py::test_removal_has_one_door") == "tests/architecture/test_doors.py"
    assert repository_path("docs/cli.md") == "docs/cli.md"
    assert repository_path("/dev/shm/fv-wcache") is None
    assert repository_path(".<out>.fvconsole-lock") is None
    assert repository_path("dataloader_state_rank<r>.pt") is None
    assert repository_path("fvconsole cache ls") is None
    assert _brace_expand("core/migration/{defaults,sample_ids}.py") == [
        "core/migration/defaults.py", "core/migration/sample_ids.py"]
    assert not _exists("core/receipts.py") and _exists("core/migration/published.py")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_repository_path_in_backticks_exists(page: Path) -> None:
    missing = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for match in CODE_SPAN.finditer(line):
            if line[:match.start()].endswith(OTHER_REPOSITORY):
                continue
            span = match.group(1)
            path = repository_path(span)
            for one in _brace_expand(path) if path else ():
                if not _exists(one.rstrip("/")):
                    missing.append(f"line {number}: `{span}` ({one} does not exist)")
    assert not missing, f"{page.relative_to(REPO)}: " + "; ".join(missing)


# --- The module map of docs/DESIGN.md ------------------------------------------------------

#: A module longer than this says why in its row of the module map: "(... over 500 lines: why)".
LONG_MODULE_LINES = 500


def module_map() -> dict[str, str]:
    """Module (path under fvconsole/, or from the repository root) -> its text in the module map.

    A bare name (``plan.py``) is in the package the row named: the last span ending in ``/``
    (``core/cache/``), else the directory of the last path (``tui/app.py``). A module's text
    runs from its name to the next module named.
    """
    text = (REPO / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    found: dict[str, str] = {}
    for row in section.splitlines():
        if not row.startswith("|") or row.startswith(("| area", "| ---")):
            continue
        package = base = ""
        spans = list(CODE_SPAN.finditer(row))
        for i, span in enumerate(spans):
            name = span.group(1)
            if name.endswith("/"):
                package = name
                continue
            if not re.fullmatch(r"[\w/.]+\.py", name):
                continue
            if "/" in name:
                path = name
                base = name.rsplit("/", 1)[0] + "/"
            else:
                path = (package or base) + name
            path = path.removeprefix("fvconsole/")
            end = next((s.start() for s in spans[i + 1:] if re.fullmatch(r"[\w/.]+\.py|[\w/]+/", s.group(1))),
                       len(row))
            found[path] = found.get(path, "") + row[span.end():end]
    return found


def _modules() -> dict[str, int]:
    """Every module of the package (path under fvconsole/) -> its number of lines."""
    return {p.relative_to(PACKAGE).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for p in PACKAGE.rglob("*.py")
            if p.name != "__init__.py" or p.parent == PACKAGE / "cli"}  # cli/__init__.py is the dispatcher


def test_the_module_map_names_every_module_and_only_modules_that_exist() -> None:
    named, modules = module_map(), _modules()
    assert {"core/shared/walk.py", "core/migration/plan.py", "core/cache/scan.py", "tui/app.py"} <= set(named)
    unknown = sorted(path for path in set(named) - set(modules) if not (REPO / path).is_file())
    assert not unknown, f"docs/DESIGN.md's module map names modules that do not exist: {unknown}"
    omitted = sorted(set(modules) - set(named))
    assert not omitted, f"docs/DESIGN.md's module map omits: {omitted}"


def test_a_long_module_says_why_in_its_row_of_the_module_map() -> None:
    named = module_map()
    unexplained = [f"{path} ({lines} lines)" for path, lines in sorted(_modules().items())
                   if lines > LONG_MODULE_LINES
                   and not re.search(rf"over {LONG_MODULE_LINES} lines: \w", named.get(path, ""))]
    assert not unexplained, (
        f"modules over {LONG_MODULE_LINES} lines without 'over {LONG_MODULE_LINES} lines: <why>' in their "
        f"row of docs/DESIGN.md's module map: {unexplained}")
