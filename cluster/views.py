"""Node pool and node pages for platform admins."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views import View
from django.views.generic import FormView, TemplateView

from cluster.forms import NodeImportForm, NodePoolForm
from cluster.models import Node
from cluster.selectors import node_pools_with_counts
from cluster.services import node_pool_create, node_schedulable_set, nodes_import
from console.errors import DomainError
from console.numbers import is_digits
from console.permissions import PlatformAdminRequiredMixin


class NodePoolListView(PlatformAdminRequiredMixin, TemplateView):
    """Node pools with their node and GPU counts."""

    template_name = "nodes/pools.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Every node pool, with totals."""
        context = super().get_context_data(**kwargs)
        context["node_pools"] = node_pools_with_counts()
        totals = Node.objects.aggregate(nodes=Count("pk"), gpus=Sum("gpus"))
        context["total_nodes"] = totals["nodes"]
        context["total_gpus"] = totals["gpus"] or 0
        return context


class NodePoolCreateView(PlatformAdminRequiredMixin, FormView):  # type: ignore[type-arg]
    """New node pool."""

    template_name = "nodes/pool_form.html"
    form_class = NodePoolForm

    def form_valid(self, form: NodePoolForm) -> HttpResponse:
        """Create it through the service; show refusals on their field."""
        data = form.cleaned_data
        try:
            pool = node_pool_create(
                resource_pool=data["resource_pool"],
                name=data["name"],
                gpu_model=data["gpu_model"],
            )
        except DomainError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            return self.form_invalid(form)
        messages.success(self.request, f"Node pool {pool.name} created.")
        return redirect("nodes:pool", pk=pool.pk)


NODES_PER_PAGE = 100


class NodePoolDetailView(PlatformAdminRequiredMixin, TemplateView):
    """The nodes of one pool, a page of 100 at a time (openb's G2 pool has 549)."""

    template_name = "nodes/pool_detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The pool, its totals and one page of its nodes (?page=N; out of range shows the last)."""
        context = super().get_context_data(**kwargs)
        pool = get_object_or_404(node_pools_with_counts(), pk=kwargs["pk"])
        nodes = Node.objects.filter(node_pool=pool).order_by("name")
        page = Paginator(nodes, NODES_PER_PAGE).get_page(self.request.GET.get("page"))
        context.update(pool=pool, page=page, nodes=page.object_list)
        return context


class NodeSchedulableView(PlatformAdminRequiredMixin, View):
    """Cordon or uncordon one node (POST only)."""

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Set schedulable from the form, then go back to the pool."""
        node = get_object_or_404(Node, pk=pk)
        schedulable = request.POST.get("schedulable") == "1"
        node_schedulable_set(node=node, schedulable=schedulable)
        state = "schedulable" if schedulable else "cordoned"
        messages.success(request, f"Node {node.name} is now {state}.")
        back = reverse("nodes:pool", kwargs={"pk": node.node_pool_id})
        page = request.POST.get("page", "")
        return HttpResponseRedirect(f"{back}?page={page}" if is_digits(page) else back)


class NodeImportView(PlatformAdminRequiredMixin, FormView):  # type: ignore[type-arg]
    """Import nodes from a CSV or YAML cluster spec; a bad file is refused whole."""

    template_name = "nodes/import.html"
    form_class = NodeImportForm

    def get_initial(self) -> dict[str, Any]:
        """Preselect the only or the "general" resource pool."""
        from cluster.models import ResourcePool

        pool = ResourcePool.objects.filter(name="general").first() or ResourcePool.objects.first()
        return {"resource_pool": pool}

    def form_valid(self, form: NodeImportForm) -> HttpResponse:
        """Run the import service; show its refusal on the file field."""
        data = form.cleaned_data
        try:
            result = nodes_import(
                resource_pool=data["resource_pool"],
                text=data["spec"],
                fmt=data["format"],
                filename=data["filename"],
            )
        except DomainError as exc:
            field = exc.field if exc.field in form.fields else None
            form.add_error(field, f"{exc.message}. Nothing was imported.")
            return self.form_invalid(form)
        created = (
            f" Created node pools: {', '.join(result.pools_created)}."
            if result.pools_created
            else ""
        )
        messages.success(
            self.request,
            f"Imported {result.nodes} nodes with {result.gpus} GPUs in "
            f"{len(result.pools)} node pools.{created}",
        )
        return redirect("nodes:pools")
