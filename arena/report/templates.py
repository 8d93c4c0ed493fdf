"""The HTML report's Jinja2 templates (arena/report/html_report.py), compiled when this module is imported, which
is before the worker starts: rendering later imports nothing. Autoescape is on: every value the templates show
(a submission's error text, its path, its warnings) is escaped; only the style sheet and the page's own script
are marked safe. Kept as strings in a Python module so that they travel in the competition runner's flat file
list like every other module of the engine."""
from __future__ import annotations

import jinja2

_ENV = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)

RUN_REPORT = _ENV.from_string("""\
<!DOCTYPE html><html><head><meta charset="utf-8"><title>nvfp4-arena {{ mode }}</title>
<style>{{ style | safe }}</style><script>{{ script | safe }}</script></head><body>
<h1>nvfp4-arena {{ mode }}: {{ submission }}</h1>
<div class="meta">task {{ task }} · {{ where }} · torch {{ torch }} · Python {{ python }}</div>
<div class="verdict" id="verdict">{{ verdict }}</div>
{% if refused %}<div><b>refused:</b> {{ refused }}</div>{% endif %}
{% for c in cases %}
<section class="case {{ c.state }}" id="case-{{ c.index }}">
<h2><span class="mark-{{ c.state }}">{{ "✔ pass" if c.passed else "✘ FAIL" }}</span> case {{ c.index }}: {{ c.spec }}</h2>
{% if c.error %}<div><b>error:</b> {{ c.error }}</div>{% endif %}
{% if c.diagnosis %}<div class="diagnosis"><b>diagnosis:</b> {{ c.diagnosis }}</div>{% endif %}
{% if c.evidence %}<pre>{{ c.evidence }}</pre>{% endif %}
{% if c.timing %}
<table class="stats">{% for name, value in c.timing.rows %}<tr><td>{{ name }}</td><td>{{ value }}</td></tr>{% endfor %}</table>
{% for p in c.timing.pictures %}
<figure><img class="{{ p.kind }}" alt="{{ p.alt }}" src="data:image/svg+xml;base64,{{ p.svg }}"><figcaption>{{ p.caption }}</figcaption></figure>
{% endfor %}
{% if c.timing.note %}<div>{{ c.timing.note }}</div>{% endif %}
{% endif %}
{% if c.errors %}
<div class="legend">{% for name, colour in legend %}<span style="background:{{ colour }}"></span>{{ name }}{% endfor %}\
<span style="width:60px;background:linear-gradient(to right,{{ ramp }})"></span>wrong: |out − ref|, log scale, small → largest</div>
{% for e in c.errors %}
<div class="errors"><h3 style="font-size:14px;margin:8px 0 2px">{{ e.label }}: {{ e.wrong }} wrong of {{ e.cells }} elements, largest error {{ e.max_error }}</h3>
<figure><img class="heatmap" alt="error heatmap {{ e.label }}" src="data:image/png;base64,{{ e.error_png }}"><figcaption>|out − ref| per element, \
{{ e.rows }} rows (down) × {{ e.cols }} columns (across), at most 512 × 512 cells (a cell shows its worst element)</figcaption></figure>\
<figure><img class="magnitude" alt="reference magnitude {{ e.label }}" src="data:image/png;base64,{{ e.reference_png }}">\
<figcaption>|ref|, the reference's magnitude (dark = large), same grid</figcaption></figure></div>
{% endfor %}
{% endif %}
{% if c.warnings %}<div><b>warnings:</b><ul>{% for w in c.warnings %}<li>{{ w }}</li>{% endfor %}</ul></div>{% endif %}
</section>
{% endfor %}
</body></html>
""")

BATCH_REPORT = _ENV.from_string("""\
<!DOCTYPE html><html><head><meta charset="utf-8"><title>{{ title }}</title>
<style>{{ style | safe }}</style></head><body><h1>{{ title }}</h1>
<div class="verdict" id="verdict">{{ passed }} of {{ rows | length }} submissions passed</div>
<table class="rank"><tr><th>#</th><th>submission</th><th>verdict</th><th>{{ "geomean µs" if timed else "cases" }}</th>\
{% for i in cases if timed %}<th>case {{ i }} µs</th>{% endfor %}\
{% if expected %}<th>expected</th><th>agrees</th>{% endif %}<th>wall s</th><th>first error</th><th>GPU</th><th>attempts</th></tr>
{% for r in rows %}
<tr class="{{ r.state }}"><td>{{ r.number }}</td><td>{{ r.path }}</td><td class="mark-{{ r.state }}">{{ r.verdict }}</td>\
<td>{{ r.figure }}{% if r.bar %}<div class="bar" style="width:{{ "%.0f" | format(r.bar) }}%"></div>{% endif %}</td>\
{% for t in r.per_case %}<td>{{ t }}</td>{% endfor %}\
{% if expected %}<td>{{ r.expected }}</td><td>{{ r.agrees }}</td>{% endif %}\
<td>{{ r.wall }}</td><td>{{ r.error }}</td><td>{{ r.gpu }}</td><td>{{ r.attempts }}</td></tr>
{% endfor %}
</table></body></html>
""")
