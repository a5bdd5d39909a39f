"""Reads compiled to SQL once per process and shape, then run again with other values.

Django builds and compiles a query's SQL on every call; for a page of the API that costs
more CPU than the database spends answering it (a list page of 50 compiled five queries in
about 1.3 ms and ran them in 0.3 ms). A ``Statement`` compiles its query the first time a
shape comes and afterwards only fills in the values. The SQL is kept per database alias, not
per connection: under Django's ASGI handler (the distributed mode) each request runs on a new
thread with a new connection wrapper, and what was kept on the wrapper was lost with it. Only
the columns' converters, which Django binds to a connection, are found once per wrapper.

The first compile is checked: the query is built once with the real values and once with
stand-ins, and the stand-ins' SQL with the real values put in their places must be exactly
the real SQL and parameters; a query that does not pass (a value shown inline, or changed
on its way to the database) is compiled on every call, as Django would.

``build(shape, *values)`` returns a values() queryset and must be a pure function of its
arguments: what shapes the query (the filters given, the number of ids) comes in the
hashable ``shape``, the values to look for as ``values``, and nothing it reads from the
database or the request may end up in the SQL. With the switch off (``console.fast``) a
statement is that queryset, evaluated as Django evaluates it.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Func, IntegerField, Model, QuerySet
from django.db.models.sql.compiler import SQLCompiler
from django.db.models.sql.query import Query

from console import fast

# Every row of a filtered set as one group, as QuerySet.count() counts them (a Count would
# make values() group by every column).
ROWS = Func(template="COUNT(*)", output_field=IntegerField())

M = TypeVar("M", bound=Model)

# Stand-ins for whole numbers fit a 32-bit column (PostgreSQL's integer refuses larger ones
# while compiling); text ones hold what a lookup that rewrites text would change (LIKE's
# wildcards and escape, upper case), so such a lookup finds no slot and is never reused.
_FIRST_STAND_IN = 2_131_773_177
# A connection wrapper's own attribute: the converters it found per compiled statement.
_ON_CONNECTION = "tidepool_converters"
# Shapes kept per statement and database (a list's filters, a page's number of rows…).
KEPT = 256


@dataclass(frozen=True, eq=False)
class _Compiled:
    """SQL whose parameters are the call's values (by index) or constants.

    It refers to no connection: the query and its columns make each wrapper's converters.
    """

    sql: str
    slots: tuple[tuple[int, bool] | None, ...]  # (value index, as int) per parameter
    constants: tuple[Any, ...]
    names: tuple[str, ...]
    query: Query
    columns: list[Any]  # the selected expressions, whose converters results_iter applies
    converts: bool  # whether any column has a converter (dates, booleans, JSON)

    def params(self, values: Sequence[Any]) -> list[Any]:
        """The parameters with `values` in their slots."""
        return [
            constant if slot is None else int(values[slot[0]]) if slot[1] else values[slot[0]]
            for slot, constant in zip(self.slots, self.constants, strict=True)
        ]


def _numeric(text: str) -> bool:
    """Text that a query may take as a number: digits that fit in 64 bits (a pk, is_id)."""
    return text.isdigit() and len(text) <= 18


def _kind(value: Any) -> tuple[type, bool]:
    """What about a value may shape the SQL: its type, and for text whether it is numeric."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"a statement takes text and whole numbers, not {type(value).__name__}")
    return type(value), isinstance(value, str) and _numeric(value)


def _stand_in(index: int, value: Any) -> Any:
    """A value of the same kind that nothing else in a query holds."""
    number = _FIRST_STAND_IN + index
    if isinstance(value, int):
        return number
    return str(number) if _numeric(value) else f"\x00Stand-in %_\\ {number}\x00"


def _slot(param: Any, stand_ins: Sequence[Any]) -> tuple[int, bool] | None:
    """Which value a parameter of the stand-ins' SQL is (as given or as a number), if any."""
    for index, stand_in in enumerate(stand_ins):
        if type(param) is type(stand_in) and param == stand_in:
            return index, False
        if type(param) is int and isinstance(stand_in, str) and str(param) == stand_in:
            return index, True
    return None


def _sql(queryset: QuerySet[Any], connection: BaseDatabaseWrapper) -> tuple[SQLCompiler, str, list]:  # type: ignore[type-arg]
    compiler = queryset.query.get_compiler(connection=connection)
    sql, params = compiler.as_sql()
    return compiler, sql, list(params)


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Equal values of the same types, one by one (1 and True differ here)."""
    if len(a) != len(b):
        return False
    return all(type(x) is type(y) and x == y for x, y in zip(a, b, strict=True))


def columns(model: type[Model]) -> tuple[str, ...]:
    """A model's concrete columns by attname, in field order: the rows ``loaded`` takes."""
    return tuple(f.attname for f in model._meta.concrete_fields)


