"""Labelling sheets: the pairs people label to calibrate the judge, as CSV and as a self-contained HTML
page (radio buttons, a button that downloads the labels as the CSV that ``silver agreement`` reads).

Annotators see what the judge sees (the query, the marker, the gold sentence, and the passage
``query. Marker, gold``) and, as in the paper, the judge's own instructions for the move. Rows are in a
seeded hash order, so moves and markers are mixed and no order effect follows the table's.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd

from ratio_spark.silver.pairs import judge_text
from ratio_spark.silver.prompts import JudgePrompt
from ratio_spark.silver.sampling import stable_rank_key

SHEET_COLUMNS = ["query_id", "move", "marker", "query", "gold", "passage", "annotator", "label", "note"]


def sheet_rows(pairs: pd.DataFrame, *, seed: int, annotator: str = "") -> pd.DataFrame:
    rows = pd.DataFrame({
        "query_id": pairs["query_id"], "move": pairs["move"], "marker": pairs["marker"],
        "query": pairs["query_text_original"], "gold": pairs["gold_text_original"],
        "passage": [judge_text(q, m, g) for q, m, g in
                    zip(pairs["query_text_original"], pairs["marker"], pairs["gold_text_original"])],
        "annotator": annotator, "label": "", "note": "",
    })
    order = rows["query_id"].map(lambda q: stable_rank_key(f"sheet:{seed}", q))
    return rows.assign(_o=order).sort_values("_o").drop(columns="_o").reset_index(drop=True)[SHEET_COLUMNS]


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Silver labelling sheet</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; line-height: 1.45; }}
.pair {{ border: 1px solid #ccc; border-radius: 6px; padding: .8rem 1rem; margin: 1rem 0; }}
.pair.done {{ border-color: #2a7; }}
.meta {{ color: #555; font-size: .85rem; }}
.q {{ background: #eef5ff; }} .m {{ font-weight: bold; }} .g {{ background: #fff4e0; }}
details {{ margin: .5rem 0; }} pre {{ white-space: pre-wrap; background: #f6f6f6; padding: .6rem; }}
</style></head><body>
<h1>Silver labelling sheet</h1>
<p>For each pair, decide whether it is a good benchmark pair for its move, following the instructions
for the move (the same ones the LLM judge gets). <b>Accept</b> only if every criterion holds. Then press
<i>Download labels</i> and send the CSV file back. Your progress is kept in this browser.</p>
<p>Annotator: <input id="annotator" value="{annotator}" placeholder="your name or initials"></p>
{guides}
<div id="pairs">{pairs}</div>
<p><button onclick="download()">Download labels</button> <span id="count"></span></p>
<script>
const ROWS = {rows_json};
const KEY = "silver-sheet-" + {sheet_id};
const saved = JSON.parse(localStorage.getItem(KEY) || "{{}}");
function update() {{
  let n = 0;
  for (const r of ROWS) {{
    const pick = document.querySelector(`input[name="${{r.query_id}}"]:checked`);
    const note = document.getElementById("note-" + r.query_id).value;
    saved[r.query_id] = {{label: pick ? pick.value : "", note: note}};
    document.getElementById("pair-" + r.query_id).classList.toggle("done", !!pick);
    if (pick) n++;
  }}
  saved.__annotator = document.getElementById("annotator").value;
  localStorage.setItem(KEY, JSON.stringify(saved));
  document.getElementById("count").textContent = `${{n}} of ${{ROWS.length}} labelled`;
}}
function csv(v) {{ v = String(v ?? ""); return /[",\\n]/.test(v) ? '"' + v.replace(/"/g, '""') + '"' : v; }}
function download() {{
  update();
  const who = document.getElementById("annotator").value.trim();
  if (!who) {{ alert("Please enter your name or initials first."); return; }}
  const lines = ["query_id,move,annotator,label,note"];
  for (const r of ROWS) {{
    const s = saved[r.query_id] || {{}};
    if (s.label) lines.push([r.query_id, r.move, who, s.label, s.note].map(csv).join(","));
  }}
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([lines.join("\\n") + "\\n"], {{type: "text/csv"}}));
  a.download = `labels-${{who}}.csv`; a.click();
}}
for (const r of ROWS) {{
  const s = saved[r.query_id];
  if (s && s.label) document.querySelector(`input[name="${{r.query_id}}"][value="${{s.label}}"]`).checked = true;
  if (s && s.note) document.getElementById("note-" + r.query_id).value = s.note;
}}
if (saved.__annotator) document.getElementById("annotator").value = saved.__annotator;
document.addEventListener("change", update); document.addEventListener("input", update); update();
</script></body></html>
"""


def _pair_html(i: int, row) -> str:
    e = html.escape
    qid = e(row.query_id)
    return (
        f'<div class="pair" id="pair-{qid}"><div class="meta">#{i} · {e(row.move.upper())} · {qid}</div>'
        f'<p><span class="q">{e(row.query)}</span> <span class="m">{e(row.marker[:1].upper() + row.marker[1:])},</span> '
        f'<span class="g">{e(row.gold)}</span></p>'
        f'<label><input type="radio" name="{qid}" value="accept"> accept</label> '
        f'<label><input type="radio" name="{qid}" value="reject"> reject</label> '
        f'<input id="note-{qid}" placeholder="note (optional)" size="50"></div>'
    )


def write_sheet(rows: pd.DataFrame, out_dir: str | Path, guides: dict[str, JudgePrompt], *, name: str = "sheet") -> list[Path]:
    """Write ``<name>.csv`` and ``<name>.html`` into ``out_dir``; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, html_path = out / f"{name}.csv", out / f"{name}.html"
    rows.to_csv(csv_path, index=False)
    guide_html = "".join(
        f"<details><summary>Instructions for <b>{html.escape(move.upper())}</b> pairs "
        f"(prompt {html.escape(p.prompt_id)})</summary><pre>{html.escape(p.system)}</pre></details>"
        for move, p in sorted(guides.items()) if move in set(rows["move"])
    )
    page = _PAGE.format(
        annotator=html.escape(str(rows["annotator"].iloc[0]) if len(rows) else ""),
        guides=guide_html,
        pairs="".join(_pair_html(i + 1, r) for i, r in enumerate(rows.itertuples(index=False))),
        rows_json=json.dumps(rows[["query_id", "move"]].to_dict("records")).replace("</", "<\\/"),
        sheet_id=json.dumps(f"{name}-{len(rows)}-{rows['query_id'].iloc[0] if len(rows) else ''}"),
    )
    html_path.write_text(page, encoding="utf-8")
    return [csv_path, html_path]
