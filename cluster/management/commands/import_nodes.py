"""manage.py import_nodes FILE --resource-pool NAME: import nodes from a CSV or YAML spec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster.models import ResourcePool
from cluster.node_import import FORMATS
from cluster.services import nodes_import
from console.errors import DomainError


class Command(BaseCommand):
    """Import every node of the file, or none of them."""

    help = "Import nodes from a CSV (openb or native) or YAML cluster spec into a resource pool."

    def add_arguments(self, parser: CommandParser) -> None:
        """FILE, the resource pool and an optional format."""
        parser.add_argument("file", help="path to the CSV or YAML file")
        parser.add_argument("--resource-pool", default="general", help="resource pool name")
        parser.add_argument("--format", choices=FORMATS, default="auto")

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the import service and report what it added."""
        path = Path(options["file"])
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"Cannot read {path}: {exc}") from None
        pool = ResourcePool.objects.filter(name=options["resource_pool"]).first()
        if pool is None:
            raise CommandError(f"No resource pool named {options['resource_pool']!r}.")
        try:
            result = nodes_import(
                resource_pool=pool, text=text, fmt=options["format"], filename=path.name
            )
        except DomainError as exc:
            raise CommandError(f"{path.name}: {exc.message}. Nothing was imported.") from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {result.nodes} nodes with {result.gpus} GPUs in "
                f"{len(result.pools)} node pools"
                + (f" (created {', '.join(result.pools_created)})" if result.pools_created else "")
                + "."
            )
        )