def loaded(model: type[M], rows: list[dict[str, Any]], using: str = "default") -> list[M]:
    """Instances from rows of every column (``columns(model)``), as a queryset loads them."""
    names = columns(model)
    return [model.from_db(using, names, tuple(row[n] for n in names)) for row in rows]


class Statement:
    """A values() read whose SQL is compiled once per database and shape.

    Make one per module, not per call: it keeps up to ``KEPT`` shapes per database.
    """

    def __init__(self, build: Callable[..., QuerySet[Any]]) -> None:
        self.build = build
        self._kept: dict[str, OrderedDict[Any, _Compiled | None]] = {}
        self._lock = threading.Lock()  # request threads share the shapes kept

    def kept(self, connection: BaseDatabaseWrapper) -> OrderedDict[Any, _Compiled | None]:
        """This statement's compiled SQL on the connection's database, by shape (least
        recent first)."""
        return self._kept.setdefault(connection.alias, OrderedDict())

    def rows(
        self,
        *values: Any,
        shape: Hashable = (),
        low: int = 0,
        high: int | None = None,
        using: str = "default",
    ) -> list[dict[str, Any]]:
        """The rows of ``build(shape, *values)[low:high]`` as values() gives them."""
        if not fast.on():
            return list(self.build(shape, *values)[low:high])
        connection = connections[using]
        compiled = self._compile(connection, shape, values)
        try:
            params = None if compiled is None else compiled.params(values)
        except ValueError:  # digits int() refuses (²): the query's own refusal
            params = None
        if compiled is None or params is None:
            return list(self.build(shape, *values)[low:high])
        sql = compiled.sql
        if low or high is not None:
            sql = f"{sql} {connection.ops.limit_offset_sql(low, high)}"
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            fetched: Any = cursor.fetchall()
        names = compiled.names
        if compiled.converts:
            compiler, converters = _converters(connection, compiled)
            fetched = compiler.apply_converters(fetched, converters)
        return [dict(zip(names, row, strict=True)) for row in fetched]

    def _compile(
        self, connection: BaseDatabaseWrapper, shape: Hashable, values: Sequence[Any]
    ) -> _Compiled | None:
        """The database's compiled SQL for the shape and kinds of values, made on first use.

        None when the SQL cannot be reused with other values: the call compiles each time.
        Two threads meeting a new shape at once may both compile it; either result serves.
        """
        made = self.kept(connection)
        key = (shape, tuple(map(_kind, values)))
        with self._lock:
            if key in made:
                made.move_to_end(key)
                return made[key]
        compiled = self._make(connection, shape, values)
        with self._lock:
            if len(made) >= KEPT:  # the least recently used shape goes
                made.popitem(last=False)
            made[key] = compiled
        return compiled

    def _make(
        self, connection: BaseDatabaseWrapper, shape: Hashable, values: Sequence[Any]
    ) -> _Compiled | None:
        """Compile with the values and with stand-ins; the stand-ins' SQL if they agree."""
        try:
            compiler, sql, params = _sql(self.build(shape, *values), connection)
        except EmptyResultSet:  # these values match nothing (an empty IN): Django's own answer
            return None
        stand_ins = [_stand_in(i, v) for i, v in enumerate(values)]
        try:
            compiler, stand_in_sql, stand_in_params = _sql(
                self.build(shape, *stand_ins), connection
            )
        except Exception:  # a stand-in the query refuses: the real values only
            return None
        query = compiler.query
        columns = [column for column, _, _ in compiler.select[: compiler.col_count]]
        if compiler.has_composite_fields(columns):  # results_iter's other step: not here
            return None
        compiled = _Compiled(
            sql=stand_in_sql,
            slots=tuple(_slot(p, stand_ins) for p in stand_in_params),
            constants=tuple(stand_in_params),
            names=(*query.extra_select, *query.values_select, *query.annotation_select),
            query=query,
            columns=columns,
            converts=bool(compiler.get_converters(columns)),
        )
        if stand_in_sql != sql or not _same(compiled.params(values), params):
            return None
        return compiled


def _converters(
    connection: BaseDatabaseWrapper, compiled: _Compiled
) -> tuple[SQLCompiler, dict[int, Any]]:
    """A compiler on this connection and the columns' converters, found once per wrapper.

    Kept on the wrapper (weakly per statement, gone when its shape is dropped), not in a
    map keyed by it: Django's converters refer back to their connection, and would keep a
    finished thread's wrapper (and database handle) alive.
    """
    found: weakref.WeakKeyDictionary[_Compiled, tuple[SQLCompiler, dict[int, Any]]]
    found = connection.__dict__.setdefault(_ON_CONNECTION, weakref.WeakKeyDictionary())
    if compiled not in found:
        compiler = compiled.query.get_compiler(connection=connection)
        found[compiled] = (compiler, compiler.get_converters(compiled.columns))
    return found[compiled]
