"""Resource pools, node pools, nodes (from quotas) and the write lock (from jobs) join cluster.

State only: the tables keep their names (each model's db_table), so no row moves. quotas 0003
and jobs 0005 point their foreign keys here and drop the old models from their state; 0002
moves the content types (and with them permissions and guardian's object permissions).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("quotas", "0002_quota_allowed_node_pools"),
        ("jobs", "0004_event_kind_limit"),
    ]

    state_operations = [
        migrations.CreateModel(
            name="ResourcePool",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100, unique=True)),
                ("idle_scope", models.CharField(choices=[("tree", "Same quota tree"), ("pool", "Whole resource pool")], default="tree", max_length=8)),
                ("description", models.TextField(blank=True)),
            ],
            options={
                "db_table": "quotas_resourcepool",
                "ordering": ["name"],
                "permissions": [("manage_cluster", "Manage resource pools, node pools, nodes and quotas")],
            },
        ),
        migrations.CreateModel(
            name="NodePool",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100, unique=True)),
                ("gpu_model", models.CharField(max_length=100)),
                ("label_selector", models.JSONField(blank=True, default=dict)),
                ("resource_pool", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="node_pools", to="cluster.resourcepool")),
            ],
            options={"db_table": "quotas_nodepool", "ordering": ["name"]},
        ),
        migrations.CreateModel(
            name="Node",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=253, unique=True)),
                ("gpus", models.PositiveIntegerField()),
                ("cpu", models.PositiveBigIntegerField(help_text="millicores")),
                ("memory", models.PositiveBigIntegerField(help_text="MiB")),
                ("labels", models.JSONField(blank=True, default=dict)),
                ("schedulable", models.BooleanField(default=True)),
                ("node_pool", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="nodes", to="cluster.nodepool")),
            ],
            options={"db_table": "quotas_node", "ordering": ["name"]},
        ),
        migrations.CreateModel(
            name="WriteLock",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("version", models.PositiveBigIntegerField(default=0)),
            ],
            options={"db_table": "jobs_writelock"},
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations),
    ]
