"""Point jobs' foreign keys at cluster's node pools and nodes; the write lock moves to cluster.

State only (cluster/migrations/0001_initial.py): the tables and columns do not change.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0004_event_kind_limit"),
        ("cluster", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="workload",
                    name="node_pools",
                    field=models.ManyToManyField(related_name="+", to="cluster.nodepool"),
                ),
                migrations.AlterField(
                    model_name="pod",
                    name="node",
                    field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="pods", to="cluster.node"),
                ),
                migrations.DeleteModel(name="WriteLock"),
            ]
        ),
    ]
