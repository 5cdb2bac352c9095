r"""The attention page's document: style, script and markup around the data, in one self-contained HTML file.

The page needs no network: styles, script and data are inline. Tokens reach the page only as JSON inside a
``<script type="application/json">`` element (with ``<``, ``>`` and ``&`` written as ``\u003c`` and so on)
and are put into the document with ``textContent``, so a token such as ``</script>`` is shown literally.
The data is built by :func:`transformer.visualization.attention_html.build_attention_payload`.
"""

import html
import json
from typing import Any

PAGE_STYLE = """
:root { color-scheme: light; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
body { margin: 0; background: #f6f7f9; color: #1f2933; }
header { padding: 14px 24px 6px; }
h1 { font-size: 20px; margin: 0 0 2px; font-weight: 600; }
.controls { display: flex; flex-wrap: wrap; gap: 10px 22px; padding: 8px 24px; align-items: center; }
.group { display: flex; align-items: center; gap: 6px; flex-wrap: wrap; }
.group-label { font-size: 12px; text-transform: uppercase; letter-spacing: .06em; color: #616e7c; }
button { font: inherit; font-size: 13px; border: 1px solid #cbd2d9; background: #fff; color: #1f2933;
  border-radius: 6px; padding: 4px 10px; cursor: pointer; }
button:hover { border-color: #7b8794; }
button.active { background: #1f2933; border-color: #1f2933; color: #fff; }
label.option { font-size: 13px; display: flex; align-items: center; gap: 4px; }
#description { padding: 2px 24px 10px; font-size: 13px; color: #52606d; }
main { display: flex; align-items: flex-start; gap: 18px; padding: 0 24px 24px; }
#heatmaps { display: grid; gap: 14px; flex: none; }
.panel { background: #fff; border: 1px solid #e4e7eb; border-radius: 8px; padding: 8px 10px 10px; }
.panel-title { font-size: 13px; font-weight: 600; margin-bottom: 4px; }
.panel.clickable { cursor: pointer; }
.panel.clickable:hover { border-color: #9aa5b1; }
.panel-title.clickable { color: #2c5282; }
.panel.clickable:hover .panel-title { text-decoration: underline; }
table.heatmap { border-collapse: collapse; font-size: clamp(8px, calc(var(--cell) * 0.55), 14px); }
table.heatmap td { width: var(--cell); min-width: var(--cell); max-width: var(--cell); height: var(--cell);
  padding: 0; text-align: center; font-size: 10px; font-variant-numeric: tabular-nums; }
table.heatmap td.masked { background: repeating-linear-gradient(135deg, #eef0f3 0 4px, #e1e5ea 4px 8px); }
table.heatmap td:hover { outline: 2px solid #ff4d4d; outline-offset: -2px; }
table.heatmap th { font-weight: 400; color: #323f4b; white-space: pre; padding: 0; }
table.heatmap th.query { text-align: right; padding-right: 6px; }
table.heatmap th.key { vertical-align: bottom; padding-bottom: 6px; width: var(--cell); max-width: var(--cell); }
table.heatmap th.key span { writing-mode: vertical-rl; transform: rotate(180deg); }
table.heatmap th.highlight { color: #d62828; font-weight: 700; }
table.heatmap.no-labels th { font-size: 0; padding: 0; }
#legend { display: flex; gap: 6px; align-items: stretch; position: sticky; top: 16px; }
#legend-bar { width: 14px; height: 220px; border-radius: 3px; }
#legend-ticks { display: flex; flex-direction: column; justify-content: space-between; font-size: 11px; }
#tooltip { position: fixed; pointer-events: none; background: #1f2933; color: #fff; padding: 6px 9px;
  border-radius: 6px; font-size: 12px; line-height: 1.45; white-space: pre; z-index: 10; }
#tooltip .weight { font-size: 15px; font-weight: 700; }
footer { padding: 0 24px 18px; font-size: 12px; color: #7b8794; }
"""

