"""Workload API: a user lists and reads only the workloads of their workspaces.

Submitting, cancelling, stopping, scaling and editing scaling rules need the submit
permission on the workload's workspace (developers, operators, workspace admins).

A workload's JSON is the serializer's. With the switch on (``console.fast``) lists and
action answers build it from values() rows (``console.fast.rows``) instead; off, every
answer comes from the serializer over the viewset's queryset. tests/api/test_fast_paths.py
holds both to the same bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, ClassVar, cast

from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from cluster.models import NodePool
from console import clock, fast
from console.api import (
    NON_FIELD,
    ClusterViewSet,
    FilterSetBackend,
    WorkspaceScopedViewSet,
    given_filters,
    refuse_unknown,
    validated_filterset,
)
from console.fast.rows import build_workloads, row_keys, workload_rows
from console.fast.statements import ROWS, Statement
from console.numbers import is_digits
from jobs.api import serializers as s
from jobs.choices import LIVE_POD_STATUSES, Kind
from jobs.filters import WorkloadFilter
from jobs.models import Pod, ScalingRule, UsageSample, Workload, WorkloadEvent
from jobs.pod_logs import replica_logs
from jobs.services.scaling import (
    scaling_rule_create,
    scaling_rule_delete,
    scaling_rule_update,
    service_scale,
)
from jobs.services.workloads import instance_start, job_submit, service_create, workload_cancel
from jobs.visibility import sees_borrowed_nodes, workload_for_members
from workspaces.roles import SUBMIT

# Workloads as the API answers them (a name: `list` is a method of the viewsets).
Shown = list[dict[str, Any]]
POD_ROWS = Pod.objects.select_related("node").order_by("index", "attempt")
PODS = Prefetch("pods", queryset=POD_ROWS)


class _Page:
    """A list's count and, when the paginator asks, a slice of its rows."""

    ordered = True

    def __init__(self, rows: Callable[[int, int | None], list[dict[str, Any]]], count: int) -> None:
        self.rows = rows
        self._count = count

    def count(self) -> int:
        """How many rows there are (the paginator asks a method with no arguments)."""
        return self._count

    def __getitem__(self, index: slice) -> list[dict[str, Any]]:
        return self.rows(index.start or 0, index.stop)


def _filtered(shape: tuple[Any, ...], *values: Any) -> QuerySet[Any]:
    """Rows of the viewset's kind through its FilterSet's filters, in the workspaces given.

    ``shape``: the viewset, the filters given (names in declared order), the cleaned values
    of those that are not free text, and how many workspace ids follow the text values in
    ``values`` (None: every workspace). Text values are the statement's values, so one
    compiled SQL serves every name searched for.
    """
    viewset, names, keyed, workspaces = shape[:4]
    queryset = viewset.queryset.filter(kind=viewset.kind)
    keyed_values = dict(keyed)
    texts = [name for name in names if name not in keyed_values]
    if workspaces is not None:
        ids = values[len(texts) :]
        queryset = queryset.filter(**{f"{viewset.workspace_path}__in": ids})
    given = {**keyed_values, **dict(zip(texts, values[: len(texts)], strict=True))}
    cleaned = {name: given[name] for name in names}
    return cast(type[WorkloadFilter], viewset.filterset_class).apply(queryset, cleaned)


def _listed(shape: tuple[Any, ...], *values: Any) -> QuerySet[Any]:
    """The filtered rows' values (``shape``: as _filtered's, then the keys shown)."""
    return _filtered(shape, *values).values(*shape[4])


def _counted(shape: tuple[Any, ...], *values: Any) -> QuerySet[Any]:
    """How many rows pass the filters, as one row ``{"n": …}``."""
    return _filtered(shape, *values).order_by().values(n=ROWS)


# List pages and their counts, compiled once per set of filters and number of workspaces.
_LISTED = Statement(_listed)
_COUNTED = Statement(_counted)


class _Submitted:
    """A workload as its submit wrote it (no pods yet), for the detail serializer to show."""

    pods: tuple[Pod, ...] = ()

    def __init__(
        self, workload: Workload, node_pools: list[NodePool], events: list[WorkloadEvent]
    ) -> None:
        self.workload = workload
        self.node_pools = sorted({p.pk: p for p in node_pools}.values(), key=lambda p: p.name)
        self.events = events

    def __getattr__(self, name: str) -> Any:
        return getattr(self.workload, name)


_per_thread = threading.local()


def _serializer(cls: type[serializers.Serializer]) -> serializers.Serializer:  # type: ignore[type-arg]
    """This thread's instance of `cls`, to show objects with (it holds no per-object state).

    A ModelSerializer builds its fields from the model on each new instance, which costs
    more than showing one workload with them.
    """
    made: dict[type, serializers.Serializer] = _per_thread.__dict__.setdefault("made", {})  # type: ignore[type-arg]
    if cls not in made:
        made[cls] = cls()
    return made[cls]


