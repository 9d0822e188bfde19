"""Drive ComfyUI's real editor (the 1.32.9 frontend) in headless Chromium, as a user would.

Shared by tests/browser/test_editor.py and scripts/make_screenshots.py. Chromium is Debian's
(/usr/bin/chromium, installed by scripts/setup.sh); Playwright only drives it, its own browser
download is never used. Entry points used in the page (all public frontend API):

- ``window.app.loadGraphData(workflow, true, true, name)``: load a UI-format workflow (what
  opening a file does; it also raises the frontend's missing-nodes dialog);
- ``window.LiteGraph.registered_node_types``: which node types the editor knows;
- the toolbar's **Run** button (clicked, not called), whose ``POST /api/prompt`` response gives
  the prompt id; completion is read from ``/history`` over HTTP;
- ``app.extensionManager.command.execute('Comfy.Canvas.FitView' | 'Comfy.BrowseTemplates')``;
- ``app.extensionManager.setting.set(...)``; ``app.graph`` / ``app.canvas.ds`` to find nodes on
  screen.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO / "workflows"
SAMPLES = REPO / "assets" / "samples"
CHROMIUM = Path(os.environ.get("SWAPLINE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Settings for a clean, reproducible canvas: no minimap, no low-detail rendering when zoomed out.
EDITOR_SETTINGS = {"Comfy.TutorialCompleted": True, "Comfy.Minimap.Visible": False,
                   "LiteGraph.Canvas.MinFontSizeForLOD": 0}
# Console noise of the frontend itself (not ours), seen on every page load of 1.32.9 offline.
FRONTEND_NOISE = ("Failed to load resource", "net::ERR_", "Cannot read properties of undefined (reading 'id')",
                  "Attempted to cleanup event listeners")


def ui_workflows() -> list[str]:
    return sorted(p.stem for p in WORKFLOWS.glob("*.json"))


def unavailable_reason() -> str | None:
    """Why browser checks cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (scripts/setup.sh installs requirements-test.txt)"
    if not CHROMIUM.exists():
        return (f"no Chromium at {CHROMIUM} (scripts/setup.sh installs Debian's 'chromium' with apt-get; "
                "set SWAPLINE_CHROMIUM to use another binary)")
    return None


def stage_inputs(server) -> None:
    """The sample clip and faces under the names the shipped workflows use."""
    from devtools.media import stage_workflow_inputs

    stage_workflow_inputs(server.base_dir / "input")


def write_editor_settings(server) -> None:
    """Before the server starts (ComfyServer.prepare_dirs keeps an existing settings file)."""
    path = server.base_dir / "user" / "default" / "comfy.settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    current = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**current, **EDITOR_SETTINGS}))


class Browser:
    """Playwright + Debian Chromium with a fresh profile; use as a context manager."""

    def __init__(self, viewport=(1920, 1080)):
        self.viewport = viewport
        self._pw = self.context = None
        self._profile = None

    def __enter__(self) -> Browser:
        from playwright.sync_api import sync_playwright

        self._profile = tempfile.mkdtemp(prefix="swapline-chromium-")
        self._pw = sync_playwright().start()
        try:
            self.context = self._pw.chromium.launch_persistent_context(
                self._profile, executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS,
                viewport={"width": self.viewport[0], "height": self.viewport[1]})
        except Exception:
            self._pw.stop()
            raise
        return self

    def new_editor(self, server) -> Editor:
        page = self.context.new_page()
        return Editor(page, server)

    def __exit__(self, *exc) -> None:
        try:
            if self.context:
                self.context.close()
        finally:
            if self._pw:
                self._pw.stop()
            shutil.rmtree(self._profile, ignore_errors=True)


