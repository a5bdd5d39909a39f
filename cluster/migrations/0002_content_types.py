"""Move the content types of the models that joined cluster, keeping their ids.

Permissions (manage_cluster, view_node, …), guardian's object permissions and admin log
entries point at content type ids, so renaming app_label in place carries them all over. On
a new database there is nothing to rename: the content types are created after migrate.
"""

from django.db import migrations

MOVED = {"resourcepool": "quotas", "nodepool": "quotas", "node": "quotas", "writelock": "jobs"}


def rename(apps, schema_editor, *, forward=True):
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model, old in MOVED.items():
        src, dst = (old, "cluster") if forward else ("cluster", old)
        found = ContentType.objects.using(db).filter(app_label=src, model=model).first()
        if found is None:
            continue
        # A content type created for the new label in between holds only default rows.
        ContentType.objects.using(db).filter(app_label=dst, model=model).delete()
        found.app_label = dst
        found.save(update_fields=["app_label"])


def backward(apps, schema_editor):
    rename(apps, schema_editor, forward=False)


class Migration(migrations.Migration):

    dependencies = [
        ("cluster", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("quotas", "0003_move_cluster_models"),
        ("jobs", "0005_move_write_lock"),
    ]

    operations = [migrations.RunPython(rename, backward)]
