"""Resource pools, node pools and nodes move to cluster; quotas points its foreign keys there.

State only (cluster/migrations/0001_initial.py): the tables and columns do not change.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("quotas", "0002_quota_allowed_node_pools"),
        ("cluster", "0001_initial"),
        # jobs stops pointing at quotas' node pools and nodes before they leave quotas' state
        ("jobs", "0005_move_write_lock"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="quota",
                    name="resource_pool",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="quotas", to="cluster.resourcepool"),
                ),
                migrations.AlterField(
                    model_name="quota",
                    name="allowed_node_pools",
                    field=models.ManyToManyField(blank=True, help_text="The only node pools its workloads may run in; empty = every pool its parent allows.", related_name="restricted_quotas", to="cluster.nodepool"),
                ),
                migrations.AlterField(
                    model_name="quotaresource",
                    name="node_pool",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+", to="cluster.nodepool"),
                ),
                migrations.DeleteModel(name="Node"),
                migrations.DeleteModel(name="NodePool"),
                migrations.DeleteModel(name="ResourcePool"),
            ]
        ),
    ]
