"""A release N applied long ago by another client costs no drain wait; a release N that flips storage still does.

On a real kube-apiserver + etcd, one role run over three CRDs whose objects are stored at v1alpha1:

* ``puts``: release N (storage v1beta1) was applied by a PUT, more than a drain window before the run;
* ``applies``: the same by another field manager's server-side apply (as Flux or Helm 4 apply);
* ``flips``: release N is not applied yet; the role's storage flip applies it.

The apiserver records no flip time but the ``time`` of the managedFields entry owning ``spec``; the role's own apply
of a release already in effect would add its entry, timed now, and the re-store would wait a whole drain window for
it. So: for ``puts`` and ``applies`` the role sends no apply (no entry of its manager owns spec), the drain counts
from the other client's write and waits nothing; for ``flips`` the role applies release N and the drain counts from
that apply. Every etcd key of the three ends at v1beta1 and storedVersions is trimmed.
"""
from __future__ import annotations

import calendar
import json
import re
import sys
import time
from pathlib import Path

import yaml

from tests.controlplane.etcd_reader import scan_storage
from tests.integration.modrun import ansible_playbook
from tests.integration.seed import Seeded, crd_at, flip_storage, seed_old_objects

COUNT = 4
WINDOW = 4  # the drain window of the run, seconds: the flips by other clients are older than it
ADMISSION_MARGIN_S = 10  # drain.py: a flip's commit is taken as up to this long after its managedFields stamp
MANAGER = "crdops-migration"  # the role's crd_upgrade_field_manager (default)
APPLY = "application/apply-patch+yaml"


def epoch(text: str) -> int:
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))


def spec_owners(crd: dict) -> list[dict]:
    return [e for e in crd["metadata"].get("managedFields") or []
            if not e.get("subresource") and "f:spec" in (e.get("fieldsV1") or {})]


def run_role(cluster, tmp_path: Path, seeded: list[Seeded]) -> tuple[dict, str]:
    """One run of the role as fleet_upgrade.yml includes it, release N only (no N+1): (crd_upgrade_result, stdout)."""
    release = tmp_path / "release-n.yaml"
    release.write_text(yaml.safe_dump_all([crd_at(s, "v1beta1") for s in seeded]))
    play = [{"name": "one cluster", "hosts": "clusters", "gather_facts": False, "tasks": [
        {"name": "Upgrade this cluster", "ansible.builtin.include_role": {"name": "crdops.migration.crd_upgrade"}},
        {"name": "Keep the result", "ansible.builtin.copy": {
            "content": "{{ crd_upgrade_result | to_json }}", "dest": str(tmp_path / "result.json")}}]}]
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
            "crd_upgrade_release_manifests": [str(release)], "crd_upgrade_crd_names": [s.crd_name for s in seeded],
            "crd_upgrade_drain_window": WINDOW, "crd_upgrade_settle_seconds": 0, "crd_upgrade_writers_window": 0,
            # not what this test is about: the access reviews and the sample dry-run
            "crd_upgrade_preflight": False}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": {"clusters": {"hosts": {
        "in-effect-cluster": host}}}}}))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    proc = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml"))
    assert proc.returncode == 0, proc.stdout[-6000:]
    return json.loads((tmp_path / "result.json").read_text()), proc.stdout


def test_release_n_in_effect_is_not_reapplied_and_costs_no_drain(cluster, kube, group, tmp_path):
    flips = seed_old_objects(kube, group, COUNT, ("ns-a",), plural="flips", kind="Flip", flip=False)
    puts = seed_old_objects(kube, group, COUNT, ("ns-a",), plural="puts", kind="Put", flip=False)
    applies = seed_old_objects(kube, group, COUNT, ("ns-a",), plural="applies", kind="Apply", flip=False)
    flip_storage(kube, puts, "v1beta1")  # a PUT (an Update entry owns spec)
    kube.request("PATCH", kube.crd_path(applies.crd_name), crd_at(applies, "v1beta1"), APPLY,
                 query={"fieldManager": "flux", "force": "true"})
    kube.wait_established(applies.crd_name)
    # older than the window, its whole-second clock grain and the admission margin drain.py adds after a flip's stamp
    time.sleep(WINDOW + ADMISSION_MARGIN_S + 1.5)
    started = int(time.time())

    result, stdout = run_role(cluster, tmp_path, [flips, puts, applies])

    crds = {c["name"]: c for c in result["crds"]}
    assert result["status"] == "ok" and result["flipped"] == [flips.crd_name], result
    for s in (flips, puts, applies):
        assert dict(scan_storage(cluster.etcd_url, s.group, s.plural).counts) == {s.new(): COUNT}, s.crd_name
        assert kube.get_crd(s.crd_name)["status"]["storedVersions"] == ["v1beta1"], s.crd_name
        assert crds[s.crd_name]["rewritten"] == COUNT, crds[s.crd_name]

    for s, owner in ((puts, None), (applies, "flux")):
        crd = kube.get_crd(s.crd_name)
        owners = spec_owners(crd)
        # the role sent no apply: no entry of its manager owns spec, the newest owner is the other client's
        assert not [e for e in owners if e["manager"] == MANAGER], owners
        newest = max(owners, key=lambda e: epoch(e["time"]))
        assert epoch(newest["time"]) < started and (owner is None or newest["manager"] == owner), owners
        drain = crds[s.crd_name]["drain"]
        assert drain["anchor"] == "flip" and drain["spec_changed_at"] == newest["time"], drain
        assert drain["waited_s"] == 0, drain
        assert crds[s.crd_name]["plan"]["release_in_effect"], crds[s.crd_name]["plan"]
        assert re.search(re.escape(s.crd_name) + r": listed %d, .* drained 0\.0s" % COUNT, stdout), stdout[-6000:]
    assert re.search(r"release N already in effect, not re-applied", stdout), stdout[-6000:]

    # the real flip: the role applied release N, and the drain counted from that apply
    crd = kube.get_crd(flips.crd_name)
    (ours,) = [e for e in spec_owners(crd) if e["manager"] == MANAGER and e["operation"] == "Apply"]
    assert epoch(ours["time"]) >= started - 1, ours
    drain = crds[flips.crd_name]["drain"]
    assert drain["anchor"] == "flip" and drain["spec_changed_at"] == ours["time"], drain
    assert not crds[flips.crd_name]["plan"]["release_in_effect"]
    record = json.loads(crd["metadata"]["annotations"]["migration.crdops.io/storage-migration"])
    # no write counted towards the record before the window after the flip (whole seconds: +1)
    assert epoch(record["completedAt"]) >= epoch(ours["time"]) + WINDOW, (record, ours)
