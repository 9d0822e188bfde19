// Swapline editor extension: shows what the API output already carries (ui data), natively.
// Official hooks only (registerExtension / onExecuted via beforeRegisterNodeDef); no patching
// of ComfyUI internals.
import { app } from "../../../scripts/app.js";

const README_MODELS = "https://github.com/swapline/comfyui-swapline#models";

function textWidget(node, name) {
  let w = node.widgets?.find((x) => x.name === name);
  if (!w) {
    w = node.addWidget("text", name, "", () => {}, { serialize: false });
    w.disabled = true;
  }
  return w;
}

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
    ["flicker", "#f2b441", (f) => (f.flicker_ratio == null ? null : Math.min(f.flicker_ratio / 3, 1))],
  ];
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
  return hits;
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
        textWidget(this, "signing").value = `signature: ${s.status}` +
          (s.results?.[0]?.error ? ` (${s.results[0].error})` : "");
      }
      if (message?.swapline_qa) {
        this.swaplineQA = message.swapline_qa[0];
        textWidget(this, "qa").value = `QA ${this.swaplineQA.decision}: ` +
          `${this.swaplineQA.summary?.fail_frames ?? 0} failing frame(s)`;
        this.setDirtyCanvas(true, true);
      }
      if (message?.swapline_selection) {
        const frames = message.swapline_selection[0].frames || [];
        const first = frames[0];
        if (first) {
          textWidget(this, "selection").value = (first.similarity || [])
            .map((s, i) => `#${i}: ${s == null ? "n/a" : s.toFixed(2)}`).join("  ");
        }
      }
    };
    if (nodeData.name === "SwaplineQAGate") {
      const onDrawForeground = nodeType.prototype.onDrawForeground;
      nodeType.prototype.onDrawForeground = function (ctx) {
        onDrawForeground?.apply(this, arguments);
        if (!this.swaplineQA || this.flags?.collapsed) return;
        const h = 140;
        ctx.save();
        ctx.translate(8, this.size[1] - h - 8);
        this.swaplineHits = drawQAChart(ctx, this.swaplineQA, this.size[0] - 16, h);
        ctx.restore();
      };
      const onMouseDown = nodeType.prototype.onMouseDown;
      nodeType.prototype.onMouseDown = function (e, pos) {
        const hits = this.swaplineHits;
        if (hits?.length && pos[1] > this.size[1] - 148) {
          const nearest = hits.reduce((a, b) => (Math.abs(b.x + 8 - pos[0]) < Math.abs(a.x + 8 - pos[0]) ? b : a));
          textWidget(this, "qa").value = `frame ${nearest.frame}: ` +
            JSON.stringify(this.swaplineQA.frames.find((f) => f.index === nearest.frame) || {});
          const preview = this.imgs && this.imgs.length > 1 ? nearest.frame % this.imgs.length : null;
          if (preview != null) this.imageIndex = preview;
          this.setDirtyCanvas(true, true);
          return true;
        }
        return onMouseDown?.apply(this, arguments);
      };
    }
  },
  async setup() {
    // A missing model shows the README's models section next to ComfyUI's own error text.
    const api = (await import("../../../scripts/api.js")).api;
    api.addEventListener("execution_error", ({ detail }) => {
      if (!detail?.node_type?.startsWith("Swapline")) return;
      if (/was not found|cannot be used/.test(detail.exception_message || "")) {
        console.warn(`[Swapline] ${detail.exception_message}\nModels: ${README_MODELS}`);
      }
    });
  },
});
