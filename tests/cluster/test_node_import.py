"""Importing nodes from CSV and YAML cluster specs: all of the file, or none of it."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Sum

from cluster.models import Node, NodePool, ResourcePool
from cluster.node_import import detect_format
from cluster.services import node_pool_create, nodes_import, resource_pool_create
from console.errors import DomainError

OPENB = Path(__file__).resolve().parents[2].parent / "shared/traces/openb"
OPENB_NODES = OPENB / "openb_node_list_gpu_node.csv"


@pytest.fixture
def pool(db: None) -> ResourcePool:
    return resource_pool_create(name="general")


def test_openb_node_list_imports_as_is(pool: ResourcePool) -> None:
    if not OPENB_NODES.exists():
        pytest.skip(f"openb trace not found at {OPENB_NODES}")
    result = nodes_import(resource_pool=pool, text=OPENB_NODES.read_text(), fmt="csv")
    assert (result.nodes, result.gpus) == (1213, 6212)
    assert Node.objects.count() == 1213
    assert Node.objects.aggregate(g=Sum("gpus"))["g"] == 6212
    assert sorted(NodePool.objects.values_list("name", flat=True)) == [
        "A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"
    ]  # fmt: skip
    assert set(NodePool.objects.values_list("resource_pool__name", flat=True)) == {"general"}
    assert NodePool.objects.get(name="G2").nodes.count() == 549
    node = Node.objects.get(name="openb-node-0000")
    assert (node.gpus, node.cpu, node.memory) == (2, 64000, 262144)
    assert node.labels == {"tidepool.io/gpu-model": "P100"}


def test_openb_import_refuses_a_second_run_whole(pool: ResourcePool) -> None:
    if not OPENB_NODES.exists():
        pytest.skip(f"openb trace not found at {OPENB_NODES}")
    text = OPENB_NODES.read_text()
    nodes_import(resource_pool=pool, text=text, fmt="csv")
    with pytest.raises(DomainError, match=r"line 2: node 'openb-node-0000' already exists"):
        nodes_import(resource_pool=pool, text=text, fmt="csv")
    assert Node.objects.count() == 1213


def test_native_csv_with_labels_fills_existing_and_new_pools(pool: ResourcePool) -> None:
    node_pool_create(resource_pool=pool, name="A100-80G", gpu_model="A100-80G")
    text = (
        "name,pool,gpus,cpu,memory,labels\n"
        "a-1,A100-80G,8,128000,1048576,rack=r1;zone=z1\n"
        "t-1,T4,4,32000,131072\n"
    )
    result = nodes_import(resource_pool=pool, text=text, fmt="auto")
    assert result.pools_created == ["T4"]
    assert Node.objects.get(name="a-1").labels == {
        "tidepool.io/gpu-model": "A100-80G", "rack": "r1", "zone": "z1"
    }  # fmt: skip
    assert Node.objects.get(name="t-1").node_pool.name == "T4"


def test_yaml_spec_with_node_pools(pool: ResourcePool) -> None:
    text = """
node_pools:
  - name: H100
    gpu_model: H100-80G
    labels: {accelerator: h100}
nodes:
  - {name: h-1, pool: H100, gpus: 8, cpu: 192000, memory: 2097152}
  - name: h-2
    pool: H100
    gpus: 8
    cpu: 192000
    memory: 2097152
    schedulable: false
    labels: {rack: r9}
