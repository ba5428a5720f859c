"""Draw one trace as Jaeger's query API answered it (a file kept by tests/integration/test_traces.py
under RUNONCE_TRACES_OUT) as a waterfall page, and take its picture with headless Chromium.

Jaeger's own UI is a separate web application that ships only with Jaeger's release archives
(it is on no package registry this machine reaches; ``go install`` builds Jaeger with a
placeholder page instead), so the picture is this page, drawn from Jaeger's answer.

    .venv/bin/python scripts/trace_picture.py ANSWER.json OUT.png    (scripts/trace_picture.sh runs it all)
"""

from __future__ import annotations

import html
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runonce.testkit.jaeger import Span, spans_of  # noqa: E402
from tests.support.browser import screenshot  # noqa: E402

KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1"]
SHOWN = ("runonce.decision.outcome", "runonce.decision.reason", "runonce.approval.decided_by",
         "runonce.outcome", "http.response.status_code", "url.full", "server.port")


def _tree(spans: list[Span]) -> list[tuple[int, Span]]:
    """Depth-first, children by start time: the order a trace view lists them."""
    ids = {s.span_id for s in spans}
    children: dict[str, list[Span]] = {}
    for s in spans:
        children.setdefault(s.parent_span_id if s.parent_span_id in ids else "", []).append(s)
    out: list[tuple[int, Span]] = []

    def walk(parent: str, depth: int) -> None:
        for s in sorted(children.get(parent, []), key=lambda s: s.start_ns):
            out.append((depth, s))
            walk(s.span_id, depth + 1)

    walk("", 0)
    return out


def page(spans: list[Span]) -> str:
    start = min(s.start_ns for s in spans)
    total = max(s.end_ns for s in spans) - start or 1
    services = sorted({s.service for s in spans})
    colour = {svc: COLOURS[i % len(COLOURS)] for i, svc in enumerate(services)}
    rows = []
    for depth, s in _tree(spans):
        left = 100 * (s.start_ns - start) / total
        width = max(0.3, 100 * (s.end_ns - s.start_ns) / total)
        facts = " · ".join(f"{k.rsplit('.', 1)[-1]}={s.attributes[k]}" for k in SHOWN if k in s.attributes)
        link = " · linked to another trace" if s.links else ""
        rows.append(
            f'<tr><td class="name" style="padding-left:{8 + 16 * depth}px">'
            f'<span class="svc" style="background:{colour[s.service]}">{html.escape(s.service)}</span> '
            f'<b>{html.escape(s.name)}</b> <i>{KINDS.get(s.kind, "?")}</i>'
            f'<div class="facts">{html.escape(facts + link)}</div></td>'
            f'<td class="lane"><div class="bar{" err" if s.error else ""}" style="left:{left:.2f}%;width:{width:.2f}%;'
            f'background:{colour[s.service]}"></div><span class="ms" style="left:{min(left + width, 88):.2f}%">'
            f'{(s.end_ns - s.start_ns) / 1e6:.1f} ms</span></td></tr>')
    return f"""<!doctype html><meta charset="utf-8"><title>trace {spans[0].trace_id}</title>
<style>body{{font:13px system-ui,sans-serif;margin:16px;color:#222}} table{{border-collapse:collapse;width:100%}}
td{{border-bottom:1px solid #eee;padding:5px 4px;vertical-align:top}} .name{{width:46%}}
.svc{{color:#fff;border-radius:3px;padding:1px 5px;font-size:11px}} i{{color:#888;font-size:11px}}
.facts{{color:#555;font-size:11px;margin-top:2px}} .lane{{position:relative}}
.bar{{position:absolute;top:9px;height:12px;border-radius:2px;min-width:2px}} .err{{outline:2px solid #c00}}
.ms{{position:absolute;top:24px;font-size:10px;color:#666;padding-left:4px}} h1{{font-size:15px}}</style>
<h1>Trace {spans[0].trace_id} · {len(spans)} spans · {total / 1e6:.0f} ms · from Jaeger's query API</h1>
<table>{"".join(rows)}</table>"""


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    answer, out = Path(sys.argv[1]), Path(sys.argv[2])
    spans = spans_of(json.loads(answer.read_text()))
    if not spans:
        print(f"trace-picture: {answer} holds no span", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        html_page = Path(tmp) / "trace.html"
        html_page.write_text(page(spans))
        out.parent.mkdir(parents=True, exist_ok=True)
        screenshot(html_page, out, width=1100, height=90 + 52 * len(spans))
    print(f"trace-picture: {len(spans)} spans drawn into {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
