"""Render a kustomization of deploy/ without kubectl: the subset of kustomize it uses.

    python deploy/render.py deploy/overlays/production > tidepool.yaml

Supported, as `kubectl kustomize` does them: `resources` (YAML files and directories holding
a kustomization.yaml), `images` (newName, newTag, digest), `replicas`, `patches` (inline
JSON 6902 patches with a kind and name target), `configMapGenerator` and `secretGenerator`
(envs and literals) with `generatorOptions.disableNameSuffixHash: true`. Any other field is
refused, so a kustomization that this renderer would get wrong fails loudly instead.
tests/deploy compares its output with `kubectl kustomize` where kubectl is installed.
"""

from __future__ import annotations

import base64
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]

SUPPORTED = {
    "apiVersion",
    "kind",
    "resources",
    "images",
    "replicas",
    "patches",
    "configMapGenerator",
    "secretGenerator",
    "generatorOptions",
}
# Kinds whose pod template (or pod spec) carries container images, and where it is.
POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
REPLICATED = {"Deployment", "StatefulSet", "ReplicaSet"}


class RenderError(Exception):
    """The kustomization uses something this renderer does not do."""


def load_yaml(path: Path) -> list[Obj]:
    """The non-empty documents of a YAML file."""
    with path.open() as f:
        return [d for d in yaml.safe_load_all(f) if d]


def render(root: Path) -> list[Obj]:
    """The objects that the kustomization in `root` builds, in resource order."""
    root = Path(root)
    kfile = root / "kustomization.yaml"
    if not kfile.is_file():
        raise RenderError(f"{root} has no kustomization.yaml")
    k = yaml.safe_load(kfile.read_text()) or {}
    unknown = set(k) - SUPPORTED
    if unknown:
        raise RenderError(f"{kfile}: unsupported fields {sorted(unknown)}")
    objects: list[Obj] = []
    for entry in k.get("resources", []):
        path = (root / entry).resolve()
        objects.extend(render(path) if path.is_dir() else load_yaml(path))
    options = k.get("generatorOptions", {})
    generators = [("ConfigMap", g) for g in k.get("configMapGenerator", [])]
    generators += [("Secret", g) for g in k.get("secretGenerator", [])]
    if generators and options != {"disableNameSuffixHash": True}:
        raise RenderError(f"{kfile}: generators need generatorOptions.disableNameSuffixHash")
    for kind, g in generators:
        objects.append(_generate(root, kind, g))
    for image in k.get("images", []):
        _set_image(objects, image)
    for r in k.get("replicas", []):
        _set_replicas(objects, r["name"], int(r["count"]))
    for p in k.get("patches", []):
        _patch(objects, p)
    _check_unique(objects)
    return objects


def _generate(root: Path, kind: str, g: Obj) -> Obj:
    unknown = set(g) - {"name", "namespace", "envs", "literals", "type"}
    if unknown:
        raise RenderError(f"{kind} generator {g.get('name')}: unsupported {sorted(unknown)}")
    pairs: dict[str, str] = {}
    for env in g.get("envs", []):
        for line in (root / env).read_text().splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise RenderError(f"{env}: {line!r} is not KEY=VALUE")
            pairs[key] = value
    for literal in g.get("literals", []):
        key, _, value = literal.partition("=")
        pairs[key] = value
    meta: Obj = {"name": g["name"]}
    if g.get("namespace"):
        meta["namespace"] = g["namespace"]
    obj: Obj = {"apiVersion": "v1", "kind": kind, "metadata": meta}
    if kind == "Secret":
        obj["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in pairs.items()}
        obj["type"] = g.get("type", "Opaque")
    else:
        obj["data"] = pairs
    return obj


def pod_spec(obj: Obj) -> Obj | None:
    """The pod spec inside a workload object, or None for other kinds."""
    path = POD_SPEC_PATHS.get(obj.get("kind", ""))
    if path is None:
        return None
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def containers(obj: Obj) -> list[Obj]:
    """Every container and init container of a workload object."""
    spec = pod_spec(obj) or {}
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def _set_image(objects: list[Obj], image: Obj) -> None:
    name = image["name"]
    for obj in objects:
        for c in containers(obj):
            current = c.get("image", "")
            base, tag = _split_image(current)
            if base != name:
                continue
            new = image.get("newName", base)
            if "digest" in image:
                c["image"] = f"{new}@{image['digest']}"
            elif "newTag" in image:
                c["image"] = f"{new}:{image['newTag']}"
            else:
                c["image"] = f"{new}{tag}"


def _split_image(image: str) -> tuple[str, str]:
    """(name, ':tag' or '@digest' or '') of an image reference."""
    if "@" in image:
        name, _, digest = image.partition("@")
        return name, "@" + digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon:]
    return image, ""


def _set_replicas(objects: list[Obj], name: str, count: int) -> None:
    hits = [o for o in objects if o["kind"] in REPLICATED and o["metadata"]["name"] == name]
    if not hits:
        raise RenderError(f"replicas: no workload named {name}")
    for obj in hits:
        obj["spec"]["replicas"] = count


def _patch(objects: list[Obj], p: Obj) -> None:
    target = p.get("target") or {}
    if set(target) - {"kind", "name", "namespace"} or set(p) - {"target", "patch"}:
        raise RenderError(f"patches: only inline JSON 6902 patches with a kind/name target: {p}")
    ops = yaml.safe_load(p["patch"])
    if not isinstance(ops, list):
        raise RenderError("patches: only JSON 6902 patches (a list of operations)")
    hits = [
        o
        for o in objects
        if all(
            (o["metadata"].get(key) if key != "kind" else o["kind"]) == value
            for key, value in target.items()
        )
    ]
    if not hits:
        raise RenderError(f"patches: nothing matches {target}")
    for obj in hits:
        for op in ops:
            _apply_op(obj, op)


def _apply_op(obj: Obj, op: Obj) -> None:
    parts = [s.replace("~1", "/").replace("~0", "~") for s in op["path"].split("/")[1:]]
    parent: Any = obj
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    last = parts[-1]
    kind = op["op"]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if kind == "add":
            parent.insert(index, copy.deepcopy(op["value"]))
        elif kind == "replace":
            parent[index] = copy.deepcopy(op["value"])
        elif kind == "remove":
            del parent[index]
        else:
            raise RenderError(f"unsupported patch op {kind}")
        return
    if kind in ("replace", "remove") and last not in parent:
        raise RenderError(f"patch {kind}: {op['path']} does not exist")
    if kind in ("add", "replace"):
        parent[last] = copy.deepcopy(op["value"])
    elif kind == "remove":
        del parent[last]
    else:
        raise RenderError(f"unsupported patch op {kind}")


def key(obj: Obj) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name): what identifies an object."""
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"]


def _check_unique(objects: list[Obj]) -> None:
    seen: set[tuple[str, str, str, str]] = set()
    for obj in objects:
        k = key(obj)
        if k in seen:
            raise RenderError(f"{k} appears twice")
        seen.add(k)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    yaml.safe_dump_all(render(Path(argv[0])), sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
