"""``runonce report --html FILE``: one self-contained page for a time range, for analysts.
``summary.py`` counts (pure, over the rows ``runonce export`` writes); ``page.py`` draws
(HTML with inline SVG charts: no script, no network, opens anywhere)."""
