"""A trigger-based audit of every commit that writes pods or workloads (PostgreSQL only).

The final state can hide a broken invariant that a later commit repaired (an over-allocated
node whose extra pod then ended), so triggers check each transaction as it commits and
record what they find in a table of their own instead of raising: the test reports every
finding, and the code under test runs unchanged.

- At commit (deferred constraint triggers on pod inserts and updates, and on workload status
  changes): the pod's node is within capacity (GPUs, each GPU device, CPU, memory, counting
  every live pod on it); a live pod's workload has not ended; an ended workload has no live
  pod.
- At each update (row triggers): a pod's status only moves forward (Pending, Running, then
  an end state that never changes again), and an ended workload's status never changes.

A trigger sees what its transaction sees at commit: two transactions committing at the same
instant may each miss the other's rows, so the audit can miss a violation but never invents
one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from django.db import connection

from jobs.choices import ENDED_STATUSES, LIVE_POD_STATUSES, PodStatus

from .invariants import Violation


def _sql_list(values: Iterable[str]) -> str:
    """Status values as an SQL list literal: ('A', 'B')."""
    return "(" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + ")"


TABLE = "test_commit_audit"
LIVE = _sql_list(LIVE_POD_STATUSES)
ENDED_PODS = _sql_list(s for s in PodStatus.values if s not in LIVE_POD_STATUSES)
ENDED_WORKLOADS = _sql_list(ENDED_STATUSES)

INSTALL = f"""
CREATE TABLE {TABLE} (
    id bigserial PRIMARY KEY,
    xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    rule text NOT NULL,
    detail text NOT NULL,
    UNIQUE (xid, rule, detail)
);

