"""Forms of the node pool pages: they collect input; the services decide."""

from __future__ import annotations

from typing import Any

from django import forms

from cluster.models import ResourcePool
from cluster.node_import import FORMATS

MAX_UPLOAD_BYTES = 10 * 1024 * 1024


class NodePoolForm(forms.Form):
    """New node pool: one GPU model in one resource pool."""

    resource_pool = forms.ModelChoiceField(queryset=ResourcePool.objects.all(), empty_label=None)
    name = forms.CharField(max_length=100)
    gpu_model = forms.CharField(max_length=100, required=False, help_text="Defaults to the name.")


class NodeImportForm(forms.Form):
    """A cluster spec, uploaded as a file or pasted as text."""

    resource_pool = forms.ModelChoiceField(queryset=ResourcePool.objects.all(), empty_label=None)
    format = forms.ChoiceField(
        choices=[(f, {"auto": "Detect", "csv": "CSV", "yaml": "YAML"}[f]) for f in FORMATS],
        initial="auto",
    )
    file = forms.FileField(required=False)
    text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 90, "spellcheck": "false"}),
        label="Or paste the spec",
    )

    def clean(self) -> dict[str, Any]:
        """Exactly one source: the file wins if both are given; read it as UTF-8."""
        data = super().clean() or {}
        upload = data.get("file")
        if upload is not None:
            if upload.size > MAX_UPLOAD_BYTES:
                self.add_error("file", f"The file is {upload.size} bytes; the limit is 10 MiB.")
                return data
            try:
                data["spec"] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                self.add_error("file", "The file is not UTF-8 text.")
                return data
            data["filename"] = upload.name or ""
        elif (data.get("text") or "").strip():
            data["spec"] = data["text"]
            data["filename"] = ""
        else:
            self.add_error("file", "Choose a CSV or YAML file, or paste its text.")
        return data
