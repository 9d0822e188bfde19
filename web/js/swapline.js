// Swapline editor extension: shows what the API output already carries (ui data), natively.
// Official hooks only (registerExtension / onExecuted via beforeRegisterNodeDef) and LiteGraph's
// custom-widget API (addCustomWidget with draw/computeSize); no patching of ComfyUI internals.
import { app } from "../../../scripts/app.js";

const README_MODELS = "https://github.com/swapline/comfyui-swapline/blob/main/docs/models.md";
const CHART_H = 170;   // chart drawing height inside its widget
const MARGIN = 15;     // LiteGraph's widget margin

const LG = () => globalThis.LiteGraph ?? {};

function fitText(ctx, text, maxWidth) {
  if (ctx.measureText(text).width <= maxWidth) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(text.slice(0, mid) + "…").width <= maxWidth) lo = mid; else hi = mid - 1;
  }
  return text.slice(0, lo) + "…";
}

// A read-only status line ("label  value"). Not a disabled text widget: the 1.3x frontend hides the
// value of disabled widgets (they mean "converted to an input"), so the status was invisible.
// Never serialized: neither into the workflow (widget.serialize) nor the prompt (options.serialize).
function statusWidget(node, name) {
  let w = node.widgets?.find((x) => x.name === name);
  if (!w) {
    w = node.addCustomWidget({
      name,
      type: "swapline.status",
      value: "",
      serialize: false,
      options: { serialize: false },
      draw(ctx, _node, width, y, H) {
        const lg = LG();
        const h = H ?? lg.NODE_WIDGET_HEIGHT ?? 20;
        ctx.save();
        ctx.fillStyle = lg.WIDGET_BGCOLOR ?? "#222";
        ctx.strokeStyle = lg.WIDGET_OUTLINE_COLOR ?? "#666";
        ctx.beginPath();
        if (ctx.roundRect) ctx.roundRect(MARGIN, y, width - 2 * MARGIN, h, h * 0.5);
        else ctx.rect(MARGIN, y, width - 2 * MARGIN, h);
        ctx.fill();
        ctx.textBaseline = "middle";
        ctx.textAlign = "left";
        const label = `${this.label ?? this.name}:`;
        ctx.fillStyle = lg.WIDGET_SECONDARY_TEXT_COLOR ?? "#999";
        ctx.fillText(label, MARGIN + 10, y + h / 2);
        const x = MARGIN + 16 + ctx.measureText(label).width;
        ctx.fillStyle = lg.WIDGET_TEXT_COLOR ?? "#ddd";
        ctx.fillText(fitText(ctx, String(this.value ?? ""), width - MARGIN - 10 - x), x, y + h / 2);
        ctx.restore();
      },
      computeSize(width) {
        return [width, LG().NODE_WIDGET_HEIGHT ?? 20];
      },
      onPointerDown() {
        return true; // read-only: swallow the click (no edit prompt)
      },
    });
    growToFit(node);
  }
  return w;
}

function growToFit(node) {
  const min = node.computeSize?.();
  if (min && node.size[1] < min[1]) node.setSize([Math.max(node.size[0], min[0]), min[1]]);
}

const LOAD_COLORS = ["#b48cf2", "#d08770", "#f28cc8", "#a3a9b5", "#c8c83a", "#3ac8d8", "#6aa8ff", "#ff9f45",
  "#8fd16a", "#ff6b6b"];