CREATE FUNCTION test_audit_record(rule text, detail text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO {TABLE} (rule, detail) VALUES (rule, detail) ON CONFLICT DO NOTHING
$$;

-- Every live pod on the node, against the node's capacity.
CREATE FUNCTION test_audit_node(node_id bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n record;
    used record;
    d record;
BEGIN
    SELECT name, gpus, cpu, memory INTO n FROM quotas_node WHERE id = node_id;
    SELECT count(*) AS pods, coalesce(sum(w.gpu), 0) AS gpu, coalesce(sum(w.cpu), 0) AS cpu,
           coalesce(sum(w.memory), 0) AS memory
      INTO used
      FROM jobs_pod p JOIN jobs_workload w ON w.id = p.workload_id
     WHERE p.node_id = test_audit_node.node_id AND p.status IN {LIVE};
    IF used.gpu > n.gpus * 1000 THEN
        PERFORM test_audit_record('node gpu over capacity', format(
            '%s: %s of %s milli-GPU held by %s live pods', n.name, used.gpu, n.gpus * 1000,
            used.pods));
    END IF;
    IF used.cpu > n.cpu THEN
        PERFORM test_audit_record('node cpu over capacity', format(
            '%s: %s of %s millicores held by %s live pods', n.name, used.cpu, n.cpu, used.pods));
    END IF;
    IF used.memory > n.memory THEN
        PERFORM test_audit_record('node memory over capacity', format(
            '%s: %s of %s MiB held by %s live pods', n.name, used.memory, n.memory, used.pods));
    END IF;
    FOR d IN
        SELECT dev.value::int AS device, sum(least(w.gpu, 1000)) AS share,
               string_agg(p.id::text, ', ' ORDER BY p.id) AS pods
          FROM jobs_pod p JOIN jobs_workload w ON w.id = p.workload_id,
               jsonb_array_elements_text(p.devices) AS dev(value)
         WHERE p.node_id = test_audit_node.node_id AND p.status IN {LIVE}
         GROUP BY dev.value::int
        HAVING sum(least(w.gpu, 1000)) > 1000 OR dev.value::int >= n.gpus
    LOOP
        PERFORM test_audit_record('GPU device over capacity', format(
            '%s device %s: %s of 1000 milli-GPU (pods %s)', n.name, d.device, d.share, d.pods));
    END LOOP;
END $$;

-- At commit: the pod as it stands then, its node and its workload.
CREATE FUNCTION test_audit_pod_commit() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    pod record;
BEGIN
    SELECT p.id, p.status, p.node_id, w.name, w.status AS workload_status INTO pod
      FROM jobs_pod p JOIN jobs_workload w ON w.id = p.workload_id
     WHERE p.id = NEW.id;
    IF NOT FOUND OR pod.status NOT IN {LIVE} THEN
        RETURN NULL;
    END IF;
    IF pod.workload_status IN {ENDED_WORKLOADS} THEN
        PERFORM test_audit_record('live pod of an ended workload', format(
            'pod %s of %s committed %s while %s is %s', pod.id, pod.name, pod.status, pod.name,
            pod.workload_status));
    END IF;
    IF pod.node_id IS NOT NULL THEN
        PERFORM test_audit_node(pod.node_id);
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER test_audit_pod_commit
AFTER INSERT OR UPDATE ON jobs_pod
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION test_audit_pod_commit();

-- At commit: a workload that ended has no live pod left.
CREATE FUNCTION test_audit_workload_commit() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    w record;
    live text;
BEGIN
    SELECT name, status INTO w FROM jobs_workload WHERE id = NEW.id;
    IF NOT FOUND OR w.status NOT IN {ENDED_WORKLOADS} THEN
        RETURN NULL;
    END IF;
    SELECT string_agg(format('%s (%s)', id, status), ', ' ORDER BY id) INTO live
      FROM jobs_pod WHERE workload_id = NEW.id AND status IN {LIVE};
    IF live IS NOT NULL THEN
        PERFORM test_audit_record('live pod of an ended workload', format(
            '%s committed %s with live pods %s', w.name, w.status, live));
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER test_audit_workload_commit
AFTER UPDATE OF status ON jobs_workload
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW WHEN (NEW.status IN {ENDED_WORKLOADS})
EXECUTE FUNCTION test_audit_workload_commit();

-- At each update: pod status only moves forward.
CREATE FUNCTION test_audit_pod_status() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM test_audit_record('pod status moved backwards', format(
        'pod %s (workload %s, attempt %s): %s -> %s (%s)', NEW.id, NEW.workload_id,
        NEW.attempt, OLD.status, NEW.status, OLD.reason));
    RETURN NULL;
END $$;

CREATE TRIGGER test_audit_pod_status
AFTER UPDATE OF status ON jobs_pod
FOR EACH ROW
WHEN (OLD.status IS DISTINCT FROM NEW.status AND (
    OLD.status IN {ENDED_PODS} OR (OLD.status = 'Running' AND NEW.status IN {LIVE})))
EXECUTE FUNCTION test_audit_pod_status();

-- At each update: an ended workload stays ended, as it ended.
CREATE FUNCTION test_audit_workload_status() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM test_audit_record('ended workload changed status', format(
        '%s: %s -> %s (%s)', NEW.name, OLD.status, NEW.status, OLD.status_reason));
    RETURN NULL;
END $$;

CREATE TRIGGER test_audit_workload_status
AFTER UPDATE OF status ON jobs_workload
FOR EACH ROW
WHEN (OLD.status IS DISTINCT FROM NEW.status AND OLD.status IN {ENDED_WORKLOADS})
EXECUTE FUNCTION test_audit_workload_status();
"""

UNINSTALL = f"""
DROP TRIGGER IF EXISTS test_audit_pod_commit ON jobs_pod;
DROP TRIGGER IF EXISTS test_audit_pod_status ON jobs_pod;
DROP TRIGGER IF EXISTS test_audit_workload_commit ON jobs_workload;
DROP TRIGGER IF EXISTS test_audit_workload_status ON jobs_workload;
DROP FUNCTION IF EXISTS test_audit_pod_commit();
DROP FUNCTION IF EXISTS test_audit_pod_status();
DROP FUNCTION IF EXISTS test_audit_workload_commit();
DROP FUNCTION IF EXISTS test_audit_workload_status();
DROP FUNCTION IF EXISTS test_audit_node(bigint);
DROP FUNCTION IF EXISTS test_audit_record(text, text);
DROP TABLE IF EXISTS {TABLE};
"""


def install() -> None:
    """Create the audit table and its triggers in the test database."""
    with connection.cursor() as cursor:
        cursor.execute(UNINSTALL)
        cursor.execute(INSTALL)


def uninstall() -> None:
    """Drop the triggers and the table."""
    with connection.cursor() as cursor:
        cursor.execute(UNINSTALL)


def findings() -> list[Violation]:
    """What the triggers recorded, one per rule and detail, with how many commits showed it."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT rule, detail FROM {TABLE} ORDER BY id")
        rows: Counter[tuple[str, str]] = Counter(cursor.fetchall())
    return [
        Violation(f"at commit: {rule}", detail + (f" (in {n} commits)" if n > 1 else ""))
        for (rule, detail), n in rows.items()
    ]
