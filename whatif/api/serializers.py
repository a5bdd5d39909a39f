"""What-if resources: the request, and the replay to poll."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from whatif.choices import Window
from whatif.models import WhatIf


class WhatIfCreateSerializer(serializers.Serializer[Any]):
    """A window (24h, 7d, or custom with start and end) and the changes to replay."""

    window = serializers.ChoiceField(choices=Window.choices, default=Window.WEEK)
    start = serializers.DateTimeField(required=False, allow_null=True, default=None)
    end = serializers.DateTimeField(required=False, allow_null=True, default=None)
    changes = serializers.JSONField(
        help_text="A list of changes, each with a kind (whatif.changes)."
    )


class WhatIfSerializer(serializers.ModelSerializer[WhatIf]):
    """A replay: its inputs, status and progress (0 to 1), and its result once done."""

    created_by = serializers.CharField(source="created_by.username", default=None, read_only=True)
    url = serializers.SerializerMethodField()

    class Meta:
        model = WhatIf
        fields = [
            "id",
            "url",
            "created_at",
            "created_by",
            "window",
            "window_start",
            "window_end",
            "changes",
            "status",
            "progress",
            "error",
            "result",
        ]
        read_only_fields = fields

    def get_url(self, obj: WhatIf) -> str:
        """The result page."""
        from django.urls import reverse

        return reverse("whatif:detail", args=[obj.pk])


class WhatIfListSerializer(WhatIfSerializer):
    """A replay in a list: no result (fetch the replay for it)."""

    class Meta(WhatIfSerializer.Meta):
        fields = [f for f in WhatIfSerializer.Meta.fields if f != "result"]
        read_only_fields = fields
