"""Captions of the docs' pictures: each names the commit and date its picture was made from.

A picture in a Markdown page is followed by one caption line in underscores; the script that makes
the picture rewrites that line, so a caption cannot outlive its picture.
"""
from __future__ import annotations

import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def made_from() -> str:
    """'commit abc1234, 2026-12-02 08:40 UTC' (noting uncommitted changes to tracked files)."""
    git = lambda *a: subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += " with uncommitted changes"
    return f"commit {commit}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"


def set_caption(page: Path, image: str, caption: str) -> Path:
    """Rewrite the `_..._` line under the picture `image` (its link as written in `page`), on the next
    line or after one blank line."""
    pattern = r"(!\[[^\]]*\]\(" + re.escape(image) + r"\)\n\n?)_[^\n]*_"
    text, n = re.subn(pattern, lambda m: m.group(1) + f"_{caption}_", page.read_text(), count=1)
    if n != 1:
        raise SystemExit(f"{page}: no picture {image} with a _caption_ line under it")
    page.write_text(text)
    return page
