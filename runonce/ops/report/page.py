"""A report as one self-contained HTML page: inline CSS, SVG charts, no JavaScript, nothing
fetched. Every number sits in an element with ``data-count`` naming what it counts, so a test
(or a script) reads the page's figures back without parsing prose."""

from __future__ import annotations

import datetime as dt
import html
from collections import Counter
from typing import Iterable

from runonce.core.decision import Reason
from runonce.ops.report.summary import Summary

#: one colour per drop reason, in the order reasons first appear; then they repeat
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f")
TOP = 10


def _t(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _width(ms: int) -> str:
    for unit, size in (("day", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _count(what: str, n: int) -> str:
    return f'<span class="n" data-count="{_e(what)}">{n:,}</span>'


def _colours(reasons: Iterable[str]) -> dict[str, str]:
    return {r: PALETTE[i % len(PALETTE)] for i, r in enumerate(reasons)}


def _over_time(s: Summary, colours: dict[str, str]) -> str:
    """Stacked bars: drops per bucket, split by reason."""
    width, height, pad = 880, 220, 30
    starts = list(range(s.since_ms, s.until_ms, s.bucket_ms)) or [s.since_ms]
    peak = max((sum(c.values()) for c in s.drops_over_time.values()), default=0) or 1
    bar = (width - 2 * pad) / len(starts)
    parts = [f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" aria-label="drops over time">',
             f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#888"/>',
             f'<text x="{pad}" y="14" class="axis">{peak:,} drops</text>']
    for i, start in enumerate(starts):
        y: float = height - pad
        for reason, n in sorted(s.drops_over_time.get(start, Counter()).items()):
            h = (height - 2 * pad) * n / peak
            y -= h
            parts.append(f'<rect x="{pad + i * bar + 1:.1f}" y="{y:.1f}" width="{max(bar - 2, 1):.1f}" height="{h:.1f}" '
                         f'fill="{colours[reason]}"><title>{_e(_t(start))}: {n} {_e(reason)}</title></rect>')
    parts.append(f'<text x="{pad}" y="{height - 8}" class="axis">{_e(_t(s.since_ms))}</text>')
    parts.append(f'<text x="{width - pad}" y="{height - 8}" class="axis" text-anchor="end">{_e(_t(s.until_ms))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _bars(counts: Counter[str], what: str, colours: dict[str, str] | None = None) -> str:
    """Horizontal bars, largest first, each with its count."""
    rows = counts.most_common()
    if not rows:
        return '<p class="none">none in this range</p>'
    width, row_h, label_w = 880, 26, 260
    peak = rows[0][1] or 1
    parts = [f'<svg viewBox="0 0 {width} {row_h * len(rows) + 4}" width="100%" role="img" aria-label="{_e(what)}">']
    for i, (name, n) in enumerate(rows):
        w = (width - label_w - 80) * n / peak
        colour = (colours or {}).get(name, "#4e79a7")
        parts.append(f'<text x="0" y="{i * row_h + 18}">{_e(name)}</text>'
                     f'<rect x="{label_w}" y="{i * row_h + 4}" width="{max(w, 1):.1f}" height="{row_h - 8}" fill="{colour}"/>'
                     f'<text x="{label_w + w + 6:.1f}" y="{i * row_h + 18}">{n:,}</text>')
    parts.append("</svg>")
    table = "".join(f"<tr><td>{_e(name)}</td><td>{_count(f'{what}:{name}', n)}</td></tr>" for name, n in rows)
    return "".join(parts) + f'<table class="counts"><tr><th>{_e(what.split("_by_")[-1])}</th><th>count</th></tr>{table}</table>'


def render(s: Summary, source: str) -> str:
    colours = _colours(r for r, _ in s.drops_by_reason.most_common())
    legend = " ".join(f'<span class="key"><i style="background:{c}"></i>{_e(r)}</span>' for r, c in colours.items())
    repeated = "".join(f"<tr><td>{_e(tool)}</td><td><code>{_e(key)}</code></td><td>{_count(f'repeated:{tool}:{key}', n)}</td></tr>"
                       for (tool, key), n in s.repeated.most_common(TOP))
    budgets = "".join(f"<tr><td>{_e(b.tool)}</td><td><code>{_e(b.scope)}</code></td>"
                      f"<td>{_count(f'budget:{b.tool}:{b.scope}', b.stopped)}</td><td>{_e(_t(b.first_ms))}</td>"
                      f"<td>{_e(_t(b.last_ms))}</td></tr>" for b in s.budgets)
    doubts = "".join(f"<tr><td><code>{_e(d.action_id)}</code></td><td>{_e(d.tool)}</td><td>{_e(d.vendor_ref or '')}</td>"
                     f"<td>{_e(d.error or '')}</td><td>{_e(_t(d.at_ms))}</td></tr>" for d in s.in_doubt)
    none = '<tr><td colspan="5" class="none">none in this range</td></tr>'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>runonce report {_e(_t(s.since_ms))} to {_e(_t(s.until_ms))}</title>
<style>
body {{ font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 920px; color: #222; background: #fff; }}
h1 {{ font-size: 1.6em; margin-bottom: .2em; }} h2 {{ font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ddd; }}
.totals {{ display: flex; gap: 1.5em; flex-wrap: wrap; }} .totals div {{ background: #f4f6f8; padding: .6em 1em; border-radius: 6px; }}
.totals .n {{ display: block; font-size: 1.7em; font-weight: 600; }}
table {{ border-collapse: collapse; width: 100%; margin-top: .6em; }} td, th {{ text-align: left; padding: .25em .6em; border-bottom: 1px solid #eee; }}
.counts {{ width: auto; }} .none {{ color: #888; font-style: italic; }} .axis {{ font-size: 12px; fill: #666; }}
.key {{ margin-right: 1em; white-space: nowrap; }} .key i {{ display: inline-block; width: .8em; height: .8em; margin-right: .3em; }}
svg text {{ font-size: 13px; }} code {{ font-size: .9em; word-break: break-all; }}
</style></head><body>
<h1>runonce: what was stopped, and why</h1>
<p>{_e(_t(s.since_ms))} to {_e(_t(s.until_ms))}, read from {_e(source)}</p>
<div class="totals">
<div>{_count("decided", s.decided)}decided</div><div>{_count("approved", s.approved)}approved</div>
<div>{_count("dropped", s.dropped)}dropped as repeats</div>
<div>{_count("budget_exhausted", s.drops_by_reason.get(Reason.BUDGET_EXHAUSTED.value, 0))}stopped by budgets</div>
<div>{_count("held", s.held)}held for approval</div><div>{_count("released", s.released)}released by a person</div>
<div>{_count("approval_denied", s.drops_by_reason.get(Reason.APPROVAL_DENIED.value, 0))}denied</div>
<div>{_count("approval_expired", s.drops_by_reason.get(Reason.APPROVAL_EXPIRED.value, 0))}expired unanswered</div>
<div>{_count("in_doubt", len(s.in_doubt))}results in doubt</div>
<div>{_count("dead_letters", sum(s.dead_letters_by_type.values()))}dead letters</div>
</div>
<h2>Drops over time, by reason</h2>
<p>{legend or '<span class="none">no drops in this range</span>'} (bars of {_width(s.bucket_ms)})</p>
{_over_time(s, colours)}
<h2>Drops by reason</h2>
{_bars(s.drops_by_reason, "drops_by_reason", colours)}
<h2>Drops by tool</h2>
{_bars(s.drops_by_tool, "drops_by_tool")}
<h2>Drops by tenant</h2>
{_bars(s.drops_by_tenant, "drops_by_tenant")}
<h2>Most repeated keys and scopes (top {TOP})</h2>
<table><tr><th>tool</th><th>key or scope</th><th>repeats dropped</th></tr>{repeated or none}</table>
<h2>Budgets exhausted: the scope each stopped</h2>
<table><tr><th>tool</th><th>scope</th><th>stopped</th><th>first</th><th>last</th></tr>{budgets or none}</table>
<h2>Results in doubt: check the vendor before any retry</h2>
<table><tr><th>action</th><th>tool</th><th>vendor ref</th><th>why</th><th>when</th></tr>{doubts or none}</table>
<h2>Dead letters by error type</h2>
{_bars(s.dead_letters_by_type, "dead_letters_by_type")}
{f'<p>{_count("unreadable", s.unreadable)} decision records could not be read (see runonce tail).</p>' if s.unreadable else ''}
</body></html>
"""