PAGE_SCRIPT = """
"use strict";
const data = JSON.parse(document.getElementById("attention-data").textContent);
const state = { kind: 0, layer: 0, head: "all", scale: "view", showValues: false };
const tooltip = document.getElementById("tooltip");

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;  // never innerHTML: tokens are shown literally
  return node;
}
const kind = () => data.kinds[state.kind];
const numHeads = () => kind().layers[state.layer].length;

function panels() {
  const heads = kind().layers[state.layer];
  if (state.head === "all") return heads.map((matrix, head) => ({ title: "head " + head, matrix, head }));
  if (state.head === "mean") {
    const mean = heads[0].map((row, q) => row.map((_, k) => heads.reduce((s, m) => s + m[q][k], 0) / heads.length));
    return [{ title: "average of " + heads.length + " heads", matrix: mean, head: null }];
  }
  return [{ title: "head " + state.head, matrix: heads[state.head], head: state.head }];
}

function scaleMax(shown) {
  if (state.scale === "unit") return 1;
  let max = 0;
  for (const panel of shown) for (const row of panel.matrix) for (const w of row) max = Math.max(max, w);
  return max > 0 ? max : 1;
}

function colourOf(weight, vmax) {
  const fraction = Math.min(1, Math.max(0, weight / vmax));
  return data.colormap[Math.round(fraction * (data.colormap.length - 1))];
}

function gridColumns(count) {  // at most 4 per row, filled evenly: 8 heads are 2 rows of 4
  return Math.ceil(count / Math.ceil(count / 4));
}

function cellSize(count) {  // pixels per cell; below 9 the token labels are hidden (see buildTable)
  const longest = Math.max(kind().query_tokens.length, kind().key_tokens.length);
  if (count === 1) return Math.max(10, Math.min(46, Math.floor(620 / longest)));
  const panelWidth = (window.innerWidth - 160) / gridColumns(count);  // minus legend and margins
  const labelled = Math.floor(Math.min(260, panelWidth - 100) / longest);  // 100: room for labels
  if (labelled >= 9) return Math.min(22, labelled);
  return Math.max(4, Math.floor(Math.min(260, panelWidth - 30) / longest));
}

function buildTable(panel, cell, vmax) {
  const table = element("table", "heatmap" + (cell < 9 ? " no-labels" : ""));
  table.style.setProperty("--cell", cell + "px");
  const header = table.createTHead().insertRow();
  header.appendChild(element("th", "corner"));
  for (const token of kind().key_tokens) header.appendChild(element("th", "key")).appendChild(element("span", "", token));
  const body = table.createTBody();
  panel.matrix.forEach((row, q) => {
    const tr = body.insertRow();
    tr.appendChild(element("th", "query", kind().query_tokens[q]));
    row.forEach((weight, k) => {
      const td = tr.insertCell();
      td.dataset.query = q;
      td.dataset.key = k;
      if (kind().causal && k > q) {  // a future position: masked, not merely small
        td.className = "masked";
        return;
      }
      td.style.background = colourOf(weight, vmax);
      if (state.showValues && cell >= 30) {
        td.textContent = weight.toFixed(2);
        td.style.color = weight / vmax > 0.6 ? "#1f2933" : "#fff";
      }
    });
  });
  table.addEventListener("mouseover", (event) => showTooltip(event, panel, table));
  table.addEventListener("mousemove", moveTooltip);
  table.addEventListener("mouseleave", () => { tooltip.hidden = true; clearHighlight(table); });
  return table;
}

function clearHighlight(table) {
  for (const th of table.querySelectorAll("th.highlight")) th.classList.remove("highlight");
}

function showTooltip(event, panel, table) {
  clearHighlight(table);
  const cell = event.target.closest("td");
  if (!cell) { tooltip.hidden = true; return; }
  const q = Number(cell.dataset.query), k = Number(cell.dataset.key);
  table.tBodies[0].rows[q].cells[0].classList.add("highlight");
  table.tHead.rows[0].cells[k + 1].classList.add("highlight");
  const masked = cell.classList.contains("masked");
  tooltip.replaceChildren(
    element("div", "weight", masked ? "masked (future position)" : panel.matrix[q][k].toFixed(4)),
    element("div", "", "query " + q + " (" + kind().query_axis + "): " + kind().query_tokens[q]),
    element("div", "", "key " + k + " (" + kind().key_axis + "): " + kind().key_tokens[k]),
    element("div", "", kind().label + ", layer " + state.layer + ", " + panel.title));
  tooltip.hidden = false;
  moveTooltip(event);
}

function moveTooltip(event) {
  const x = Math.min(event.clientX + 14, window.innerWidth - tooltip.offsetWidth - 8);
  tooltip.style.left = x + "px";
  tooltip.style.top = event.clientY + 14 + "px";
}

function buttonGroup(id, options, active, choose) {
  document.getElementById(id).replaceChildren(...options.map(([label, value]) => {
    const button = element("button", value === active ? "active" : "", label);
    button.type = "button";
    button.addEventListener("click", () => { choose(value); render(); });
    return button;
  }));
}

function renderControls() {
  buttonGroup("kind-buttons", data.kinds.map((k, i) => [k.label, i]), state.kind, (value) => {
    state.kind = value;
    state.layer = Math.min(state.layer, kind().layers.length - 1);
  });
  buttonGroup("layer-buttons", kind().layers.map((_, i) => [String(i), i]), state.layer, (v) => { state.layer = v; });
  const heads = [...Array(numHeads()).keys()].map((h) => [String(h), h]);
  buttonGroup("head-buttons", [...heads, ["all", "all"], ["average", "mean"]], state.head, (v) => { state.head = v; });
  buttonGroup("scale-buttons", [["view max", "view"], ["0 to 1", "unit"]], state.scale, (v) => { state.scale = v; });
}

function renderLegend(vmax) {
  const stops = data.colormap.filter((_, i) => i % 16 === 0 || i === data.colormap.length - 1);
  document.getElementById("legend-bar").style.background = "linear-gradient(to top, " + stops.join(", ") + ")";
  document.getElementById("legend-ticks").replaceChildren(
    ...[vmax, vmax * 0.75, vmax / 2, vmax / 4, 0].map((v) => element("span", "", v.toFixed(3))));
}

function readHash() {  // e.g. #kind=cross&layer=2&head=5 opens that view
  const params = new URLSearchParams(window.location.hash.slice(1));
  const found = data.kinds.findIndex((k) => k.name === params.get("kind"));
  if (found >= 0) state.kind = found;
  const layer = Number(params.get("layer"));
  if (Number.isInteger(layer) && layer >= 0 && layer < kind().layers.length) state.layer = layer;
  const head = params.get("head");
  if (head === "all" || head === "mean") state.head = head;
  else if (head !== null && Number.isInteger(Number(head)) && Number(head) >= 0 && Number(head) < numHeads()) {
    state.head = Number(head);
  }
}

function render() {
  const hash = "kind=" + kind().name + "&layer=" + state.layer + "&head=" + state.head;
  history.replaceState(null, "", "#" + hash);
  renderControls();
  const shown = panels();
  const vmax = scaleMax(shown);
  const cell = cellSize(shown.length);
  document.getElementById("description").textContent = kind().label + ", layer " + state.layer + " of 0\\u2013" +
    (kind().layers.length - 1) + ". Rows: " + kind().query_axis + " tokens (queries); columns: " +
    kind().key_axis + " tokens (keys). " + kind().note;
  const grid = document.getElementById("heatmaps");
  grid.style.gridTemplateColumns = "repeat(" + gridColumns(shown.length) + ", auto)";
  grid.replaceChildren(...shown.map((panel) => {
    const box = element("div", "panel");
    const title = box.appendChild(element("div", "panel-title", panel.title));
    if (shown.length > 1) {  // in the grid, a click on a head opens it alone
      title.classList.add("clickable");
      box.classList.add("clickable");
      box.addEventListener("click", () => { tooltip.hidden = true; state.head = panel.head; render(); });
    }
    box.appendChild(buildTable(panel, cell, vmax));
    return box;
  }));
  renderLegend(vmax);
}

document.getElementById("show-values").addEventListener("change", (event) => {
  state.showValues = event.target.checked;
  render();
});
document.addEventListener("keydown", (event) => {
  const order = [...Array(numHeads()).keys(), "all", "mean"];
  const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
  if (step) state.head = order[(order.indexOf(state.head) + step + order.length) % order.length];
  else if (event.key === "ArrowUp" || event.key === "ArrowDown") {
    state.layer = Math.max(0, Math.min(kind().layers.length - 1, state.layer + (event.key === "ArrowUp" ? -1 : 1)));
  } else if (["1", "2", "3"].includes(event.key) && Number(event.key) <= data.kinds.length) {
    state.kind = Number(event.key) - 1;
    state.layer = Math.min(state.layer, kind().layers.length - 1);
  } else return;
  event.preventDefault();
  render();
});
window.addEventListener("hashchange", () => { readHash(); render(); });
readHash();
render();
"""