function drawQAChart(ctx, report, width, height) {
  const frames = report.frames || [];
  const th = report.thresholds || {};
  const pad = 24;
  ctx.fillStyle = "#1b1f27";
  ctx.fillRect(0, 0, width, height);
  if (!frames.length) return [];
  const xs = (i) => pad + (i / Math.max(frames.length - 1, 1)) * (width - 2 * pad);
  const ys = (v) => height - pad - Math.max(0, Math.min(1, v)) * (height - 2 * pad);
  const series = [
    ["identity", "#5fd3a0", (f) => f.identity],
    ["flicker/3", "#f2b441", (f) => (f.flicker_ratio == null ? null : Math.min(f.flicker_ratio / 3, 1))],
  ];
  // One line per pixel/expression metric, drawn as value/limit at half height: crossing the
  // dashed "limit" line means the metric fails that frame.
  const loadNames = [...new Set(frames.flatMap((f) => Object.keys(f.loads || {})))];
  loadNames.forEach((name, k) => {
    const get = (f) => (f.loads?.[name] == null ? null : Math.min(f.loads[name] / 2, 1));
    series.push([name.replace(/_/g, " "), LOAD_COLORS[k % LOAD_COLORS.length], get]);
  });
  for (const [, color, get] of series) {
    ctx.strokeStyle = color;
    ctx.beginPath();
    let started = false;
    frames.forEach((f, i) => {
      const v = get(f);
      if (v == null) return;
      started ? ctx.lineTo(xs(i), ys(v)) : ctx.moveTo(xs(i), ys(v));
      started = true;
    });
    ctx.stroke();
  }
  ctx.setLineDash([4, 4]);
  if (loadNames.length) {
    ctx.strokeStyle = "#e5484d";
    ctx.beginPath(); ctx.moveTo(pad, ys(0.5)); ctx.lineTo(width - pad, ys(0.5)); ctx.stroke();
  }
  if (th.min_identity != null) {
    ctx.strokeStyle = "#5fd3a0";
    ctx.beginPath(); ctx.moveTo(pad, ys(th.min_identity)); ctx.lineTo(width - pad, ys(th.min_identity)); ctx.stroke();
  }
  ctx.setLineDash([]);
  const hits = [];
  frames.forEach((f, i) => {
    if (f.status === "fail") {
      ctx.fillStyle = "#e5484d";
      ctx.fillRect(xs(i) - 1, pad, 2, height - 2 * pad);
    }
    hits.push({ x: xs(i), frame: f.index });
  });
  // legend and verdict
  ctx.font = "11px sans-serif";
  ctx.textBaseline = "middle";
  let lx = pad;
  let ly = 8;
  for (const [name, color] of series) {
    const step = 24 + ctx.measureText(name).width;
    if (lx + step > width - pad) { lx = pad; ly += 12; }   // wrap: up to a dozen lines
    ctx.fillStyle = color;
    ctx.fillRect(lx, ly, 10, 3);
    ctx.fillStyle = "#c8ccd4";
    ctx.fillText(name, lx + 14, ly + 2);
    lx += step;
  }
  const failing = report.summary?.fail ?? frames.filter((f) => f.status === "fail").length;
  ctx.textAlign = "center";
  ctx.fillStyle = report.decision === "pass" ? "#5fd3a0" : "#e5484d";
  ctx.fillText(`${String(report.decision ?? "").toUpperCase()} · ${frames.length} frames · ${failing} failing`,
    width / 2, height - 10);
  ctx.textAlign = "left";
  ctx.fillStyle = "#8a919e";
  ctx.fillText(`${frames[0].index}`, pad, height - 10);
  ctx.textAlign = "right";
  ctx.fillText(`${frames[frames.length - 1].index}`, width - pad, height - 10);
  ctx.textAlign = "left";
  return hits;
}

function frameText(f) {
  if (!f) return "";
  const parts = [`frame ${f.index}: ${f.status}`];
  if (f.identity != null) parts.push(`identity ${f.identity.toFixed(3)}`);
  if (f.flicker_ratio != null) parts.push(`flicker ${f.flicker_ratio.toFixed(2)}`);
  for (const [k, v] of Object.entries(f)) {
    if (k === "loads") {
      for (const [m, l] of Object.entries(v || {})) parts.push(`${m} ${(+l).toFixed(2)}x limit`);
    } else if (!["index", "status", "identity", "flicker_ratio"].includes(k) && v != null) {
      parts.push(`${k} ${typeof v === "number" ? +v.toFixed(3) : JSON.stringify(v)}`);
    }
  }
  return parts.join(" · ");
}

// " · shots: 2 swapped (1 frame bridged), 1 kept original (frames 40-95: mouth does not follow ...)":
// the "keep original" policy decides per track segment (one face between two cuts).
function segmentText(segments) {
  if (!segments?.length) return "";
  const swapped = segments.filter((s) => s.decision === "swapped");
  const kept = segments.filter((s) => s.decision === "kept original");
  const bridged = swapped.reduce((a, s) => a + (s.bridged_frames?.length || 0), 0);
  // "keep original unless few fail" ships a shot with a few failing frames: say how many
  const failing = swapped.reduce((a, s) => a + (s.shipped_failing_frames?.length || 0), 0);
  const notes = [bridged ? `${bridged} frame(s) bridged` : "", failing ? `${failing} failing frame(s) shipped` : ""]
    .filter(Boolean).join(", ");
  let text = ` · shots: ${swapped.length} swapped` + (notes ? ` (${notes})` : "");
  if (kept.length) {
    text += `, ${kept.length} kept original (frames ${kept[0].first}-${kept[0].last}` +
      (kept[0].reasons?.length ? `: ${kept[0].reasons[0]}` : "") + ")";
  }
  return text;
}

// The per-frame chart as a widget of its own: the layout reserves its height, so the report plot
// preview below it (the node's image output) no longer paints over it. Click a frame for details.
function qaChartWidget(node) {
  let w = node.widgets?.find((x) => x.name === "swapline_qa_chart");
  if (w) return w;
  w = node.addCustomWidget({
    name: "swapline_qa_chart",
    type: "swapline.qa_chart",
    value: null,
    serialize: false,
    options: { serialize: false },
    hits: [],
    draw(ctx, n, width, y) {
      if (!n.swaplineQA) return;
      ctx.save();
      ctx.translate(MARGIN, y + 4);
      this.hits = drawQAChart(ctx, n.swaplineQA, width - 2 * MARGIN, CHART_H);
      ctx.restore();
    },
    computeSize(width) {
      return [width, CHART_H + 8];
    },
    onPointerDown(pointer, n, canvas) {
      pointer.onClick = (e) => {
        const x = (e?.canvasX ?? canvas.graph_mouse[0]) - n.pos[0] - MARGIN;
        swaplineSelectFrame(n, x);
      };
      return true;
    },
  });
  growToFit(node);
  return w;
}

