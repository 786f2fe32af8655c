"""The docs stand alone: every relative link and #anchor in README.md and docs/*.md resolves.

Anchors follow GitHub's rule for heading ids (lower case, punctuation dropped, spaces to
hyphens, ``-1``, ``-2`` for repeats), so a renamed heading or a moved page fails here
instead of leaving a dead link.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
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
