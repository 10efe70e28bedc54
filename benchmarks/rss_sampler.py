"""Peak resident memory of a process tree, sampled from /proc (shared by benchmarks/fleet10.py and million.py).

ru_maxrss of the children (what /usr/bin/time -v prints) is the largest single process only, and the
crd_storage_migrate pass runs in a forked worker of ansible-playbook (plugins/action/crd_storage_migrate.py),
so we sample every process of the tree instead: the root (ansible-playbook), each descendant (its workers, the
module), and the sum over the tree, every `interval` seconds. VmHWM (the kernel's own peak) is read too, so a
spike between two samples of a process still alive at the next sample is not missed.
"""
from __future__ import annotations

import os
import threading


def _status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    out[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return out


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class TreeRss:
    """Sample the tree below `root` until stop(); peaks in KiB."""

    def __init__(self, root: int, interval: float = 0.2) -> None:
        self.root, self.interval = root, interval
        self.root_kb = 0          # ansible-playbook itself
        self.child_kb = 0         # the largest descendant (worker running the pass / module process)
        self.child_cmd = ""
        self.tree_kb = 0          # sum over the tree at one instant
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "TreeRss":
        self._thread.start()
        return self

    def stop(self) -> "TreeRss":
        self._stop.set()
        self._thread.join()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        kids = _children_map()
        todo, tree = [self.root], []
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(kids.get(pid, []))
        total = 0
        for pid in tree:
            st = _status(pid)
            rss, hwm = st.get("VmRSS", 0), max(st.get("VmRSS", 0), st.get("VmHWM", 0))
            total += rss
            if pid == self.root:
                self.root_kb = max(self.root_kb, hwm)
            elif hwm > self.child_kb:
                self.child_kb, self.child_cmd = hwm, _cmdline(pid)[:160]
        self.tree_kb = max(self.tree_kb, total)
        self.samples += 1

    def to_dict(self) -> dict:
        return {"ansible_playbook_peak_mb": round(self.root_kb / 1024, 1),
                "largest_child_peak_mb": round(self.child_kb / 1024, 1), "largest_child_cmd": self.child_cmd,
                "tree_peak_mb": round(self.tree_kb / 1024, 1), "samples": self.samples}


def rss_mb(pid: int) -> float:
    return round(_status(pid).get("VmRSS", 0) / 1024, 1)