// Select the frame nearest to chart x (chart coordinates): shows its metrics in the "qa" line.
function swaplineSelectFrame(node, x) {
  const hits = node.widgets?.find((w) => w.name === "swapline_qa_chart")?.hits;
  if (!hits?.length || !node.swaplineQA) return null;
  const nearest = hits.reduce((a, b) => (Math.abs(b.x - x) < Math.abs(a.x - x) ? b : a));
  const frame = node.swaplineQA.frames.find((f) => f.index === nearest.frame);
  statusWidget(node, "qa").value = frameText(frame);
  const preview = node.imgs && node.imgs.length > 1 ? nearest.frame % node.imgs.length : null;
  if (preview != null) node.imageIndex = preview;
  node.setDirtyCanvas(true, true);
  return frame;
}

// "12 face(s) swapped · 3 left untouched (head turned 2, too small 1)"; the full reason of one
// refusal per kind is in the node's report (and the history's swapline_swap.skipped_reasons).
function swapText(s) {
  const skipped = Object.entries(s?.skipped || {});
  const n = skipped.reduce((a, [, v]) => a + v, 0);
  let text = `${s?.faces_swapped ?? "?"} face(s) swapped`;
  if (n) text += ` · ${n} left untouched (` + skipped.map(([k, v]) => `${k} ${v}`).join(", ") + ")";
  return text;
}

app.registerExtension({
  name: "swapline.ui",
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!nodeData.name?.startsWith("Swapline")) return;
    const onExecuted = nodeType.prototype.onExecuted;
    nodeType.prototype.onExecuted = function (message) {
      onExecuted?.apply(this, arguments);
      if (message?.swapline_signing) {
        const s = message.swapline_signing[0];
        const r = s.results?.[0];
        statusWidget(this, "signing").value = `${s.status}` + (r?.state ? ` · ${r.state}` : "") +
          (r?.error ? ` (${r.error})` : "");
      }
      if (message?.swapline_swap) {
        // Swap Faces / Swap Faces in Frames: refused faces are left untouched, and said so here.
        statusWidget(this, "swap").value = swapText(message.swapline_swap[0]);
      }
      if (message?.swapline_restore) {
        // Restore Faces: faces a Swap Faces before it refused are not restored either.
        const r = message.swapline_restore[0];
        statusWidget(this, "restore").value = `${r.faces_restored} face(s) restored` +
          (r.faces_left_as_refused ? ` · ${r.faces_left_as_refused} refused by the swap, left untouched` : "");
      }
      if (message?.swapline_qa) {
        this.swaplineQA = message.swapline_qa[0];
        const untouched = Object.values(this.swaplineQA.summary?.faces_skipped || {}).reduce((a, v) => a + v, 0);
        statusWidget(this, "qa").value = `${this.swaplineQA.decision}: ` +
          `${this.swaplineQA.summary?.fail ?? 0} failing frame(s)` +
          (untouched ? ` · ${untouched} face(s) refused by the swap, left untouched` : "") +
          segmentText(this.swaplineQA.segments);
        qaChartWidget(this);
      }
      if (message?.swapline_selection) {
        const frames = message.swapline_selection[0].frames || [];
        const first = frames[0];
        if (first) {
          statusWidget(this, "selection").value = (first.similarity || [])
            .map((s, i) => `#${i}: ${s == null ? "n/a" : s.toFixed(2)}`).join("  ") || "no face selected";
        }
      }
      this.setDirtyCanvas(true, true);
    };
  },
  async setup() {
    // A missing model shows the models page (docs/models.md) next to ComfyUI's own error text.
    const api = (await import("../../../scripts/api.js")).api;
    api.addEventListener("execution_error", ({ detail }) => {
      if (!detail?.node_type?.startsWith("Swapline")) return;
      if (/was not found|cannot be used/.test(detail.exception_message || "")) {
        // ComfyUI's own dialog shows the node's message (file + folders searched); this adds
        // where to get the model, through the frontend's public toast API.
        app.extensionManager?.toast?.add({
          severity: "error", life: 20000, summary: "Swapline: model missing or unusable",
          detail: `${detail.exception_message}\nWhere to get it: ${README_MODELS}`,
        });
        console.warn(`[Swapline] ${detail.exception_message}\nModels: ${README_MODELS}`);
      }
    });
  },
});
