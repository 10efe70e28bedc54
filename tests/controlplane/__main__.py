"""Command line: bring local clusters up and down by hand.

    python -m tests.controlplane build [--with-kcm]
    python -m tests.controlplane up [--clusters 3] [--ha] [--dir DIR]
    python -m tests.controlplane status [--dir DIR]
    python -m tests.controlplane down [--dir DIR]

`up` leaves the processes running in the background and records them in DIR/state.json, which
`status` and `down` read. The default DIR is /tmp/crdops-clusters.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from .binaries import HERE, find_binaries
from .cluster import start_fleet, start_ha_pair
from .processes import stop_pid

DEFAULT_DIR = Path(os.environ.get("CRDOPS_CLUSTERS_DIR", "/tmp/crdops-clusters"))


def _state_path(folder: Path) -> Path:
    return folder / "state.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def cmd_up(args: argparse.Namespace) -> int:
    folder = args.dir
    if _state_path(folder).exists():
        print(f"{folder} already has running clusters; run `down` first", file=sys.stderr)
        return 1
    binaries = find_binaries()
    if args.ha:
        cluster = start_ha_pair("ha", folder / "ha", binaries, detached=True)
        state = {"kubeconfig": str(cluster.kubeconfig), "clusters": [cluster.describe()]}
    else:
        fleet = start_fleet(args.clusters, folder, binaries, detached=True)
        state = {"kubeconfig": str(fleet.kubeconfig), "clusters": [c.describe() for c in fleet.clusters]}
    _state_path(folder).write_text(json.dumps(state, indent=2))
    print(json.dumps(state, indent=2))
    print(f"\nexport KUBECONFIG={state['kubeconfig']}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    path = _state_path(args.dir)
    if not path.exists():
        print(f"no clusters recorded in {args.dir}")
        return 1
    state = json.loads(path.read_text())
    healthy = True
    for cluster in state["clusters"]:
        alive = [pid for pid in cluster["pids"] if _pid_alive(pid)]
        ok = len(alive) == len(cluster["pids"])
        healthy &= ok
        print(f"{cluster['name']}: {'up' if ok else 'DEGRADED'} contexts={','.join(cluster['contexts'])} "
              f"servers={','.join(cluster['servers'])} etcd={cluster['etcd']}")
    print(f"kubeconfig: {state['kubeconfig']}")
    return 0 if healthy else 1


def cmd_down(args: argparse.Namespace) -> int:
    path = _state_path(args.dir)
    if not path.exists():
        print(f"no clusters recorded in {args.dir}")
        return 0
    state = json.loads(path.read_text())
    for cluster in state["clusters"]:
        for pid in reversed(cluster["pids"]):  # apiservers before their etcd
            stop_pid(pid)
    left = [p for c in state["clusters"] for p in c["pids"] if _pid_alive(p)]
    path.unlink()
    if left:
        print(f"processes still alive: {left}", file=sys.stderr)
        return 1
    print(f"stopped {len(state['clusters'])} cluster(s)")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    return subprocess.call([str(HERE / "build.sh")] + (["--with-kcm"] if args.with_kcm else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.controlplane", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build (or find cached) binaries")
    build.add_argument("--with-kcm", action="store_true")
    up = sub.add_parser("up", help="start clusters in the background")
    up.add_argument("--clusters", type=int, default=3)
    up.add_argument("--ha", action="store_true", help="one cluster with two apiservers on one etcd")
    for p in (up, sub.add_parser("status"), sub.add_parser("down")):
        p.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    return {"build": cmd_build, "up": cmd_up, "status": cmd_status, "down": cmd_down}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
