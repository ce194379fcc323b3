"""The documentation holds together: every page is in docs/README.md's index, every relative link in README.md and
docs/ reaches a file (and the heading its #anchor names), and no page points outside the repository at ../shared."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from tests.support.agent import REPO

DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", *DOCS.rglob("*.md")])
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """*text* without fenced code blocks and inline code, where link syntax is an example, not a link."""
    return CODE.sub("", FENCE.sub("", text))


def links(page: Path) -> list[str]:
    """The targets of *page*'s Markdown links and images."""
    return LINK.findall(prose(page.read_text(encoding="utf-8")))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, markup and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "").lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of *page*, the second of a repeated heading as ``name-1`` and so on."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        name = slug(heading)
        count = seen.get(name, 0)
        found.add(name if count == 0 else f"{name}-{count}")
        seen[name] = count + 1
    return found


def target(page: Path, link: str) -> tuple[Path, str]:
    """The file a relative *link* of *page* names (a folder means its README.md) and its anchor ("" for none)."""
    path, _, anchor = link.partition("#")
    resolved = (page.parent / path).resolve() if path else page
    if resolved.is_dir():
        resolved = resolved / "README.md"
    return resolved, anchor


def relative(link: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", link)  # not https:, mailto:, ...


def test_the_slugs_are_githubs() -> None:
    assert slug("The fleet ranking (`schedwatch.fleet/v1`)") == "the-fleet-ranking-schedwatchfleetv1"
    assert slug("JSON (`--json`): the contract") == "json---json-the-contract"
    assert slug("Ünïcode & numbers 2.0") == "ünïcode--numbers-20"


def broken(page: Path, root: Path = REPO) -> list[str]:
    """Each relative link of *page* that reaches no file under *root*, or no heading of the page it names."""
    found = []
    for link in filter(relative, links(page)):
        path, anchor = target(page, link)
        if not path.is_relative_to(root):
            found.append(f"{link}: outside the repository")
        elif not path.exists():
            found.append(f"{link}: no {path.relative_to(root)}")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            found.append(f"{link}: {path.relative_to(root)} has no heading #{anchor}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_reaches_its_file_and_heading(page: Path) -> None:
    found = broken(page)
    assert not found, f"{page.relative_to(REPO)}:\n  " + "\n  ".join(found)


def test_a_broken_link_and_a_missing_heading_are_named(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A section (`v1`)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-section-v1) [gone](nowhere.md) [no heading](other.md#b-section) [self](#top)\n"
        "`[in code](nowhere.md)`\n```\n[in a block](nowhere.md)\n```\n[out](../../etc/passwd) [web](https://x.invalid/y)\n"
    )
    assert broken(page, tmp_path) == [
        "nowhere.md: no nowhere.md",
        "other.md#b-section: other.md has no heading #b-section",
        "#top: page.md has no heading #top",
        "../../etc/passwd: outside the repository",
    ]


def test_every_docs_page_is_in_the_index() -> None:
    index = DOCS / "README.md"
    listed = {target(index, link)[0] for link in links(index) if relative(link)}
    pages = {page.resolve() for page in DOCS.glob("*.md") if page != index}
    pages |= {readme.resolve() for readme in DOCS.glob("*/README.md")}  # a folder's page (docs/schemas/)
    assert not pages - listed, (
        f"docs/README.md does not list {sorted(p.relative_to(DOCS).as_posix() for p in pages - listed)}"
    )


def test_no_page_points_at_shared() -> None:
    mentions = [
        f"{page.relative_to(REPO)}:{number}"
        for page in PAGES
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if "../shared" in line
    ]
    assert not mentions, f"pages point outside the repository at ../shared: {mentions}"


def test_the_checks_see_links() -> None:
    """The parser finds the index's links, so the tests above cannot pass by finding none."""
    index = links(DOCS / "README.md")
    assert "metrics.md" in index and "schemas/" in index and len(index) >= 20
    assert links(REPO / "README.md"), "README.md links into docs/"
