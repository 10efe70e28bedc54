"""README's "Install and run it", followed literally as a new user would, against two local clusters.

A fresh venv with ansible-core only and a HOME of its own; README's commands run as written, in a shell, from
a working directory holding the release tarball: the tarball installed with ansible-galaxy into the default
path, the Python requirements with README's pip line, the example inventory taken out of the tarball with its
relative `releases/.../crds/*.yaml` globs, then the plan (--check), the run and a rerun. The only edits are
the ones README asks for: the user's clusters in the inventory, and a kubeconfig at the path it names.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from tests.controlplane.cluster import admin_kube
from tests.controlplane.etcd_reader import current_revision, keys_written_since, scan_storage
from tests.integration.fresh_venv import fresh_machine, galaxy_stand_in
from tests.integration.seed import crd_at, seed_old_objects

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def readme_install_and_run() -> list[str]:
    """The command lines of the bash block of README's "Install and run it" section, comments left out."""
    section = (REPO / "README.md").read_text().split("## Install and run it", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def the_users_inventory(example: dict, clusters, etcd_url: str) -> dict:
    """README: "start from playbooks/inventory.example.yml, set your clusters in it". The example's group
    vars stay as they are (the relative release globs, the kubeconfig path); its hosts become ours, the first
    with the etcd proof like the example's first host (test etcd is plain HTTP: no client certificate)."""
    group = example["all"]["children"]["clusters"]
    first = {k: v for k, v in next(iter(group["hosts"].values())).items() if not k.endswith(("_cert", "_key"))}
    first.update(context=clusters[0].context, crd_upgrade_etcd_url=etcd_url)
    group["hosts"] = {clusters[0].name: first, clusters[1].name: {"context": clusters[1].context}}
    group["vars"]["crd_upgrade_settle_seconds"] = 0   # a test's clusters have no other apiserver to wait for
    group["vars"]["crd_upgrade_drain_window"] = 1   # no request is held across the flip here (default 65 s)
    group["vars"]["crd_upgrade_writers_window"] = 0   # nothing else uses the cluster: no request counters to watch
    return example


def write_releases(workdir: Path, inventory: dict, s) -> None:
    """Release N (storage flips to v1beta1) and N+1 (v1alpha1 dropped) where the example's globs point."""
    group_vars = inventory["all"]["children"]["clusters"]["vars"]
    for globs, doc in ((group_vars["crd_upgrade_release_manifests"], crd_at(s, "v1beta1")),
                       (group_vars["crd_upgrade_target_manifests"], crd_at(s, "v1beta1", served=("v1beta1",)))):
        assert len(globs) == 1 and not globs[0].startswith("/"), globs   # relative, as the example has them
        folder = workdir / Path(globs[0]).parent
        folder.mkdir(parents=True)
        (folder / "crds.yaml").write_text(yaml.safe_dump(doc))


def recap(out: str) -> dict[str, str]:
    """PLAY RECAP lines: host -> 'ok=.. changed=.. ...'."""
    tail = out.rsplit("PLAY RECAP", 1)[1]
    return {line.split(":")[0].strip(): line.split(":", 1)[1].strip() for line in tail.splitlines() if ": ok=" in line}


def console_tells_the_runbook(out: str, counts: dict[str, int], crd_name: str) -> None:
    """The runbook callback: no task headers when nothing fails; per cluster its plan, the re-store's progress
    with percent and ETA, and at the end one line per CRD that changed; a screen per cluster, not hundreds."""
    assert "TASK [" not in out and "included:" not in out, out[:3000]
    for host, n in counts.items():
        assert f"{host} | Discover | plan:" in out and f"PLAN {host}: 1 CRD(s) change" in out, out[:3000]
        # a cluster without etcd ends on its confirming pass's line, which names that pass
        assert re.search(rf"{host} \| CRD 1/1 {re.escape(crd_name)}(, confirming pass \([^)]*\))?: {n}/{n} objects "
                         rf"\(100.0%\).* ETA ", out), out
        assert f"{host}: ok - 1 CRD(s) changed, {n} objects re-stored of {n}" in out, out[-3000:]
        assert f"    {crd_name}: storage v1alpha1 -> v1beta1; re-stored {n} of {n}" in out, out[-3000:]
    # the fleet report's summary speaks for the fleet, not for the host it ran on
    assert "fleet | Report | summary:" in out and f"{len(counts)} clusters: {len(counts)} done" in out, out[-3000:]
    lines = out.splitlines()
    assert len(lines) <= 60 * len(counts), f"{len(lines)} lines for {len(counts)} clusters:\n{out}"


def test_readme_install_and_run_literally(fleet3, tmp_path):
    galaxy, tarball_install, pip_install, take_inventory, console, plan, run = readme_install_and_run()
    assert console == "export ANSIBLE_STDOUT_CALLBACK=crdops.migration.runbook", console
    # one shell per command here; a user's export holds for the commands typed after it
    plan, run = f"{console} && {plan}", f"{console} && {run}"
    clusters = fleet3.clusters[:2]
    group = f"readme{uuid.uuid4().hex[:6]}.crdops.test"
    counts = {clusters[0].name: 40, clusters[1].name: 25}
    seeds = [seed_old_objects(admin_kube(c), group, counts[c.name], flip=False) for c in clusters]
    s = seeds[0]

    # the release tarball, as `ansible-galaxy collection build` makes it, in the user's working directory
    workdir = tmp_path / "work"
    workdir.mkdir()
    build = [str(BIN / "ansible-galaxy"), "collection", "build", str(REPO), "--output-path", str(workdir)]
    subprocess.run(build, check=True, capture_output=True)
    tarball = next(workdir.glob("crdops-migration-*.tar.gz")).name
    assert galaxy == "ansible-galaxy collection install crdops.migration"   # from Galaxy: not reachable offline
    assert tarball_install == f"ansible-galaxy collection install {tarball}", (tarball_install, tarball)

    machine = fresh_machine(tmp_path / "machine", shlex.split(pip_install)[4:])
    # kubernetes.core, which ansible-galaxy would fetch from Galaxy with the tarball, is there already
    galaxy_stand_in(machine, "kubernetes", "core")
    machine.sh(tarball_install, workdir)
    installed = machine.home / ".ansible" / "collections" / "ansible_collections" / "crdops" / "migration"
    assert (installed / "MANIFEST.json").exists()
    assert not machine.sh_may_fail("python3 -c 'import kubernetes'", workdir).returncode == 0   # not yet
    machine.sh(pip_install, workdir)
    machine.sh(take_inventory, workdir)

    inventory = the_users_inventory(yaml.safe_load((workdir / "fleet.yml").read_text()), clusters,
                                    clusters[0].etcd_url)
    (workdir / "fleet.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    kubeconfig = Path(inventory["all"]["children"]["clusters"]["vars"]["kubeconfig"].replace("~", str(machine.home)))
    kubeconfig.parent.mkdir(parents=True)
    kubeconfig.write_text(fleet3.kubeconfig.read_text())
    write_releases(workdir, inventory, s)

    before = {c.name: current_revision(c.etcd_url) for c in clusters}
    planned = machine.sh(plan, workdir)
    for c in clusters:
        assert keys_written_since(c.etcd_url, before[c.name]) == [], c.name   # the plan writes nothing
        assert scan_storage(c.etcd_url, group, s.plural).counts == {s.old(): counts[c.name]}
    assert all("failed=0" in line for line in recap(planned.stdout).values()), planned.stdout[-3000:]
    for c in clusters:
        assert f"PLAN {c.name}: 1 CRD(s) change ({s.crd_name}), {counts[c.name]} objects to re-store" in planned.stdout

    done = machine.sh(run, workdir)
    for c in clusters:
        assert scan_storage(c.etcd_url, group, s.plural).counts == {s.new(): counts[c.name]}, c.name
        crd = admin_kube(c).get_crd(s.crd_name)
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1beta1"]   # release N+1 applied
        assert crd["status"]["storedVersions"] == ["v1beta1"]
    assert {h: r for h, r in recap(done.stdout).items() if h != "localhost"}.keys() == counts.keys(), done.stdout[-3000:]
    assert all("failed=0" in line for line in recap(done.stdout).values()), done.stdout[-3000:]
    console_tells_the_runbook(done.stdout, counts, s.crd_name)
    reports = sorted((workdir / "crdops-report").rglob("fleet-report.json"))
    assert reports, "no report under the working directory"
    assert not list(installed.rglob("fleet-report.json")) and not (installed / "playbooks" / "releases").exists()

    after_run = {c.name: current_revision(c.etcd_url) for c in clusters}
    again = machine.sh(run, workdir)
    for c in clusters:   # nothing of the group's objects or its CRD is written again
        written = keys_written_since(c.etcd_url, after_run[c.name])
        assert not [k for k in written if group in k], (c.name, written)
    assert all("changed=0" in line and "failed=0" in line for line in recap(again.stdout).values()), \
        again.stdout[-3000:]
    latest = json.loads(max((workdir / "crdops-report").rglob("fleet-report.json"),
                            key=lambda p: p.stat().st_mtime).read_text())
    assert latest["summary"]["rewritten"] == 0 and latest["summary"]["failed"] == 0, latest["summary"]
