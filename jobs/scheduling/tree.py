"""The quota tree: parents, chains of ancestors, per-pool min/max, validated once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .types import MILLI, Quota, Resources, ScenarioError

Vec = tuple[int, int, int]


def vec(r: Resources) -> Vec:
    """A resource vector as a plain tuple, cheap to index in hot loops."""
    return (r.gpu, r.cpu, r.memory)


def add_row(row: list[int], gpu: int, cpu: int, memory: int) -> None:
    """Add a resource vector to a usage row in place."""
    # not `row[0] += gpu`: compiled, an augmented list item is a generic (slower) operation
    row[0] = row[0] + gpu
    row[1] = row[1] + cpu
    row[2] = row[2] + memory


def fmt_gpu(milli: int) -> str:
    """Milli-GPU as a human number of GPUs: 48, 0.5."""
    if milli % MILLI == 0:
        return str(milli // MILLI)
    return f"{milli / MILLI:.3f}".rstrip("0").rstrip(".")


def gpus(milli: int) -> str:
    """An amount of GPUs with its noun, for sentences: 1 GPU, 0.5 GPUs, 8 GPUs."""
    return f"{fmt_gpu(milli)} GPU{'' if milli == MILLI else 's'}"


def count(n: int, noun: str) -> str:
    """A count with its noun: 1 replica, 2 replicas."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def short_name(name: str) -> str:
    """A workload as sentences name it: the bridge names workloads workspace/name, and a
    member reads its own job's sentence, so the workspace is left out."""
    return name.rpartition("/")[2]


def quota_label(name: str) -> str:
    """How a sentence names a quota: "Quota 1.1" stays as it is, "team-a" becomes "Quota team-a"."""
    return name if name.lower().startswith("quota") else f"Quota {name}"


class QuotaTree:
    """Read-only view of the quota tree with cached ancestor chains."""

    __slots__ = (
        "quotas",
        "parent",
        "children",
        "chain",
        "root",
        "descendants",
        "mins",
        "maxs",
        "weights",
        "depth",
        "non_lending",
        "allowed",
    )

    def __init__(self, quotas: Iterable[Quota]) -> None:
        self.quotas: dict[str, Quota] = {}
        for q in quotas:
            if q.name in self.quotas:
                raise ScenarioError(f"quota {q.name!r} is defined twice")
            if q.queue not in ("priority", "fifo"):
                raise ScenarioError(f"quota {q.name!r}: queue must be priority or fifo")
            self.quotas[q.name] = q
        self.parent: dict[str, str | None] = {}
        self.children: dict[str, list[str]] = {n: [] for n in self.quotas}
        for q in self.quotas.values():
            if q.parent is not None and q.parent not in self.quotas:
                raise ScenarioError(f"quota {q.name!r} has unknown parent {q.parent!r}")
            self.parent[q.name] = q.parent
            if q.parent is not None:
                self.children[q.parent].append(q.name)
        for kids in self.children.values():
            kids.sort()
        self.chain: dict[str, tuple[str, ...]] = {}
        for name in self.quotas:
            seen: list[str] = []
            cur: str | None = name
            while cur is not None:
                if cur in seen:
                    raise ScenarioError(f"the quota tree has a cycle through {cur!r}")
                seen.append(cur)
                cur = self.parent[cur]
            self.chain[name] = tuple(seen)
        self.root = {n: c[-1] for n, c in self.chain.items()}
        # the node pools open to each quota whose chain lists some: those every one of the
        # chain's lists allows (a quota missing here may use every pool)
        self.allowed: dict[str, frozenset[str]] = {}
        for n, c in self.chain.items():
            for a in c:
                own = self.quotas[a].pools
                if own:
                    got = self.allowed.get(n)
                    self.allowed[n] = frozenset(own) if got is None else got & frozenset(own)
        self.depth = {n: len(c) - 1 for n, c in self.chain.items()}
        self.descendants: dict[str, set[str]] = {n: set() for n in self.quotas}
        for n, c in self.chain.items():
            for a in c[1:]:
                self.descendants[a].add(n)
        self.mins: dict[str, dict[str, Vec]] = {
            n: {p: vec(r) for p, r in q.min.items()} for n, q in self.quotas.items()
        }
        self.maxs: dict[str, dict[str, Vec] | None] = {
            n: (None if q.max is None else {p: vec(r) for p, r in q.max.items()})
            for n, q in self.quotas.items()
        }
        self.weights: dict[str, float] = {n: q.weight or 0.0 for n, q in self.quotas.items()}
        # quotas with lend_idle=false, in tree order (most trees have none)
        self.non_lending = [n for n, q in self.quotas.items() if not q.lend_idle]
        self._check_sums()

    def _check_sums(self) -> None:
        """Children's min never adds up to more than the parent's, per pool and resource."""
        names = ("gpu", "cpu", "memory")
        for parent, kids in self.children.items():
            if not kids:
                continue
            pools = {p for k in kids for p in self.mins[k]}
            for pool in sorted(pools):
                pmin = self.mins[parent].get(pool, (0, 0, 0))
                for i, res in enumerate(names):
                    total = sum(self.mins[k].get(pool, (0, 0, 0))[i] for k in kids)
                    # CPU/memory mins of 0 mean "unconstrained", so only GPU always binds.
                    if total > pmin[i] and (i == 0 or pmin[i] > 0):
                        shown = fmt_gpu(total) if i == 0 else str(total)
                        pshown = fmt_gpu(pmin[i]) if i == 0 else str(pmin[i])
                        raise ScenarioError(
                            f"children of quota {parent!r} have min {res} {shown} in pool "
                            f"{pool!r}, over the parent's min of {pshown}"
                        )

    def min_of(self, quota: str, pool: str) -> Vec:
        """Guaranteed amount of a quota in a pool (zero when the pool is not listed)."""
        return self.mins[quota].get(pool, (0, 0, 0))

    def max_of(self, quota: str, pool: str) -> Vec | None:
        """Limit of a quota in a pool, or None when it may borrow without limit."""
        m = self.maxs[quota]
        if m is None:
            return None
        return m.get(pool)

    def allows(self, quota: str, pool: str) -> bool:
        """Whether the quota and every ancestor let its workloads run in the pool."""
        only = self.allowed.get(quota)
        return only is None or pool in only

    def forbidding(self, quota: str, pool: str) -> str | None:
        """The nearest quota of the chain whose node pools leave the pool out, if any."""
        for a in self.chain[quota]:
            own = self.quotas[a].pools
            if own and pool not in own:
                return a
        return None

    def weight_of(self, quota: str, pool: str) -> float:
        """Over-quota weight; by default proportional to min GPU (at least one GPU's worth)."""
        w = self.weights[quota]
        if w > 0:
            return w
        return max(self.min_of(quota, pool)[0], MILLI) / MILLI

    def roots(self) -> list[str]:
        """Root quotas, sorted by name."""
        return sorted(n for n, p in self.parent.items() if p is None)

    def is_ancestor(self, a: str, q: str) -> bool:
        """True when a is q or one of q's ancestors."""
        return a in self.chain[q]


def within(used: Sequence[int], add: Sequence[int], limit: Vec, loose: bool) -> bool:
    """used + add stays within limit; with loose=True a zero CPU/memory limit is unconstrained."""
    if used[0] + add[0] > limit[0]:
        return False
    if add[1] and (limit[1] or not loose) and used[1] + add[1] > limit[1]:
        return False
    return not (add[2] and (limit[2] or not loose) and used[2] + add[2] > limit[2])