class Editor:
    def __init__(self, page, server):
        self.page = page
        self.server = server
        self.console: list[str] = []
        self.page_errors: list[str] = []
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        # the "Nodes 2.0" banner is dismissed per browser profile, in localStorage
        page.add_init_script("localStorage.setItem('vueNodesBannerDismissed', 'true')")

    # -- opening -----------------------------------------------------------------------------
    def open(self, timeout: float = 90.0) -> Editor:
        self.page.goto(self.server.url)
        # our extension registered and our node definitions loaded from /object_info
        self.page.wait_for_function(
            "() => !!(window.app && window.app.graph && window.app.canvas && window.LiteGraph"
            " && LiteGraph.registered_node_types['SwaplineQAGate']"
            " && app.extensions.some((e) => e.name === 'swapline.ui'))", timeout=timeout * 1000)
        self.page.evaluate("""async (settings) => {
            const s = app.extensionManager.setting;
            for (const [k, v] of Object.entries(settings)) if (s.get(k) !== v) await s.set(k, v);
        }""", {k: v for k, v in EDITOR_SETTINGS.items() if k != "Comfy.TutorialCompleted"})
        return self

    def errors(self, *, ours_only: bool = False) -> list[str]:
        """Uncaught page errors and console errors, minus the frontend's known offline noise."""
        errs = [f"pageerror: {e}" for e in self.page_errors if not any(n in e for n in FRONTEND_NOISE)]
        errs += [c for c in self.console if c.startswith("error:") and not any(n in c for n in FRONTEND_NOISE)]
        if ours_only:
            errs = [e for e in errs if "swapline" in e.lower()]
        return errs

    # -- workflows ---------------------------------------------------------------------------
    def unknown_node_types(self, workflow: dict) -> list[str]:
        return self.page.evaluate(
            "(types) => types.filter((t) => !(t in LiteGraph.registered_node_types))",
            sorted({n["type"] for n in workflow["nodes"]}))

    def load_workflow(self, workflow: dict, name: str) -> dict:
        """Load as a user opening the file does; report unknown types, dialogs and node errors."""
        unknown = self.unknown_node_types(workflow)
        self.page.evaluate("async ([wf, name]) => { await app.loadGraphData(wf, true, true, name); }",
                           [workflow, name])
        self.page.wait_for_timeout(300)  # dialogs open asynchronously after loadGraphData resolves
        graph = self.page.evaluate("""() => app.graph.nodes.map((n) => ({
            id: n.id, type: n.type, known: n.type in LiteGraph.registered_node_types,
            has_errors: !!n.has_errors,
            widgets: Object.fromEntries((n.widgets || []).filter((w) => w.name).map((w) => [w.name, w.value]))}))""")
        return {"unknown_before_load": unknown, "nodes": graph,
                "unknown_in_graph": [n["type"] for n in graph if not n["known"] or n["has_errors"]],
                "dialogs": self.dialogs() + self.error_panel()}

    def dialogs(self) -> list[str]:
        """Texts of open dialogs (the missing-nodes / missing-models / error dialogs are these):
        PrimeVue .p-dialog on frontend 1.32.9, role=dialog panels on 1.49.6."""
        return self.page.evaluate("""() => [...document.querySelectorAll('.p-dialog, [role=dialog]')]
            .filter((d) => !d.parentElement?.closest('.p-dialog, [role=dialog]'))
            .filter((d) => d.offsetParent !== null || d.getClientRects().length)
            .map((d) => d.innerText.trim().slice(0, 2000))""")

    def error_panel(self) -> list[str]:
        """Frontend 1.49.6 (ComfyUI 0.33) reports missing nodes/models/inputs of a loaded workflow
        not in a dialog but as an "N errors found" notice whose "View details" opens the workflow
        overview's error list: open it and return its text ([] when there is no notice, as on 1.32.9)."""
        details = self.page.get_by_role("button", name="View details")
        if not details.count():
            return []
        details.first.click()
        self.page.wait_for_function("() => !!document.querySelector('[data-testid^=missing-]')", timeout=10_000)
        return [self.page.evaluate("""() => {
            let e = document.querySelector('[data-testid^=missing-]');
            while (e.parentElement && !e.innerText.includes('Resolve before running')) e = e.parentElement;
            return e.innerText.trim().slice(0, 4000);
        }""")]

    def close_dialogs(self) -> None:
        for _ in range(3):
            if not self.dialogs():
                return
            self.page.keyboard.press("Escape")
            self.page.wait_for_timeout(200)

    def queue_from_ui(self) -> dict:
        """Click the toolbar's Run button; return the /api/prompt response (prompt_id, node_errors)."""
        with self.page.expect_response(
                lambda r: r.url.endswith("/api/prompt") and r.request.method == "POST", timeout=60_000) as info:
            self.run_button().click()
        resp = info.value
        body = resp.json()
        body["_http_status"] = resp.status
        body["_prompt"] = (resp.request.post_data_json or {}).get("prompt")
        return body

    def run_button(self):
        """The toolbar's Run button. Frontend 1.32.9 (ComfyUI 0.3.75) has one button named Run;
        1.49.6 (ComfyUI 0.33) also names the run-mode menu beside it "Run", and marks the button
        itself with data-testid="queue-button"."""
        by_id = self.page.get_by_test_id("queue-button")
        return by_id if by_id.count() == 1 else self.page.get_by_role("button", name="Run", exact=True)

    def wait_finished(self, prompt_id: str, timeout: float = 600.0) -> dict:
        """The history entry once the server has stored it (polled over HTTP)."""
        entry = self.server.history(prompt_id, wait=timeout)
        if not entry:
            raise TimeoutError(f"prompt {prompt_id} not finished after {timeout}s:\n{self.server.log_tail(40)}")
        return entry

    def wait_for(self, js: str, arg=None, timeout: float = 30.0):
        return self.page.wait_for_function(js, arg=arg, timeout=timeout * 1000).json_value()

    def swapline_ui_state(self) -> dict:
        """Per node: our status widgets' values and whether QA chart data arrived."""
        return self.page.evaluate("""() => Object.fromEntries(app.graph.nodes.map((n) => [n.id, {
            type: n.type,
            status: Object.fromEntries((n.widgets || []).filter((w) => w.type === 'swapline.status')
                .map((w) => [w.name, w.value])),
            qa_frames: n.swaplineQA ? n.swaplineQA.frames.length : null,
            qa_decision: n.swaplineQA ? n.swaplineQA.decision : null,
            has_chart: !!(n.widgets || []).find((w) => w.type === 'swapline.qa_chart'),
            images: (n.imgs || []).length}]))""")

    def overlapping_nodes(self) -> list[list]:
        """Pairs of nodes whose boxes (title bar included) overlap as the editor lays them out now."""
        return self.page.evaluate("""() => {
            const th = LiteGraph.NODE_TITLE_HEIGHT, ns = app.graph.nodes, out = [];
            const box = (n) => [n.pos[0], n.pos[1] - th, n.pos[0] + n.size[0], n.pos[1] + n.size[1]];
            for (let i = 0; i < ns.length; i++) for (let j = i + 1; j < ns.length; j++) {
                const a = box(ns[i]), b = box(ns[j]);
                if (a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3])
                    out.push([ns[i].title, ns[j].title, Math.round(Math.min(a[3], b[3]) - Math.max(a[1], b[1]))]);
            }
            return out;
        }""")

    # -- geometry and pictures ---------------------------------------------------------------
    def fit_view(self) -> None:
        self.page.evaluate("""async () => {
            app.canvas.deselectAll?.();
            await app.extensionManager.command.execute('Comfy.Canvas.FitView');
            app.canvas.setDirty(true, true);
        }""")
        self.page.wait_for_timeout(400)

    def node_box(self, node_id: int, pad: int = 8) -> dict:
        """Screen rectangle of a node (title bar included)."""
        return self.page.evaluate("""([id, pad]) => {
            const n = app.graph.getNodeById(id), c = app.canvas, ds = c.ds;
            const r = c.canvas.getBoundingClientRect(), th = LiteGraph.NODE_TITLE_HEIGHT;
            return {x: r.left + (n.pos[0] + ds.offset[0]) * ds.scale - pad,
                    y: r.top + (n.pos[1] - th + ds.offset[1]) * ds.scale - pad,
                    width: n.size[0] * ds.scale + 2 * pad, height: (n.size[1] + th) * ds.scale + 2 * pad};
        }""", [node_id, pad])

    def graph_box(self, pad: int = 16) -> dict:
        return self.page.evaluate("""(pad) => {
            const c = app.canvas, ds = c.ds, r = c.canvas.getBoundingClientRect(), th = LiteGraph.NODE_TITLE_HEIGHT;
            let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
            for (const n of app.graph.nodes) {
                x0 = Math.min(x0, n.pos[0]); y0 = Math.min(y0, n.pos[1] - th);
                x1 = Math.max(x1, n.pos[0] + n.size[0]); y1 = Math.max(y1, n.pos[1] + n.size[1]);
            }
            const sx = (v) => r.left + (v + ds.offset[0]) * ds.scale, sy = (v) => r.top + (v + ds.offset[1]) * ds.scale;
            const left = Math.max(r.left, sx(x0) - pad), top = Math.max(r.top, sy(y0) - pad);
            return {x: left, y: top, width: Math.min(r.right, sx(x1) + pad) - left,
                    height: Math.min(r.bottom, sy(y1) + pad) - top};
        }""", pad)

    def center_on_node(self, node_id: int, scale: float = 1.0) -> None:
        self.page.evaluate("""([id, scale]) => {
            const n = app.graph.getNodeById(id), c = app.canvas, ds = c.ds;
            const r = c.canvas.getBoundingClientRect();
            ds.scale = scale;
            ds.offset[0] = r.width / 2 / scale - (n.pos[0] + n.size[0] / 2);
            ds.offset[1] = r.height / 2 / scale - (n.pos[1] + n.size[1] / 2);
            c.setDirty(true, true);
        }""", [node_id, scale])
        self.page.wait_for_timeout(300)

    def _hide_overlays(self, hide: bool) -> None:
        """Hide every DOM overlay (menus, toolbars, toasts) but the canvas and node DOM widgets."""
        self.page.evaluate("""(hide) => {
            if (!hide) {
                for (const e of document.querySelectorAll('[data-swapline-hidden]')) {
                    e.style.visibility = e.dataset.swaplineHidden; delete e.dataset.swaplineHidden;
                }
                return;
            }
            const keep = new Set();
            const mark = (el) => { for (let e = el; e; e = e.parentElement) keep.add(e); };
            mark(app.canvas.canvas);
            document.querySelectorAll('.dom-widget').forEach(mark);
            for (const e of document.body.querySelectorAll('*')) {
                if (keep.has(e) || !keep.has(e.parentElement)) continue;
                if (e.closest('.dom-widget')) continue;
                e.dataset.swaplineHidden = e.style.visibility || '';
                e.style.visibility = 'hidden';
            }
        }""", hide)

    def screenshot(self, clip: dict, hide_overlays: bool = True) -> bytes:
        clip = {k: float(v) for k, v in clip.items()}
        if hide_overlays:
            self._hide_overlays(True)
        try:
            self.page.wait_for_timeout(150)
            return self.page.screenshot(clip=clip)
        finally:
            if hide_overlays:
                self._hide_overlays(False)

    def graph_png(self) -> bytes:
        self.fit_view()
        return self.screenshot(self.graph_box())

    def node_png(self, node_id: int, scale: float = 1.0) -> bytes:
        self.center_on_node(node_id, scale)
        return self.screenshot(self.node_box(node_id))

    def click_node_point(self, node_id: int, x: float, y: float) -> None:
        """Click at node-local canvas coordinates (x, y from the node's top-left, below the title)."""
        pt = self.page.evaluate("""([id, x, y]) => {
            const n = app.graph.getNodeById(id), c = app.canvas, ds = c.ds, r = c.canvas.getBoundingClientRect();
            return [r.left + (n.pos[0] + x + ds.offset[0]) * ds.scale,
                    r.top + (n.pos[1] + y + ds.offset[1]) * ds.scale];
        }""", [node_id, x, y])
        self.page.mouse.click(*pt)
        self.page.wait_for_timeout(200)


