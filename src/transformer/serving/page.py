"""The page at ``/``: type or paste text, pick a model, read the translation and a sentence's attention.

One self-contained HTML document (inline style and script, nothing loaded from the network). It calls the
server's own API: ``GET /v1/models`` for the menu, ``POST /v1/translate/stream`` for the translation (words shown as they come; ``POST
/v1/translate`` with HTML or the Stream box cleared), and shows
``GET /v1/attention`` (the existing attention viewer, :mod:`transformer.visualization.attention_html`) in
a frame for the sentence the user picks. The query string ``?text=...&model=...&attention=N`` fills the
form, translates at once and opens sentence N's attention: a link to share a result, and how the
browser test drives the page.
"""

PAGE_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1100px; padding: 1rem; color: #222; }
h1 { font-size: 1.3rem; margin: 0 0 .8rem; }
form { display: grid; gap: .6rem; }
textarea { width: 100%; min-height: 8rem; font: inherit; padding: .5rem; box-sizing: border-box; }
textarea#glossary { min-height: 3rem; }
.controls { display: flex; gap: 1rem; align-items: center; flex-wrap: wrap; }
button { font: inherit; padding: .35rem .9rem; cursor: pointer; }
#translation { white-space: pre-wrap; border: 1px solid #ccc; padding: .6rem; min-height: 2rem; background: #fafafa; }
#status { color: #666; font-size: .9rem; min-height: 1.2rem; }
#status.error { color: #b00020; }
table { border-collapse: collapse; width: 100%; margin-top: .6rem; }
td, th { border-bottom: 1px solid #eee; padding: .3rem .4rem; text-align: left; vertical-align: top; }
tr.chosen { background: #eef4ff; }
iframe { width: 100%; height: 720px; border: 1px solid #ccc; margin-top: .8rem; }
"""

PAGE_BODY = """
<h1>Transformer translation</h1>
<form id="form">
  <textarea id="text" placeholder="Type or paste text; each sentence is translated on its own."></textarea>
  <textarea id="glossary" aria-label="glossary" placeholder="Glossary (optional): one 'source term = target term' per line; the translation uses each target term where its source term occurs"></textarea>
  <div class="controls">
    <label>Model <select id="model"></select></label>
    <label>Beam <input id="beam" type="number" min="1" max="16" size="3"></label>
    <label title="omissions, hallucinations and loops, with their words"><input id="flags" type="checkbox" checked> Flags</label>
    <label title="detect the text's language; a language the model does not translate is refused"><input id="detect" type="checkbox"> Detect language</label>
    <label title="the text is HTML: inline tags are kept around the words they cover"><input id="html" type="checkbox"> HTML</label>
    <label title="show the words as they become certain (POST /v1/translate/stream; not with HTML)"><input id="stream" type="checkbox" checked> Stream</label>
    <label id="key-label" hidden>API key <input id="key" type="password" size="20"></label>
    <button id="submit" type="submit">Translate</button>
  </div>
</form>
<p id="status" role="status"></p>
<div id="translation" aria-label="translation"></div>
<table id="sentences" hidden>
  <thead><tr><th>#</th><th>Source</th><th>Translation</th><th>Score</th><th>Confidence</th><th>Flags</th><th></th></tr></thead>
  <tbody></tbody>
</table>
<iframe id="attention" title="attention maps" hidden></iframe>
"""

PAGE_SCRIPT = """
"use strict";
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(window.location.search);
let lastResult = null;
const attentionByModel = {};
const flagsByModel = {};

function setStatus(message, isError) {
  $("status").textContent = message;
  $("status").className = isError ? "error" : "";
}

function headers() {
  const result = {"Content-Type": "application/json"};
  if ($("key").value) result["Authorization"] = "Bearer " + $("key").value;
  return result;
}

async function loadModels() {
  const reply = await fetch("/v1/models");
  const data = await reply.json();
  for (const model of data.models) {
    attentionByModel[model.name] = model.attention;
    flagsByModel[model.name] = model.flags;
    const option = document.createElement("option");
    option.value = model.name;
    option.textContent = model.name + " (" + model.source + " \\u2192 " + model.target + ")";
    $("model").appendChild(option);
  }
  $("model").value = params.get("model") || data.default;
}

async function translate() {
  const body = {text: $("text").value, model: $("model").value};
  if ($("beam").value) body.beam = Number($("beam").value);
  if ($("flags").checked && flagsByModel[body.model]) body.flags = true;  // not for CTranslate2 models
  if ($("detect").checked) body.source = "auto";
  if ($("html").checked) body.format = "html";
  setStatus("Translating\\u2026", false);
  $("submit").disabled = true;
  try {
    const glossary = glossaryPairs($("glossary").value);
    if (glossary.length) body.glossary = glossary;
    const streamed = $("stream").checked && !body.format;
    const reply = await fetch(streamed ? "/v1/translate/stream" : "/v1/translate",
                              {method: "POST", headers: headers(), body: JSON.stringify(body)});
    if (!reply.ok) {
      const failure = await reply.json();
      throw new Error(reply.status + ": " + (typeof failure.detail === "string" ? failure.detail : JSON.stringify(failure)));
    }
    const data = streamed ? await readStream(reply) : await reply.json();
    lastResult = data;
    showResult(data);
    const detected = data.detected_language
      ? " Detected language: " + data.detected_language.language + " (" + (100 * data.detected_language.confidence).toFixed(0) + "%)."
      : "";
    setStatus("Translated in " + data.timing.total_ms.toFixed(1) + " ms." + detected, false);
  } catch (error) {
    setStatus(String(error.message || error), true);
  } finally {
    $("submit").disabled = false;
  }
}

async function readStream(reply) {
  // Server-Sent Events over the POST's body: "piece" events grow each sentence's certain words (shown as they
  // come), "done" carries /v1/translate's answer, "error" a model failure.
  const reader = reply.body.getReader();
  const decoder = new TextDecoder();
  $("translation").dataset.pieces = "0";  // how many pieces came: what a reader (and the browser test) sees
  const sentences = [];
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) throw new Error("the stream ended before its answer");
    buffer += decoder.decode(value, {stream: true}).replace(/\\r\\n/g, "\\n");
    let end;
    while ((end = buffer.indexOf("\\n\\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let kind = "message";
      const data = [];
      for (const line of block.split("\\n")) {
        if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (!data.length) continue;  // a keep-alive comment
      const payload = JSON.parse(data.join("\\n"));
      if (kind === "error") throw new Error(payload.detail);
      if (kind === "done") return payload;
      if (kind === "piece" && payload.text === 0) {
        sentences[payload.sentence] = payload.translation;
        $("translation").textContent = sentences.filter((item) => item !== undefined).join(" ");
        $("translation").dataset.pieces = String(Number($("translation").dataset.pieces || 0) + 1);
      }
    }
  }
}

function glossaryPairs(text) {
  // "source = target" or "source<TAB>target" per line; blank lines skipped; anything else is refused.
  const pairs = [];
  text.split(/\\r?\\n/).forEach((line, index) => {
    if (!line.trim()) return;
    const parts = line.includes("\\t") ? line.split("\\t") : line.split(" = ");
    if (parts.length !== 2 || !parts[0].trim() || !parts[1].trim()) {
      throw new Error("glossary line " + (index + 1) + ": expected 'source term = target term'");
    }
    pairs.push([parts[0].trim(), parts[1].trim()]);
  });
  return pairs;
}

function flagText(sentence) {
  // Each flag with the words that are its evidence: the source's for an omission, else the translation's.
  return (sentence.flags || []).map((flag) => {
    const span = flag.source_span || flag.target_span;
    const words = (flag.source_span ? sentence.source : sentence.translation).split(/\\s+/).filter(Boolean);
    return flag.kind + ": " + words.slice(span[0], span[1]).join(" ");
  }).join("; ");
}

function showResult(data) {
  $("translation").textContent = data.translation;
  const body = $("sentences").querySelector("tbody");
  body.replaceChildren();
  data.sentences[0].forEach((sentence, index) => {
    const row = document.createElement("tr");
    row.dataset.index = String(index);
    for (const value of [String(index), sentence.source, sentence.translation,
                         sentence.score === null ? "" : sentence.score.toFixed(3),
                         sentence.confidence === null ? "" : sentence.confidence.toFixed(2),
                         flagText(sentence)]) {
      const cell = document.createElement("td");
      cell.textContent = value;
      row.appendChild(cell);
    }
    const cell = document.createElement("td");
    if (attentionByModel[data.model]) {  // not for CTranslate2, int8 or recurrent models
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "attention";
      button.addEventListener("click", () => showAttention(index));
      cell.appendChild(button);
    }
    row.appendChild(cell);
    body.appendChild(row);
  });
  $("sentences").hidden = data.sentences[0].length === 0;
}

function showAttention(index) {
  const sentence = lastResult.sentences[0][index];
  document.querySelectorAll("#sentences tr.chosen").forEach((row) => row.classList.remove("chosen"));
  document.querySelector("#sentences tr[data-index='" + index + "']").classList.add("chosen");
  const query = new URLSearchParams({source: sentence.source, translation: sentence.translation,
                                     model: lastResult.model});
  if ($("key").value) query.set("api_key", $("key").value);
  // Open on encoder-decoder attention, averaged over heads: what a translation's reader asks first.
  $("attention").src = "/v1/attention?" + query.toString() + "#kind=cross&layer=0&head=mean";
  $("attention").hidden = false;
}

$("form").addEventListener("submit", (event) => { event.preventDefault(); translate(); });

(async () => {
  $("key-label").hidden = !document.body.dataset.keys;
  await loadModels();
  if (params.has("text")) {
    $("text").value = params.get("text");
    if (params.has("beam")) $("beam").value = params.get("beam");
    if (params.get("flags") === "0") $("flags").checked = false;
    if (params.get("detect") === "1") $("detect").checked = true;
    if (params.get("html") === "1") $("html").checked = true;
    if (params.get("stream") === "0") $("stream").checked = false;
    if (params.has("glossary")) $("glossary").value = params.get("glossary");
    await translate();
    if (params.has("attention") && lastResult) showAttention(Number(params.get("attention")));
  }
})();
"""


def render_index_page(needs_key: bool) -> str:
    """Assemble the translation page.

    Parameters
    ----------
    needs_key : bool
        Whether the server has API keys (the page then shows a key field).

    Returns
    -------
    str
        A complete HTML document.

    Notes
    -----
    Everything dynamic (model names, translations, sentences) is inserted with ``textContent``, never as
    markup, so a translation holding ``<script>`` shows as text.
    """
    keys = ' data-keys="1"' if needs_key else ""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            '<head>\n<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<title>Transformer translation</title>",
            f"<style>{PAGE_STYLE}</style>",
            "</head>",
            f"<body{keys}>{PAGE_BODY}",
            f"<script>{PAGE_SCRIPT}</script>",
            "</body>",
            "</html>\n",
        ]
    )
