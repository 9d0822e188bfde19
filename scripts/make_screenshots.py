"""Regenerate the editor pictures from a real run in ComfyUI's editor (headless Chromium).

Writes
  docs/images/graph_video_swap.png   the video_swap_builtin graph after it ran on the sample clip
                                     (caption in docs/workflows.md)
  docs/images/qa_chart.png           its QA gate node: per-frame chart drawn by web/js/swapline.js
                                     (caption in docs/qa.md)
  workflows/<name>.jpg               template-browser thumbnails, one per UI workflow (the 1.32.9
                                     frontend requests /api/workflow_templates/<pack>/<name>.jpg)

The built-in workflows are queued from the editor and shown with their results. The neural ones
(buffalo_l + inswapper_128, SD1.5 + ControlNet for face_refine, which users supply) are only
loaded, over synthetic stand-ins so their model choices resolve; their results would be those of
random weights. Uses the same driver as
devtools/swapline_editor.py. Needs Debian's chromium (scripts/setup.sh installs it).

    .venv/bin/python scripts/make_screenshots.py [workflow names]
"""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))          # devtools, swapline_core

from devtools.captions import made_from, set_caption  # noqa: E402
from devtools.comfy_harness import ComfyServer  # noqa: E402
from devtools.swapline_editor import (  # noqa: E402
    Browser,
    node_id_of,
    run_in_editor,
    save_image,
    stage_inputs,
    ui_workflows,
    unavailable_reason,
    write_editor_settings,
)

DOCS = REPO / "docs" / "images"
THUMB = 400  # px, square: the template browser shows square cards
MAX_BYTES = 200_000


def main() -> int:
    reason = unavailable_reason()
    if reason:
        print(f"[screenshots] cannot run: {reason}", file=sys.stderr)
        return 2
    from devtools.synthetic_models import build_models
    from devtools.synthetic_sd import build_sd_models

    work = REPO / "out" / "screenshots"
    shutil.rmtree(work, ignore_errors=True)  # a fresh server: nothing cached, every node executes
    (work / "models").mkdir(parents=True)
    build_models(work / "models")
    build_sd_models(work / "models")
    server = ComfyServer(work / "base", work / "models")
    write_editor_settings(server)
    server.prepare_dirs()
    stage_inputs(server)
    # the pictures show what the demo runs: the colour source photo (scripts/demo.py)
    shutil.copy(REPO / "assets" / "samples" / "source_face_colour.png",
                server.base_dir / "input" / "swapline_source_face.png")
    print(f"[screenshots] starting ComfyUI (log: {server.log_path})")
    server.start()
    # before this run writes its own thumbnails (tracked files) into the tree
    made = (f"Made by `scripts/make_screenshots.py` from a real run on the sample clip with the colour "
            f"source photo ({made_from()}).")
    written = []
    t0 = time.time()
    try:
        with Browser() as browser:
            editor = browser.new_editor(server).open()
            for name in sys.argv[1:] or ui_workflows():      # names given: only those thumbnails
                run = name.endswith("_builtin")
                res = run_in_editor(editor, name, queue=run)
                print(f"[screenshots] {name}: loaded" + (f", ran in {res['run_s']} s" if run else " (not run)"))
                png = editor.graph_png()
                written.append(save_image(png, REPO / "workflows" / f"{name}.jpg", square=THUMB, max_bytes=MAX_BYTES))
                if name == "video_swap_builtin":
                    written.append(save_image(png, DOCS / "graph_video_swap.png", max_width=1400, max_bytes=MAX_BYTES))
                    qa = editor.node_png(node_id_of(res, "SwaplineQAGate"), scale=1.5)
                    written.append(save_image(qa, DOCS / "qa_chart.png", max_bytes=MAX_BYTES))
                    written.append(set_caption(REPO / "docs" / "workflows.md", "images/graph_video_swap.png", made))
                    written.append(set_caption(REPO / "docs" / "qa.md", "images/qa_chart.png", made))
            errors = editor.errors()
            if errors:
                print("[screenshots] editor errors:\n  " + "\n  ".join(errors), file=sys.stderr)
    finally:
        server.stop()
    print(f"[screenshots] done in {time.time() - t0:.1f} s:")
    for p in written:
        print(f"[screenshots]   {p.relative_to(REPO)} ({p.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
