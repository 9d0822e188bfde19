// Editor workflows saved before the QA gate's limits moved to the QA Limit Overrides node store the
// gate's widget values by position in the old order (8, 17, 18 or 19 values). Loaded as they are,
// -1 lands in limit_set and sample_every and the server refuses the prompt. This re-reads such a
// gate's values by name and moves every limit that was set (not -1) to a new QA Limit Overrides
// node linked to the gate's 'limits' input, then says so in a notice: nothing is silently lost.
// Official hooks only: onConfigure (via beforeRegisterNodeDef) sees the saved values, and
// afterConfigureGraph runs once the graph's nodes and links exist.
import { app } from "../../../scripts/app.js";

const GATE = "SwaplineQAGate";
const OVERRIDES = "SwaplineQALimitOverrides";
const OVERRIDES_TITLE = "QA Limit Overrides";
const UNSET = -1;
// The gate's widgets in the order the old layouts saved them; each old layout is a prefix of this
// one (inputs were only ever appended).
const OLD_ORDER = ["policy", "min_identity", "max_leakage", "max_landmark_drift", "max_flicker_ratio",
  "require_redetection", "sample_every", "filename_prefix", "max_mouth_delta", "min_expression_corr",
  "max_occluder_overwrite", "max_colour_cast", "max_seam_ratio", "max_bleed", "max_offface", "min_coverage",
  "allow_no_face", "max_safety_score", "limit_set"];
const OLD_LENGTHS = [8, 17, 18, 19];
const OLD_LIMITS = new Set(["min_identity", "max_leakage", "max_landmark_drift", "max_flicker_ratio",
  "max_mouth_delta", "min_expression_corr", "max_occluder_overwrite", "max_colour_cast", "max_seam_ratio",
  "max_bleed", "max_offface", "min_coverage"]);

// The old layout has a number (min_identity) where the new one has the limit_set name, a boolean
// (require_redetection) at 5 and the filename prefix at 7.
function isOldLayout(values) {
  return Array.isArray(values) && OLD_LENGTHS.includes(values.length) && typeof values[0] === "string" &&
    typeof values[1] === "number" && typeof values[5] === "boolean" && typeof values[6] === "number" &&
    typeof values[7] === "string";
}

function defaultsOf(nodeData) {
  const out = {};
  for (const group of [nodeData.input?.required, nodeData.input?.optional]) {
    for (const [name, spec] of Object.entries(group || {})) {
      if (Array.isArray(spec) && spec[1] && "default" in spec[1]) out[name] = spec[1].default;
    }
  }
  return out;
}

function fmt(limits) {
  return Object.entries(limits).map(([k, v]) => `${k} ${v}`).join(", ");
}

// Set the gate's widgets by name from an old-layout array; returns the limits that were set.
function remapGate(node, values, defaults) {
  const old = Object.fromEntries(OLD_ORDER.slice(0, values.length).map((name, i) => [name, values[i]]));
  for (const w of node.widgets || []) {
    if (w.serialize === false || OLD_LIMITS.has(w.name)) continue;
    if (w.name in old) w.value = old[w.name];
    else if (w.name in defaults) w.value = defaults[w.name];  // newer than the saved layout
  }
  const limits = {};
  for (const [name, value] of Object.entries(old)) {
    if (OLD_LIMITS.has(name) && typeof value === "number" && value !== UNSET) limits[name] = value;
  }
  // the old node was much taller (19 widgets); shrink to what the new layout needs
  const min = node.computeSize?.();
  if (min && node.size[1] > min[1]) node.setSize([node.size[0], min[1]]);
  return limits;
}

