"""Parse a cluster spec (CSV or YAML) into node records, refusing the whole file on any error.

Accepted formats:

- **openb CSV** (Alibaba cluster-trace-gpu-v2023): ``sn,cpu_milli,memory_mib,gpu,model``.
  Each node joins the node pool named after its GPU model.
- **native CSV**: ``name,pool,gpus,cpu,memory[,labels]`` with cpu in millicores, memory in
  MiB and labels as ``key=value;key=value``.
- **YAML**: either a list of nodes, or ``{node_pools: [...], nodes: [...]}``. A node is a
  mapping with ``name, pool, gpus, cpu, memory`` and optional ``labels`` (a mapping) and
  ``schedulable``; a node pool has ``name`` and optional ``gpu_model`` and ``labels``.

Every error names the line of the file and the reason, e.g.
``line 17: gpu 'eight' is not a whole number``.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any

import yaml

from console.errors import DomainError
from console.numbers import BIG, INT32, NumberError, parse_whole

FORMATS = ("auto", "csv", "yaml")
OPENB_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
NATIVE_COLUMNS = ("name", "pool", "gpus", "cpu", "memory")
NODE_KEYS = {"name", "pool", "gpus", "cpu", "memory", "labels", "schedulable"}
POOL_KEYS = {"name", "gpu_model", "labels"}


@dataclass(frozen=True)
class PoolSpec:
    """A node pool the file declares (or implies by naming it on a node)."""

    name: str
    gpu_model: str
    labels: dict[str, str] = field(default_factory=dict)
    line: int = 0


@dataclass(frozen=True)
class NodeSpec:
    """One node of the file: gpus is a device count, cpu in millicores, memory in MiB."""

    name: str
    pool: str
    gpus: int
    cpu: int
    memory: int
    labels: dict[str, str]
    schedulable: bool
    line: int


@dataclass(frozen=True)
class ClusterSpec:
    """Everything a file describes, checked for shape but not yet against the database."""

    pools: dict[str, PoolSpec]
    nodes: list[NodeSpec]


def refuse(line: int, reason: str) -> DomainError:
    """The one error of the importer: the file is refused, with line and reason."""
    return DomainError(f"line {line}: {reason}", field="file")


def _whole(value: Any, column: str, line: int, *, high: int = BIG) -> int:
    """A whole number from 0 to what its column holds, or a refusal naming the column."""
    if isinstance(value, bool):
        raise refuse(line, f"{column} {value!r} is not a whole number")
    if not isinstance(value, int):
        value = str(value).strip() if value is not None else ""
        if not value:
            raise refuse(line, f"{column} is empty")
    try:
        number = parse_whole(value)
    except NumberError as error:
        if error.code == "invalid":
            raise refuse(line, f"{column} {value!r} is not a whole number") from None
        raise refuse(line, f"{column}: {error}") from None
    if number < 0:
        raise refuse(line, f"{column} {number} is negative (must be 0 or more)")
    if number > high:
        raise refuse(line, f"{column} {number} is more than {high:,}")
    return number


def _text(value: Any, column: str, line: int) -> str:
    """A non-empty string, or a refusal naming the column."""
    text = "" if value is None else str(value).strip()
    if not text:
        raise refuse(line, f"{column} is empty")
    return text


def _labels_text(value: str, line: int) -> dict[str, str]:
    """Parse ``key=value;key=value`` labels of the native CSV."""
    labels: dict[str, str] = {}
    for part in value.split(";"):
        part = part.strip()
        if not part:
            continue
        key, sep, val = part.partition("=")
        if not sep or not key.strip():
            raise refuse(line, f"label {part!r} is not key=value")
        labels[key.strip()] = val.strip()
    return labels


def _labels_mapping(value: Any, line: int) -> dict[str, str]:
    """Labels given as a YAML mapping."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise refuse(line, "labels must be a mapping of key: value")
    return {str(k): "" if v is None else str(v) for k, v in value.items()}


def detect_format(text: str, filename: str = "") -> str:
    """Guess csv or yaml from the file name, else from the first line of the text."""
    lower = filename.lower()
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    if lower.endswith(".csv"):
        return "csv"
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("-") or ":" in stripped or stripped.startswith("{"):
            return "yaml"
        return "csv"
    return "csv"


def parse(text: str, fmt: str = "auto", *, filename: str = "") -> ClusterSpec:
    """Parse a whole cluster spec; raise DomainError(field="file") on the first bad line."""
    if fmt not in FORMATS:
        raise DomainError(f"Format {fmt!r} is not one of {', '.join(FORMATS)}.", field="format")
    text = text.lstrip("\ufeff")
    if not text.strip():
        raise DomainError("The file is empty.", field="file")
    if fmt == "auto":
        fmt = detect_format(text, filename)
    spec = _parse_yaml(text) if fmt == "yaml" else _parse_csv(text)
    if not spec.nodes:
        raise DomainError("The file lists no nodes.", field="file")
    _check_unique(spec.nodes)
    return spec


def _check_unique(nodes: list[NodeSpec]) -> None:
    """Refuse a node name the file lists twice."""
    seen: dict[str, int] = {}
    for node in nodes:
        if node.name in seen:
            raise refuse(
                node.line,
                f"node name {node.name!r} is listed twice (first on line {seen[node.name]})",
            )
        seen[node.name] = node.line