"""
    result = nodes_import(resource_pool=pool, text=text, fmt="yaml")
    assert (result.nodes, result.gpus) == (2, 16)
    h100 = NodePool.objects.get(name="H100")
    assert (h100.gpu_model, h100.label_selector) == ("H100-80G", {"accelerator": "h100"})
    h2 = Node.objects.get(name="h-2")
    assert (h2.schedulable, h2.labels) == (False, {"accelerator": "h100", "rack": "r9"})


def test_yaml_plain_list_of_nodes(pool: ResourcePool) -> None:
    text = "- {name: n1, pool: T4, gpus: 1, cpu: 8000, memory: 32768}\n"
    assert nodes_import(resource_pool=pool, text=text, fmt="auto").nodes == 1


def test_node_pool_of_another_resource_pool_is_refused(pool: ResourcePool) -> None:
    other = resource_pool_create(name="other")
    node_pool_create(resource_pool=other, name="T4", gpu_model="T4")
    with pytest.raises(DomainError, match="line 2: node pool 'T4' belongs to resource pool"):
        nodes_import(resource_pool=pool, text="name,pool,gpus,cpu,memory\nn,T4,1,1,1\n")
    assert Node.objects.count() == 0


BAD_FILES = [
    pytest.param(
        "csv",
        "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,2,P100\nn2,64000,262144,eight,P100\n",
        "line 3: gpu 'eight' is not a whole number",
        id="bad-number",
    ),
    pytest.param(
        "csv",
        "sn,cpu_milli,gpu,model\nn1,64000,2,P100\n",
        "line 1: missing column 'memory_mib'",
        id="missing-column",
    ),
    pytest.param(
        "csv",
        "name,pool,gpus,cpu,memory\nn1,T4,1,8000,1024\nn2,T4,1,8000,1024\nn1,T4,1,8000,1024\n",
        "line 4: node name 'n1' is listed twice (first on line 2)",
        id="duplicate-in-file",
    ),
    pytest.param(
        "csv",
        "name,pool,gpus,cpu,memory\nn1,T4,1,-8000,1024\n",
        "line 2: cpu -8000 is negative (must be 0 or more)",
        id="negative-value",
    ),
    pytest.param(
        "csv",
        "name,pool,gpus,cpu,memory\nn1,T4,1,8000\n",
        "line 2: has 4 columns, the header has 5",
        id="short-row",
    ),
    pytest.param(
        "csv",
        "name,pool,gpus,cpu,memory\nn1,T4,1.5,8000,1024\n",
        "line 2: gpus '1.5' is not a whole number",
        id="fractional-gpus",
    ),
    pytest.param(
        "yaml",
        "nodes:\n  - name: n1\n    pool: T4\n    gpus: [1\n    cpu: 1\n",
        "line 5: not valid YAML",
        id="bad-yaml",
    ),
    pytest.param(
        "yaml",
        "nodes:\n  - {name: n1, pool: T4, gpus: 1, cpu: 1, memory: 1}\n"
        "  - {name: n2, pool: T4, gpus: two, cpu: 1, memory: 1}\n",
        "line 3: gpus 'two' is not a whole number",
        id="yaml-bad-number",
    ),
    pytest.param(
        "yaml",
        "- {name: n1, pool: T4, gpus: 1, cpu: 1}\n",
        "line 1: missing 'memory'",
        id="yaml-missing-key",
    ),
    pytest.param("csv", "", "The file is empty.", id="empty"),
]


@pytest.mark.parametrize(("fmt", "text", "message"), BAD_FILES)
def test_bad_file_is_refused_whole_with_line_and_reason(
    pool: ResourcePool, fmt: str, text: str, message: str
) -> None:
    nodes_import(resource_pool=pool, text="name,pool,gpus,cpu,memory\nkeep,T4,1,1,1\n")
    with pytest.raises(DomainError) as caught:
        nodes_import(resource_pool=pool, text=text, fmt=fmt)
    assert caught.value.field == "file"
    assert caught.value.message.startswith(message)
    assert list(Node.objects.values_list("name", flat=True)) == ["keep"]
    assert NodePool.objects.count() == 1


def test_name_already_in_database_is_refused_whole(pool: ResourcePool) -> None:
    nodes_import(resource_pool=pool, text="name,pool,gpus,cpu,memory\nold,T4,1,1,1\n")
    text = "name,pool,gpus,cpu,memory\nnew-1,V100,1,1,1\nold,V100,1,1,1\n"
    with pytest.raises(DomainError, match="line 3: node 'old' already exists"):
        nodes_import(resource_pool=pool, text=text)
    assert Node.objects.count() == 1
    assert not NodePool.objects.filter(name="V100").exists()


@pytest.mark.parametrize(
    ("text", "filename", "expected"),
    [
        ("sn,cpu_milli\n", "", "csv"),
        ("nodes:\n- {}\n", "", "yaml"),
        ("- name: x\n", "", "yaml"),
        ("anything", "spec.yml", "yaml"),
        ("anything: 1", "nodes.CSV", "csv"),
    ],
    ids=["csv-header", "yaml-mapping", "yaml-list", "yml-suffix", "csv-suffix"],
)
def test_format_is_detected(text: str, filename: str, expected: str) -> None:
    assert detect_format(text, filename) == expected


def test_management_command_imports_and_refuses(pool: ResourcePool, tmp_path: Path) -> None:
    good = tmp_path / "nodes.csv"
    good.write_text("name,pool,gpus,cpu,memory\nc1,T4,2,1,1\nc2,T4,2,1,1\n")
    out = StringIO()
    call_command("import_nodes", str(good), "--resource-pool", "general", stdout=out)
    assert "Imported 2 nodes with 4 GPUs in 1 node pools (created T4)." in out.getvalue()
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {name: c3, pool: T4, gpus: -1, cpu: 1, memory: 1}\n")
    with pytest.raises(CommandError, match="bad.yaml: line 1: gpus -1 is negative"):
        call_command("import_nodes", str(bad), "--resource-pool", "general")
    with pytest.raises(CommandError, match="No resource pool named 'nope'"):
        call_command("import_nodes", str(good), "--resource-pool", "nope")
    assert Node.objects.count() == 2