// A QA Limit Overrides node with ``limits`` set, linked to the gate's 'limits' input. Returns the new
// node, or throws with the reason it could not be made.
function addOverridesNode(gate, limits) {
  const graph = gate.graph;
  const slot = gate.findInputSlot?.("limits") ?? -1;
  if (!graph || slot < 0) throw new Error("the gate has no 'limits' input (is the server's Swapline older?)");
  if (gate.inputs[slot].link != null) throw new Error("the gate's 'limits' input is already linked");
  const node = globalThis.LiteGraph?.createNode(OVERRIDES);
  if (!node) throw new Error(`node type ${OVERRIDES} is not known to this server`);
  for (const [name, value] of Object.entries(limits)) {
    const w = node.widgets?.find((x) => x.name === name);
    if (!w) throw new Error(`${OVERRIDES_TITLE} has no '${name}' widget`);
    w.value = value;
  }
  node.pos = [gate.pos[0], gate.pos[1] + gate.size[1] + 2 * (globalThis.LiteGraph?.NODE_TITLE_HEIGHT ?? 30)];
  graph.add(node);
  if (!node.connect(0, gate, slot)) {
    graph.remove(node);
    throw new Error("linking it to the gate's 'limits' input failed");
  }
  return node;
}

function notify(severity, summary, detail) {
  const log = severity === "error" ? console.error : console.warn;
  log(`[Swapline] ${summary}: ${detail}`);
  // an error stays until closed; the notice of a done move goes after 20 s
  app.extensionManager?.toast?.add({ severity, summary, detail, ...(severity === "error" ? {} : { life: 20000 }) });
}

// Moves the limits an old-layout gate still holds (node.swaplineLegacyLimits) onto a new overrides
// node; idempotent, so both the graph hook and the fallback timer may call it.
function settle(gate) {
  const limits = gate.swaplineLegacyLimits;
  if (!limits || !gate.graph) return;
  delete gate.swaplineLegacyLimits;
  const where = `QA Gate #${gate.id}`;
  try {
    const node = addOverridesNode(gate, limits);
    notify("warn", "Swapline: QA limits moved",
      `${where} was saved before its limits moved to ${OVERRIDES_TITLE}: its widgets were re-read by name, ` +
      `and ${fmt(limits)} now set on the new ${OVERRIDES_TITLE} node #${node.id} linked to its 'limits' ` +
      "input. Save the workflow to keep the new layout.");
  } catch (e) {
    // keep the values on the node, where a saved workflow keeps them too, and say what to do
    gate.properties.swapline_unapplied_limits = { ...limits };
    notify("error", "Swapline: QA limits not applied",
      `${where} was saved with ${fmt(limits)}, which now belong on a ${OVERRIDES_TITLE} node; ` +
      `one could not be added (${e.message}). Add a ${OVERRIDES_TITLE} node, set ${fmt(limits)} on it ` +
      "and link it to the gate's 'limits' input; until then the gate uses its limit set for them.");
  }
  gate.setDirtyCanvas?.(true, true);
}

function allNodes(graph) {
  const graphs = [graph, ...(graph?.subgraphs?.values?.() ?? [])];
  return graphs.flatMap((g) => g?.nodes ?? []);
}

app.registerExtension({
  name: "swapline.qa_gate_legacy",
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (nodeData.name !== GATE) return;
    const defaults = defaultsOf(nodeData);
    const onConfigure = nodeType.prototype.onConfigure;
    nodeType.prototype.onConfigure = function (info) {
      const r = onConfigure?.apply(this, arguments);
      if (isOldLayout(info?.widgets_values)) {
        const limits = remapGate(this, info.widgets_values, defaults);
        const linked = (info.inputs || []).filter((i) => OLD_LIMITS.has(i.name) && i.link != null).map((i) => i.name);
        if (linked.length) {
          notify("error", "Swapline: QA gate inputs moved",
            `QA Gate #${this.id} has ${linked.join(", ")} linked as its own input; the gate has no such input ` +
            `any more: link ${linked.length > 1 ? "them" : "it"} to a ${OVERRIDES_TITLE} node's input of the ` +
            "same name and that node to the gate's 'limits' input.");
        }
        if (Object.keys(limits).length) {
          this.swaplineLegacyLimits = limits;
          // pasted or otherwise configured outside loadGraphData: no afterConfigureGraph follows
          setTimeout(() => settle(this), 0);
        } else {
          console.info(`[Swapline] QA Gate #${this.id}: widgets saved in the old layout re-read by name ` +
            "(no limit was set, nothing moved)");
        }
      }
      return r;
    };
  },
  async afterConfigureGraph() {
    for (const node of allNodes(app.graph)) {
      if (node.type === GATE) settle(node);
    }
  },
});