def _parse_csv(text: str) -> ClusterSpec:
    """openb or native CSV, told apart by the header."""
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        raise DomainError("The file is empty.", field="file") from None
    except csv.Error as exc:
        raise refuse(1, f"not valid CSV ({exc})") from None
    openb = "sn" in header or "cpu_milli" in header
    required = OPENB_COLUMNS if openb else NATIVE_COLUMNS
    for column in required:
        if column not in header:
            raise refuse(1, f"missing column {column!r} (expected {','.join(required)})")
    index = {name: i for i, name in enumerate(header)}
    pools: dict[str, PoolSpec] = {}
    nodes: list[NodeSpec] = []
    try:
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) < len(header) and not (
                not openb and "labels" in index and len(row) == len(header) - 1
            ):
                raise refuse(line, f"has {len(row)} columns, the header has {len(header)}")
            if len(row) > len(header):
                raise refuse(line, f"has {len(row)} columns, the header has {len(header)}")

            def cell(column: str, row: list[str] = row) -> str:
                i = index.get(column)
                return row[i].strip() if i is not None and i < len(row) else ""

            if openb:
                name = _text(cell("sn"), "sn", line)
                pool = _text(cell("model"), "model", line)
                gpus = _whole(cell("gpu"), "gpu", line, high=INT32)
                cpu = _whole(cell("cpu_milli"), "cpu_milli", line)
                memory = _whole(cell("memory_mib"), "memory_mib", line)
                labels: dict[str, str] = {}
            else:
                name = _text(cell("name"), "name", line)
                pool = _text(cell("pool"), "pool", line)
                gpus = _whole(cell("gpus"), "gpus", line, high=INT32)
                cpu = _whole(cell("cpu"), "cpu", line)
                memory = _whole(cell("memory"), "memory", line)
                labels = _labels_text(cell("labels"), line)
            pools.setdefault(pool, PoolSpec(name=pool, gpu_model=pool, line=line))
            nodes.append(NodeSpec(name, pool, gpus, cpu, memory, labels, True, line))
    except csv.Error as exc:
        raise refuse(reader.line_num, f"not valid CSV ({exc})") from None
    return ClusterSpec(pools=pools, nodes=nodes)


class _LineDict(dict[Any, Any]):
    """A YAML mapping that remembers the line it starts on."""

    line: int = 0


class _Loader(yaml.SafeLoader):
    """A safe loader whose mappings carry their line numbers."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> _LineDict:
    loader.flatten_mapping(node)
    mapping = _LineDict(loader.construct_mapping(node, deep=True))
    mapping.line = node.start_mark.line + 1
    return mapping


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _line_of(value: Any, default: int) -> int:
    return value.line if isinstance(value, _LineDict) else default


def _parse_yaml(text: str) -> ClusterSpec:
    """A list of nodes, or a mapping with node_pools and nodes."""
    try:
        document = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise refuse(line, f"not valid YAML ({exc.problem or exc.context})") from None
    except yaml.YAMLError as exc:
        raise refuse(1, f"not valid YAML ({exc})") from None
    except RecursionError:
        raise refuse(1, "not valid YAML (nested too deeply)") from None
    except ValueError:  # a value no type takes, e.g. an integer of 5,000 digits
        raise refuse(1, "not valid YAML (a value it cannot read)") from None
    pool_items: list[Any] = []
    if isinstance(document, list):
        node_items = document
    elif isinstance(document, dict):
        unknown = set(document) - {"node_pools", "nodes"}
        if unknown:
            raise refuse(
                _line_of(document, 1),
                f"unknown key {sorted(unknown)[0]!r} (expected node_pools and nodes)",
            )
        node_items = document.get("nodes") or []
        pool_items = document.get("node_pools") or []
        if not isinstance(node_items, list) or not isinstance(pool_items, list):
            raise refuse(_line_of(document, 1), "node_pools and nodes must be lists")
    else:
        raise refuse(1, "expected a list of nodes or a mapping with node_pools and nodes")

    pools: dict[str, PoolSpec] = {}
    last_line = 1
    for item in pool_items:
        line = _line_of(item, last_line)
        if not isinstance(item, dict):
            raise refuse(line, "a node pool must be a mapping with a name")
        unknown = set(item) - POOL_KEYS
        if unknown:
            raise refuse(line, f"unknown node pool key {sorted(unknown)[0]!r}")
        name = _text(item.get("name"), "name", line)
        if name in pools:
            raise refuse(line, f"node pool {name!r} is listed twice")
        gpu_model = str(item.get("gpu_model") or name).strip()
        pools[name] = PoolSpec(name, gpu_model, _labels_mapping(item.get("labels"), line), line)
        last_line = line

    nodes: list[NodeSpec] = []
    for item in node_items:
        line = _line_of(item, last_line)
        if not isinstance(item, dict):
            raise refuse(line, "a node must be a mapping with name, pool, gpus, cpu, memory")
        unknown = set(item) - NODE_KEYS
        if unknown:
            raise refuse(line, f"unknown node key {sorted(unknown)[0]!r}")
        for key in NATIVE_COLUMNS:
            if key not in item:
                raise refuse(line, f"missing {key!r}")
        name = _text(item["name"], "name", line)
        pool = _text(item["pool"], "pool", line)
        schedulable = item.get("schedulable", True)
        if not isinstance(schedulable, bool):
            raise refuse(line, f"schedulable {schedulable!r} is not true or false")
        nodes.append(
            NodeSpec(
                name=name,
                pool=pool,
                gpus=_whole(item["gpus"], "gpus", line, high=INT32),
                cpu=_whole(item["cpu"], "cpu", line),
                memory=_whole(item["memory"], "memory", line),
                labels=_labels_mapping(item.get("labels"), line),
                schedulable=schedulable,
                line=line,
            )
        )
        pools.setdefault(pool, PoolSpec(name=pool, gpu_model=pool, line=line))
        last_line = line
    return ClusterSpec(pools=pools, nodes=nodes)