class _WorkloadViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, WorkspaceScopedViewSet):
    """One kind of workload: list, read, submit; concrete classes name the kind and service."""

    kind: ClassVar[str]
    detail_serializer_class: ClassVar[type[serializers.Serializer]]  # type: ignore[type-arg]
    input_serializer_class: ClassVar[type[s.SubmitSerializer]]
    action_permissions = {"*": SUBMIT}
    # Cancel, stop and scale name no workload field: their refusals are the request's own.
    error_paths = {
        "cancel": {"status": NON_FIELD},
        "stop": {"status": NON_FIELD},
        "scale": {"service": NON_FIELD},
    }
    filter_backends = [FilterSetBackend]
    filterset_class = WorkloadFilter

    # A service's ``pods`` are its current replicas (live pods); ``?history=1`` adds the
    # ended ones (past attempts, scaled-down replicas). Other kinds show every attempt.
    current_pods: ClassVar[bool] = False

    def pod_statuses(self) -> tuple[str, ...] | None:
        """The pod statuses shown: the live ones for current state, None for all."""
        history = self.request.query_params.get("history", "") if self.request else ""
        if not self.current_pods or history.lower() in {"1", "true", "yes"}:
            return None
        return LIVE_POD_STATUSES

    def get_queryset(self) -> QuerySet[Any]:
        """Rows of this kind with everything a page shows, in a fixed number of queries."""
        return self.shown(super().get_queryset())

    def shown(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """`queryset`'s rows of this kind, with what the action's serializer shows."""
        statuses = self.pod_statuses()
        pods = PODS
        if statuses is not None:
            pods = Prefetch("pods", queryset=POD_ROWS.filter(status__in=statuses))
        queryset = (
            queryset.filter(kind=self.kind)
            .select_related("workspace", "quota", "owner")
            .prefetch_related("node_pools", pods)
        )
        if self.action != "list":
            events = WorkloadEvent.objects.order_by("at", "id")
            queryset = queryset.prefetch_related(Prefetch("events", queryset=events))
        return queryset

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A page of this kind, shown as ``serializer_class`` shows it."""
        if not fast.on():
            page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
            assert page is not None  # every list is paginated (REST_FRAMEWORK's PAGE_SIZE)
            shown = self.get_serializer(page, many=True).data
            return self.get_paginated_response(self.readable(shown))
        return self._fast_list(request)

    def _fast_list(self, request: Request) -> Response:
        """The page built from values() rows: one query walking the list index for the page,
        the count from the filtered rows alone, without the joins that fetch names."""
        shown = self.get_serializer_class()
        # The FilterSet checks the query string (400 when refused) before anything is read.
        given = given_filters(
            validated_filterset(request, self, WorkloadFilter, Workload.objects.none())
        )
        visible = self.access.visible_ids()
        texts = [value for name, value in given.items() if name in WorkloadFilter.TEXT]
        keyed = tuple((n, v) for n, v in given.items() if n not in WorkloadFilter.TEXT)
        values = (*texts, *(visible or ()))
        shape = (type(self), tuple(given), keyed, None if visible is None else len(visible))
        listed = (*shape, tuple(row_keys(shown)))
        if visible == []:  # no workspace in sight: nothing to read, the filters still built
            _filtered(shape, *values)  # (one may refuse its value: "²" as a quota id)
            page = _Page(lambda low, high: [], 0)
        else:
            page = _Page(
                lambda low, high: _LISTED.rows(*values, shape=listed, low=low, high=high),
                int(_COUNTED.rows(*values, shape=shape)[0]["n"]),
            )
        rows = self.paginate_queryset(cast(Any, page))
        assert rows is not None  # every list is paginated (REST_FRAMEWORK's PAGE_SIZE)
        built = build_workloads(rows, shown, s.PodSerializer, pod_statuses=self.pod_statuses())
        return self.get_paginated_response(self.readable(built))

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """One workload with its pods and event timeline."""
        shown = self.get_serializer(self.get_object()).data
        return Response(self.readable([shown])[0])

    def readable(self, workloads: Shown) -> Shown:
        """Workloads' JSON as this user may read it: members see no node of a borrowed pod.

        Every answer that shows workloads passes here, whichever path built it (the list's
        rows, the serializers), so each shows the same (`jobs.visibility`).
        """
        if sees_borrowed_nodes(self.request.user):
            return workloads
        return [workload_for_members(w) for w in workloads]

    def get_serializer_class(self) -> Any:
        """The list shows pods; a single workload also shows its events."""
        if self.action == "list":
            return self.serializer_class
        return self.detail_serializer_class

    def submit(self, data: s.SubmitSerializer) -> Workload:
        """Call the service that creates this kind (it checks the submit permission and the
        usage rules, through the request's access)."""
        raise NotImplementedError

    def create(self, request: Request) -> Response:
        """Submit: 400 with the field and reason when refused, 403 without the permission."""
        context = {**self.get_serializer_context(), "access": self.access}
        data = self.input_serializer_class(data=request.data, context=context)
        # The body is parsed and the serializer's fields are built before the write lock...
        _ = data.fields
        # ...and validation runs in the transaction that writes, on the access's one read of
        # the user's grants: what it checked (visibility, then in the service the submit
        # permission and usage rules) is what the write sees.
        with transaction.atomic():
            data.is_valid(raise_exception=True)
            workload = self.submit(data)
            # Read back before the commit: once committed, nothing may fail the answer (a 500
            # for a job that exists would send the client's retry into "name exists").
            if fast.on():  # what the submit wrote is in hand: only its timeline is read
                events = WorkloadEvent.objects.filter(workload=workload).order_by("at", "id")
                written = _Submitted(workload, data.validated_data["node_pools"], list(events))
                rows = [_serializer(self.detail_serializer_class).to_representation(written)]
            else:
                rows = self._detail(workload.pk)
            shown = self.readable(rows)[0]
        return Response(shown, status=status.HTTP_201_CREATED)

    def _detail(self, pk: int) -> Shown:
        """The workload `pk` as stored now, as the detail serializer shows it ([] if gone).

        Only for a workload the request already holds (its access checked).
        """
        if fast.on():
            return workload_rows(
                [pk],
                self.detail_serializer_class,
                s.PodSerializer,
                s.EventSerializer,
                pod_statuses=self.pod_statuses(),
            )
        # Found by pk alone: the caller has the workload, so the user's access is checked.
        found = self.shown(Workload.objects.filter(pk=pk))
        return list(self.detail_serializer_class(found, many=True).data)

    def _answer(self, workload: Workload, code: int = status.HTTP_200_OK) -> Response:
        """The workload as stored now, with its events (as the detail serializer shows it)."""
        rows = self._detail(workload.pk)
        if not rows:  # gone since (a workspace deleted with its workloads)
            raise Http404(self.missing(Http404()))
        return Response(self.readable(rows)[0], status=code)

    def _cancel(self, request: Request) -> Response:
        """Cancel (or, for an instance, stop) the workload."""
        workload = workload_cancel(actor=request.user, workload=self.get_object())
        return self._answer(workload)

    @extend_schema(parameters=[s.LogQuerySerializer], responses=s.LogsSerializer)
    @action(detail=True, methods=["get"])
    def logs(self, request: Request, pk: str | None = None) -> Response:
        """A replica's recent log lines; poll with ``since`` (the last answer's) to follow."""
        # Found before the query is read: a workload out of sight is 404 whatever was asked.
        visible = self.access.restrict(
            Workload.objects.filter(kind=self.kind).select_related("workspace"),
            self.workspace_path,
        )
        workload = get_object_or_404(visible, pk=pk)
        query = s.LogQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        shown = replica_logs(
            workload,
            **query.validated_data,
            hide_borrowed_nodes=not sees_borrowed_nodes(request.user),
            now=clock.now(),
        )
        return Response(s.LogsSerializer(shown).data)


class JobViewSet(_WorkloadViewSet):
    """Training jobs."""

    kind = Kind.TRAINING
    noun = "job"
    queryset = Workload.objects.all()
    serializer_class = s.JobSerializer
    detail_serializer_class = s.JobDetailSerializer
    input_serializer_class = s.JobSubmitSerializer

    def submit(self, data: s.SubmitSerializer) -> Workload:
        """job_submit decides."""
        return job_submit(actor=self.request.user, access=self.access, **data.service_kwargs())

    @extend_schema(request=s.JobSubmitSerializer, responses={201: s.JobDetailSerializer})
    def create(self, request: Request) -> Response:
        """Submit a training job."""
        return super().create(request)

    @extend_schema(request=None, responses=s.JobDetailSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel a queued or running job."""
        return self._cancel(request)


HISTORY = OpenApiParameter(
    "history",
    bool,
    description="true: pods lists every attempt and scaled-down replica, not only the "
    "current replicas.",
)


@extend_schema_view(
    list=extend_schema(parameters=[HISTORY]), retrieve=extend_schema(parameters=[HISTORY])
)
class ServiceViewSet(_WorkloadViewSet):
    """Inference services; scale them by hand or with scheduled rules."""

    kind = Kind.INFERENCE
    noun = "service"
    current_pods = True
    list_params = ("history",)
    queryset = Workload.objects.all()
    serializer_class = s.ServiceSerializer
    detail_serializer_class = s.ServiceDetailSerializer
    input_serializer_class = s.ServiceCreateSerializer

    def submit(self, data: s.SubmitSerializer) -> Workload:
        """service_create decides."""
        return service_create(actor=self.request.user, access=self.access, **data.service_kwargs())

    @extend_schema(request=s.ServiceCreateSerializer, responses={201: s.ServiceDetailSerializer})
    def create(self, request: Request) -> Response:
        """Create an inference service."""
        return super().create(request)

    @extend_schema(request=s.ServiceScaleSerializer, responses=s.ServiceDetailSerializer)
    @action(detail=True, methods=["post"])
    def scale(self, request: Request, pk: str | None = None) -> Response:
        """Set the target replicas; the next scheduling cycle acts on it."""
        service = self.get_object()
        data = s.ServiceScaleSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        service = service_scale(
            service=service,
            replicas=data.validated_data["replicas"],
            now=clock.now(),
            actor=request.user,
        )
        return self._answer(service)

    @extend_schema(request=None, responses=s.ServiceDetailSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Stop serving: the service ends Cancelled."""
        return self._cancel(request)


class InstanceViewSet(_WorkloadViewSet):
    """Interactive instances: non-preemptible, with a time limit."""

    kind = Kind.INTERACTIVE
    noun = "instance"
    queryset = Workload.objects.all()
    serializer_class = s.InstanceSerializer
    detail_serializer_class = s.InstanceDetailSerializer
    input_serializer_class = s.InstanceStartSerializer

    def submit(self, data: s.SubmitSerializer) -> Workload:
        """instance_start decides."""
        return instance_start(actor=self.request.user, access=self.access, **data.service_kwargs())

    @extend_schema(request=s.InstanceStartSerializer, responses={201: s.InstanceDetailSerializer})
    def create(self, request: Request) -> Response:
        """Start an interactive instance."""
        return super().create(request)

    @extend_schema(request=None, responses=s.InstanceDetailSerializer)
    @action(detail=True, methods=["post"])
    def stop(self, request: Request, pk: str | None = None) -> Response:
        """Stop the instance."""
        return self._cancel(request)


class ScalingRuleViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    WorkspaceScopedViewSet,
):
    """Scheduled scaling rules of an inference service (``/services/{id}/rules/``)."""

    queryset = ScalingRule.objects.select_related("service__workspace").order_by("name")
    serializer_class = s.ScalingRuleSerializer
    noun = "scaling rule"
    parent_noun = "service"
    error_paths = {"create": {"service": NON_FIELD}, "partial_update": {"service": NON_FIELD}}
    workspace_path = "service__workspace"
    parent_kwarg = "service_id"
    parent_path = "service_id"
    parent_queryset = Workload.objects.filter(kind=Kind.INFERENCE).select_related("workspace")
    parent_workspace_path = "workspace"
    action_permissions = {"*": SUBMIT}

    def perform_create(self, serializer: Any) -> None:
        """scaling_rule_create decides."""
        service = self.parent_object()
        assert isinstance(service, Workload)
        serializer.instance = scaling_rule_create(
            service=service, now=clock.now(), **serializer.validated_data
        )

    @extend_schema(request=s.ScalingRuleSerializer(partial=True), responses=s.ScalingRuleSerializer)
    def partial_update(self, request: Request, **kwargs: Any) -> Response:
        """Change any of the rule's fields."""
        rule = self.get_object()
        data = s.ScalingRuleSerializer(rule, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        rule = scaling_rule_update(rule=rule, now=clock.now(), **data.validated_data)
        return Response(s.ScalingRuleSerializer(rule).data)

    def perform_destroy(self, instance: ScalingRule) -> None:
        """scaling_rule_delete decides."""
        scaling_rule_delete(rule=instance)


class UsageViewSet(mixins.ListModelMixin, ClusterViewSet):
    """Usage time series: per quota and minute, GPUs In Quota, borrowed and pending."""

    queryset = UsageSample.objects.select_related("quota").order_by("at", "quota_id")
    serializer_class = s.UsageSampleSerializer
    noun = "usage sample"

    @extend_schema(parameters=[s.UsageQuerySerializer])
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Samples oldest first; ``?quota=`` (name or id), ``?since=`` and ``?until=``."""
        return super().list(request, *args, **kwargs)

    def filter_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Apply the quota and time window."""
        refuse_unknown(self.request, self, list(s.UsageQuerySerializer().fields))
        query = s.UsageQuerySerializer(data=self.request.query_params)
        if not query.is_valid():
            raise exceptions.ValidationError(query.errors)
        values = query.validated_data
        quota = values.get("quota")
        if quota:
            queryset = (
                queryset.filter(quota_id=int(quota))
                if is_digits(quota)
                else queryset.filter(quota__name=quota)
            )
        if "since" in values:
            queryset = queryset.filter(at__gte=values["since"])
        if "until" in values:
            queryset = queryset.filter(at__lte=values["until"])
        return queryset
