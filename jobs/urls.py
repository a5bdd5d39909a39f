"""Workspace-scoped workload pages: jobs, services, instances (the workspace name is the slug)."""

from __future__ import annotations

from django.urls import path

from jobs.views import instances, jobs, services

app_name = "jobs"
urlpatterns = [
    path("jobs/", jobs.JobListView.as_view(), name="job_list"),
    path("jobs/new/", jobs.JobSubmitView.as_view(), name="job_submit"),
    path("jobs/<int:pk>/", jobs.JobDetailView.as_view(), name="job_detail"),
    path("jobs/<int:pk>/live/", jobs.JobLiveView.as_view(), name="job_live"),
    path("jobs/<int:pk>/row/", jobs.JobRowView.as_view(), name="job_row"),
    path("jobs/<int:pk>/cancel/", jobs.JobCancelView.as_view(), name="job_cancel"),
    path("services/", services.ServiceListView.as_view(), name="service_list"),
    path("services/new/", services.ServiceCreateView.as_view(), name="service_create"),
    path("services/<int:pk>/", services.ServiceDetailView.as_view(), name="service_detail"),
    path("services/<int:pk>/live/", services.ServiceLiveView.as_view(), name="service_live"),
    path("services/<int:pk>/scale/", services.ServiceScaleView.as_view(), name="service_scale"),
    path("services/<int:pk>/rules/", services.ScalingRuleCreateView.as_view(), name="rule_create"),
    path(
        "services/<int:pk>/rules/<int:rule>/",
        services.ScalingRuleUpdateView.as_view(),
        name="rule_update",
    ),
    path(
        "services/<int:pk>/rules/<int:rule>/delete/",
        services.ScalingRuleDeleteView.as_view(),
        name="rule_delete",
    ),
    path("instances/", instances.InstanceListView.as_view(), name="instance_list"),
    path("instances/new/", instances.InstanceStartView.as_view(), name="instance_start"),
    path("instances/<int:pk>/", instances.InstanceDetailView.as_view(), name="instance_detail"),
    path("instances/<int:pk>/live/", instances.InstanceLiveView.as_view(), name="instance_live"),
    path("instances/<int:pk>/open/", instances.InstanceOpenView.as_view(), name="instance_open"),
    path("instances/<int:pk>/stop/", instances.InstanceStopView.as_view(), name="instance_stop"),
]
