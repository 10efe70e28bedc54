# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The runbook stdout callback, through a real ansible-playbook run on localhost (no cluster needed)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import ansible_collections.crdops.migration as collection

PLAYBOOK = """
- name: Two hosts, one play
  hosts: a,b
  gather_facts: false
  connection: local
  tasks:
    - name: "Phase | decide quietly"
      ansible.builtin.set_fact:
        decided: true
    - name: "Phase | skipped"
      ansible.builtin.debug:
        msg: never shown
      when: false
    - name: "Phase | plan"
      ansible.builtin.debug:
        msg: ["PLAN {{ inventory_hostname }}: 1 CRD", "  second line"]
    - name: "Phase | include"
      ansible.builtin.include_tasks: inner.yml
    - name: "Phase | per item"
      ansible.builtin.debug:
        msg: "item {{ item }}"
      loop: [1, 2]
    - name: "Phase | a module that warns and changes nothing"
      warns:
        text: "careful with cluster {{ inventory_hostname }}"
    - name: "Phase | a change"
      ansible.builtin.command: "true"
    - name: "Report | summary"
      ansible.builtin.debug:
        msg: "2 clusters: 2 done"
      run_once: true
    - name: "Phase | fail on b"
      ansible.builtin.fail:
        msg: "boom on {{ inventory_hostname }}"
      when: inventory_hostname == 'b'
"""

INNER = """
- name: "Inner | say"
  ansible.builtin.debug:
    msg: inner message
"""

WARNING_MODULE = """
from ansible.module_utils.basic import AnsibleModule

module = AnsibleModule(argument_spec={"text": {"type": "str"}})
module.warn(module.params["text"])
module.exit_json(changed=False)
"""


def run_playbook(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "library").mkdir(exist_ok=True)
    (tmp_path / "library" / "warns.py").write_text(textwrap.dedent(WARNING_MODULE))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "inner.yml").write_text(INNER)
    (tmp_path / "hosts.ini").write_text(f"a ansible_python_interpreter={sys.executable}\n"
                                        f"b ansible_python_interpreter={sys.executable}\n")
    # the collection as the unit tests see it: <root>/ansible_collections/crdops/migration
    root = Path(list(collection.__path__)[0]).parents[2]
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="crdops.migration.runbook", ANSIBLE_COLLECTIONS_PATH=str(root),
               ANSIBLE_HOME=str(tmp_path / "home"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_REMOTE_TEMP=str(tmp_path / "tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    playbook = Path(sys.executable).parent / "ansible-playbook"
    return subprocess.run([str(playbook), "-i", "hosts.ini", "play.yml", *extra], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_console_shows_messages_changes_warnings_and_failures_and_nothing_else(tmp_path):
    proc = run_playbook(tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out   # b failed
    assert "a | Phase | plan:\n    PLAN a: 1 CRD\n      second line" in out
    assert "b | Inner | say: inner message" in out and "included:" not in out
    assert "a | Phase | per item: item 1" in out and "a | Phase | per item: item 2" in out
    assert "All items completed" not in out
    assert "a | Phase | a change: changed" in out
    # a task that runs once for the whole play speaks for the fleet, not for the host it happened to run on
    assert "fleet | Report | summary: 2 clusters: 2 done" in out and "a | Report | summary" not in out, out
    # a task that only reads or decides prints nothing, not even its header; its warnings still show
    assert "decide quietly" not in out and "skipped" not in out.lower().replace("skipped=", "")
    assert "careful with cluster a" in out and "careful with cluster b" in out, out
    assert "TASK [Phase | a module that warns" not in out
    # a failure prints as the default callback prints it: the task's header and the whole error
    assert "TASK [Phase | fail on b]" in out and "boom on b" in out
    assert out.count("TASK [") == 1, out
    assert "PLAY RECAP" in out


def test_verbose_prints_every_task(tmp_path):
    out = run_playbook(tmp_path, "-v").stdout
    assert "TASK [Phase | decide quietly]" in out and "TASK [Phase | skipped]" in out
