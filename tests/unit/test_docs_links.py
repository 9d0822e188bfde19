"""Every relative link in README.md and docs/*.md points at an existing file, and every #anchor at
an existing heading of its target (GitHub's heading slugs). Run directly to print each broken link.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")


def _prose_lines(text: str):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for no, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            yield no, line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # links keep their text
    text = re.sub(r"[`*]", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in _prose_lines(page.read_text(encoding="utf-8")):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(pages=PAGES) -> list[str]:
    problems = []
    for page in pages:
        for no, line in _prose_lines(page.read_text(encoding="utf-8")):
            for m in _LINK.finditer(_CODE_SPAN.sub("", line)):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):   # http:, https:, mailto:
                    continue
                path_part, _, anchor = target.partition("#")
                dest = (page.parent / path_part).resolve() if path_part else page
                where = f"{page.relative_to(REPO)}:{no}: {target}"
                try:
                    rel = dest.relative_to(REPO).as_posix()
                except ValueError:
                    problems.append(f"{where}: points outside the repository")
                    continue
                if not dest.exists():
                    problems.append(f"{where}: no such file")
                    continue
                if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    problems.append(f"{where}: no heading with anchor #{anchor} in {rel}")
    return problems


def test_slug_matches_github():
    assert slug("GPU inference (onnxruntime)") == "gpu-inference-onnxruntime"
    assert slug("Metrics: `/swapline/metrics`") == "metrics-swaplinemetrics"
    assert slug("face_refine or video_swap_refine") == "face_refine-or-video_swap_refine"


def test_relative_links_resolve():
    assert broken_links() == []


if __name__ == "__main__":
    found = broken_links()
    print("\n".join(found) or f"all relative links resolve in {len(PAGES)} pages")
    sys.exit(1 if found else 0)
