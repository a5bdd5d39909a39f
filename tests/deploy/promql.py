"""What a PromQL expression queries: its metrics, the labels it names, and how it uses them.

Not a full parser (promtool checks the syntax where it is installed): enough to find every
series an expression reads, the function around each, and every label in matchers, grouping
clauses and legends, and to refuse a name that is neither a function, a keyword nor a metric.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

METRICS_FILE = Path(__file__).resolve().parents[2] / "deploy" / "metrics.txt"

FUNCTIONS = {
    "abs", "absent", "absent_over_time", "avg", "avg_over_time", "bottomk", "ceil", "changes",
    "clamp", "clamp_max", "clamp_min", "count", "count_over_time", "count_values", "day_of_week",
    "delta", "deriv", "exp", "floor", "group", "histogram_quantile", "holt_winters", "hour",
    "idelta", "increase", "irate", "label_join", "label_replace", "last_over_time", "ln",
    "log2", "log10", "max", "max_over_time", "min", "min_over_time", "predict_linear",
    "quantile", "quantile_over_time", "rate", "resets", "round", "scalar", "sgn", "sort",
    "sort_desc", "sqrt", "stddev", "stddev_over_time", "stdvar", "sum", "sum_over_time",
    "time", "timestamp", "topk", "vector",
}  # fmt: skip
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
COUNTER_FUNCTIONS = {"rate", "irate", "increase", "resets"}
HISTOGRAM_PARTS = ("_bucket", "_sum", "_count")
# Labels Prometheus itself attaches to every scraped series.
TARGET_LABELS = {"instance", "job"}


@dataclass(frozen=True)
class Metric:
    name: str
    type: str
    labels: frozenset[str]
    help: str


def metric_list(path: Path = METRICS_FILE) -> dict[str, Metric]:
    """deploy/metrics.txt: `name type labels|- meaning`, one a line."""
    metrics: dict[str, Metric] = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, kind, labels, meaning = line.split(maxsplit=3)
        assert name not in metrics, f"{name} listed twice"
        metrics[name] = Metric(
            name, kind, frozenset() if labels == "-" else frozenset(labels.split(",")), meaning
        )
    return metrics


@dataclass
class Use:
    """One series an expression reads: its metric, the function around it, its matchers."""

    series: str
    metric: str
    part: str  # "", "_bucket", "_sum" or "_count"
    function: str | None
    matchers: set[str] = field(default_factory=set)


@dataclass
class Query:
    uses: list[Use]
    grouping: set[str]
    functions: set[str]


TOKEN = re.compile(
    r'(?P<string>"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')'
    r"|(?P<range>\[[^\]]*\])"
    r"|(?P<number>\d+(?:\.\d+)?(?:e[+-]?\d+)?)"
    r"|(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)"
    r"|(?P<op>==|!=|=~|!~|>=|<=|[-+*/%^<>=(){},])"
    r"|(?P<space>\s+)"
)


def tokens(expr: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m:
            raise ValueError(f"cannot read {expr[pos:]!r} in {expr!r}")
        pos = m.end()
        if m.lastgroup != "space":
            out.append((m.lastgroup or "", m.group()))
    return out


def analyse(expr: str, metrics: dict[str, Metric]) -> Query:
    """The series, grouping labels and functions of `expr`; unknown names raise ValueError."""
    toks = tokens(expr)
    depth_parens = 0
    calls: list[tuple[str | None, int]] = []  # (function or None for a bare group, depth)
    uses: list[Use] = []
    grouping: set[str] = set()
    functions: set[str] = set()
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if kind == "ident" and text in GROUPING:
            i = _grouping(toks, i + 1, grouping, expr)
            continue
        if kind == "ident" and text in FUNCTIONS and nxt in ("by", "without"):
            # an aggregation with its clause first: sum by (quota) (...)
            i = _grouping(toks, i + 2, grouping, expr)
            if i >= len(toks) or toks[i][1] != "(":
                raise ValueError(f"{text} by (...) without its argument in {expr!r}")
            functions.add(text)
            calls.append((text, depth_parens))
            depth_parens += 1
            i += 1
            continue
        if kind == "ident" and nxt == "(":
            if text not in FUNCTIONS:
                raise ValueError(f"unknown function {text!r} in {expr!r}")
            functions.add(text)
            calls.append((text, depth_parens))
            depth_parens += 1
            i += 2
            continue
        if text == "(":
            calls.append((None, depth_parens))
            depth_parens += 1
        elif text == ")":
            if not calls:
                raise ValueError(f"unbalanced ) in {expr!r}")
            calls.pop()
            depth_parens -= 1
        elif kind == "ident" and text not in KEYWORDS:
            use = _series(text, metrics, expr)
            use.function = next((f for f, _ in reversed(calls) if f), None)
            if nxt == "{":
                i += 2
                while toks[i][1] != "}":
                    label, op, value = toks[i], toks[i + 1], toks[i + 2]
                    if label[0] != "ident" or op[1] not in ("=", "!=", "=~", "!~"):
                        raise ValueError(f"bad matcher in {expr!r}")
                    if value[0] != "string":
                        raise ValueError(f"matcher value is not a string in {expr!r}")
                    use.matchers.add(label[1])
                    i += 3
                    if toks[i][1] == ",":
                        i += 1
            uses.append(use)
        elif text == "{":
            raise ValueError(f"a selector without a metric name in {expr!r}")
        i += 1
    if calls:
        raise ValueError(f"unbalanced ( in {expr!r}")
    return Query(uses, grouping, functions)


def _grouping(toks: list[tuple[str, str]], i: int, grouping: set[str], expr: str) -> int:
    """Read the label list of a grouping clause starting at toks[i]; the index after it."""
    if i >= len(toks) or toks[i][1] != "(":
        return i  # group_left without labels
    i += 1
    while toks[i][1] != ")":
        if toks[i][0] == "ident":
            grouping.add(toks[i][1])
        elif toks[i][1] != ",":
            raise ValueError(f"bad grouping in {expr!r}")
        i += 1
    return i + 1


def _series(name: str, metrics: dict[str, Metric], expr: str) -> Use:
    if name in metrics:
        return Use(name, name, "", None)
    for part in HISTOGRAM_PARTS:
        base = name.removesuffix(part)
        if base != name and base in metrics:
            if metrics[base].type != "histogram":
                raise ValueError(f"{name}: {base} is a {metrics[base].type}, not a histogram")
            return Use(name, base, part, None)
    raise ValueError(f"{name!r} in {expr!r} is not in deploy/metrics.txt")


def check(expr: str, metrics: dict[str, Metric], extra_labels: set[str] = frozenset()) -> Query:
    """Analyse `expr` and check it uses each metric as its type allows; raise AssertionError."""
    q = analyse(expr, metrics)
    assert q.uses, f"{expr!r} reads no Tidepool metric"
    known = set(TARGET_LABELS) | set(extra_labels)
    for use in q.uses:
        m = metrics[use.metric]
        allowed = m.labels | TARGET_LABELS | ({"le"} if use.part == "_bucket" else set())
        assert use.matchers <= allowed, f"{use.series} has no label {use.matchers - allowed}"
        known |= allowed
        if m.type == "histogram":
            assert use.part, f"{use.series}: a histogram is read through _bucket, _sum or _count"
        rated = use.function in COUNTER_FUNCTIONS
        if m.type == "counter" or use.part:
            assert rated, f"{use.series} is a counter: read it through rate() or increase()"
        else:
            assert not rated, f"{use.series} is a gauge: rate() or increase() means nothing"
    assert q.grouping <= known, f"{expr!r} groups by labels none of its metrics has"
    if "histogram_quantile" in q.functions:
        assert any(u.part == "_bucket" for u in q.uses)
        assert "le" in q.grouping, f"{expr!r}: histogram_quantile needs `le` kept"
    return q