def run_in_editor(editor: Editor, name: str, *, queue: bool = True, timeout: float = 600.0,
                  widgets: dict | None = None) -> dict:
    """Load workflows/<name>.json in the editor, check it loaded cleanly, queue it from the UI and
    wait for the outputs to reach the editor. Returns what was seen (raises on any problem).

    ``widgets`` ({node type: {widget: value}}) is set in the editor before queueing, as a user
    would (used to cut a workflow to CI size)."""
    workflow = json.loads((WORKFLOWS / f"{name}.json").read_text())
    t0 = time.time()
    loaded = editor.load_workflow(workflow, name)
    problems = []
    if loaded["unknown_before_load"] or loaded["unknown_in_graph"]:
        problems.append(f"unknown node types: {loaded['unknown_before_load'] or loaded['unknown_in_graph']}")
    if loaded["dialogs"]:
        problems.append(f"dialogs after loading: {loaded['dialogs']}")
    if problems:
        raise AssertionError(f"{name}: " + "; ".join(problems))
    result = {"name": name, "loaded": loaded, "load_s": round(time.time() - t0, 2)}
    if widgets:
        editor.page.evaluate("""(edits) => {
            for (const n of app.graph.nodes) {
                for (const [name, value] of Object.entries(edits[n.type] || {})) {
                    const w = n.widgets.find((x) => x.name === name);
                    w.value = value;
                    w.callback?.(value);
                }
            }
            app.graph.setDirtyCanvas(true, true);
        }""", widgets)
    if not queue:
        return result
    t1 = time.time()
    queued = editor.queue_from_ui()
    if queued.get("_http_status") != 200 or queued.get("node_errors") or "prompt_id" not in queued:
        raise AssertionError(f"{name}: the server rejected the prompt: {json.dumps(queued)[:2000]}")
    entry = editor.wait_finished(queued["prompt_id"], timeout)
    status = entry.get("status", {})
    if status.get("status_str") != "success":
        raise AssertionError(f"{name}: execution failed: {json.dumps(status.get('messages'))[:3000]}")
    # the editor got the executed events: every node with ui output shows it
    expect = [int(nid) for nid, out in entry["outputs"].items()
              if "swapline_qa" in out or "swapline_signing" in out or "swapline_selection" in out]
    editor.wait_for("""(ids) => ids.every((id) => {
        const n = app.graph.getNodeById(id);
        return n && (n.widgets || []).some((w) => w.type === 'swapline.status' && w.value);
    })""", expect, timeout=60)
    if editor.dialogs():
        raise AssertionError(f"{name}: dialogs after running: {editor.dialogs()}")
    result.update(prompt_id=queued["prompt_id"], queued_prompt=queued["_prompt"], outputs=entry["outputs"],
                  run_s=round(time.time() - t1, 2),
                  ui=editor.swapline_ui_state())
    return result