PAGE_BODY = """
<div class="controls">
  <div class="group"><span class="group-label">Attention</span><span class="group" id="kind-buttons"></span></div>
  <div class="group"><span class="group-label">Layer</span><span class="group" id="layer-buttons"></span></div>
  <div class="group"><span class="group-label">Head</span><span class="group" id="head-buttons"></span></div>
  <div class="group"><span class="group-label">Colour scale</span><span class="group" id="scale-buttons"></span></div>
  <label class="option"><input type="checkbox" id="show-values">show values</label>
</div>
<div id="description"></div>
<main>
  <div id="heatmaps"><noscript>This page draws its heatmaps with JavaScript; please enable it.</noscript></div>
  <div id="legend"><div id="legend-bar"></div><div id="legend-ticks"></div></div>
</main>
<footer>Hover a cell for its weight; click a head in the grid to open it. Keys: &larr;/&rarr; head, &uarr;/&darr; layer, 1/2/3 attention kind.
Layers and heads are numbered from 0.</footer>
<div id="tooltip" hidden></div>
"""


def encode_script_json(payload: dict[str, Any]) -> str:
    r"""Serialise data as JSON that is safe inside an HTML ``<script>`` element.

    Parameters
    ----------
    payload : dict
        JSON-serialisable data.

    Returns
    -------
    str
        Compact JSON with ``<``, ``>``, ``&`` and the JavaScript line separators written as ``\uXXXX``.

    Notes
    -----
    Without the escapes a token ``</script>`` would end the element and the rest would run as markup.
    The escaped text is still valid JSON and parses back to the same strings.
    """
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for character in "<>&\u2028\u2029":
        text = text.replace(character, f"\\u{ord(character):04x}")
    return text


def render_attention_page(payload: dict[str, Any]) -> str:
    """Assemble the HTML page around the attention data.

    Parameters
    ----------
    payload : dict
        Page data from :func:`~transformer.visualization.attention_html.build_attention_payload`;
        ``payload["title"]`` becomes the heading.

    Returns
    -------
    str
        A complete HTML document with inline style, script and data.

    Notes
    -----
    The title is HTML-escaped; everything else from the data is inserted by the script with ``textContent``.
    """
    title = html.escape(str(payload["title"]))
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            '<head>\n<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{title}</title>",
            f"<style>{PAGE_STYLE}</style>",
            "</head>",
            f"<body>\n<header><h1>{title}</h1></header>{PAGE_BODY}",
            f'<script type="application/json" id="attention-data">{encode_script_json(payload)}</script>',
            f"<script>{PAGE_SCRIPT}</script>",
            "</body>",
            "</html>\n",
        ]
    )
