"""POST /api/v1/report/: the report endpoint as a Django view (token auth, so no CSRF)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from jobs.reports.accept import report_accept


@csrf_exempt
@require_POST
def report_view(request: HttpRequest) -> HttpResponse:
    """Take one report from a replica's code (jobs.reports.accept says the answers)."""
    answer = report_accept(
        authorization=request.headers.get("Authorization", ""), body=request.body
    )
    response = HttpResponse(answer.content(), status=answer.status, content_type="application/json")
    if answer.status == 401:
        response["WWW-Authenticate"] = "Bearer"
    return response