def node_id_of(result: dict, node_type: str) -> int:
    # int: frontend 1.49.6 (ComfyUI 0.33) may report ids from a loaded file as strings
    return int(next(n["id"] for n in result["loaded"]["nodes"] if n["type"] == node_type))


def save_image(png: bytes, path: Path, *, max_width: int | None = None, square: int | None = None,
               max_bytes: int = 200_000) -> Path:
    """Write a screenshot as PNG (palette-reduced if large) or JPEG (by suffix), under max_bytes.
    square=N letterboxes to N x N on the canvas colour (template-browser cards are square)."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    if square:
        side = max(img.size)
        canvas = Image.new("RGB", (side, side), img.getpixel((1, 1)))
        canvas.paste(img, ((side - img.width) // 2, (side - img.height) // 2))
        img = canvas.resize((square, square), Image.LANCZOS)
    elif max_width and img.width > max_width:
        img = img.resize((max_width, round(img.height * max_width / img.width)), Image.LANCZOS)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() in (".jpg", ".jpeg"):
        for quality in (88, 80, 70, 60, 50):
            buf = io.BytesIO()
            img.save(buf, "JPEG", quality=quality, optimize=True, progressive=True)
            if buf.tell() <= max_bytes:
                break
    else:
        buf = io.BytesIO()
        img.save(buf, "PNG", optimize=True)
        for colors in (256, 128, 64):
            if buf.tell() <= max_bytes:
                break
            buf = io.BytesIO()
            img.quantize(colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
                buf, "PNG", optimize=True)
    if buf.tell() > max_bytes:
        raise ValueError(f"{path.name}: {buf.tell()} bytes even when reduced (limit {max_bytes})")
    path.write_bytes(buf.getvalue())
    return path
