# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Knowing every apiserver: Lease freshness, the EndpointSlice path, the decision rule, the settle fallback.

The EndpointSlice path is tested here because the harness cannot publish one: Endpoints validation rejects
loopback addresses, and its apiservers only listen on loopback.
"""
from __future__ import annotations

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.apiservers import (
    BarrierRefusedError, count_alive_apiservers, parse_time, plan_barrier, read_identity_leases, server_now,
    slice_urls, url_key)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.barrier import wait_for_storage_version
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError, CrdOpsError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.crdops_fakes import Clock, FakeCluster, status

NAME = "crontabs.stable.example.com"


def kube_slice(addresses, port=6443, ready=True):
    return {"metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4", "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [a], "conditions": {"ready": ready}} for a in addresses]}


def cluster(leases=(("apiserver-a", 5.0),), slices=(), **kw):
    c = FakeCluster()
    c.base_url = "https://lb.example:6443"
    c.identity_leases = list(leases) if leases is not None else None
    c.endpoint_slices = list(slices)
    c.add_crd(**kw)
    return c


def plan(c, explicit=(), **kw):
    clock = Clock(t=0.0)
    return plan_barrier(c, list(explicit), c.for_endpoint, wall=lambda: c.now, clock=clock, sleep=clock.sleep, **kw)


# -- how many are alive -------------------------------------------------------------------------------
def test_only_leases_renewed_within_a_minute_count_as_alive():
    c = cluster(leases=[("apiserver-a", 3.0), ("apiserver-b", 59.0), ("apiserver-dead", 61.0),
                        ("apiserver-long-dead", 3000.0)])
    count = read_identity_leases(c, wall=lambda: 0.0)  # a wildly wrong local clock: the server's Date rules
    assert count.alive == 2 and count.fresh == ["apiserver-a", "apiserver-b"]
    assert count.stale == ["apiserver-dead", "apiserver-long-dead"]
    assert ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            {"labelSelector": "apiserver.kubernetes.io/identity=kube-apiserver"}) in c.calls


def test_lease_times_and_server_clock_are_parsed():
    assert parse_time("2026-12-01T04:33:14.123456Z") == pytest.approx(1796099594.123456)
    assert parse_time("2026-12-01T04:33:14Z") == pytest.approx(1796099594.0)
    assert parse_time(None) is None and parse_time("garbage") is None
    assert server_now("Tue, 01 Dec 2026 04:33:20 GMT", lambda: 0.0) == 1796099600.0
    assert server_now(None, lambda: 42.0) == 42.0 and server_now("nonsense", lambda: 42.0) == 42.0


def test_unreadable_leases_say_why_and_are_not_retried():
    c = cluster(leases=None)
    clock = Clock(t=0.0)
    count = count_alive_apiservers(c, wall=lambda: c.now, clock=clock, sleep=clock.sleep)
    assert count.alive is None and not count.readable and "HTTP 403" in count.problem
    assert "get/list on leases.coordination.k8s.io" in count.problem and clock.sleeps == []


def test_a_brand_new_control_plane_is_given_time_to_write_its_first_lease():
    c = cluster(leases=[])
    clock = Clock(t=0.0)

    def sleep(seconds):
        clock.sleep(seconds)
        if clock.t >= 3:
            c.identity_leases = [("apiserver-a", 0.5)]

    count = count_alive_apiservers(c, wall=lambda: c.now, clock=clock, sleep=sleep)
    assert count.alive == 1 and clock.t == 3


def test_no_lease_ever_means_unknown():
    c = cluster(leases=[])
    clock = Clock(t=0.0)
    count = count_alive_apiservers(c, wall=lambda: c.now, clock=clock, sleep=clock.sleep)
    assert count.alive is None and count.readable and "no identity Lease" in count.problem and clock.t == 15


# -- where they are -----------------------------------------------------------------------------------
def test_endpoint_slice_addresses_become_https_urls():
    items = [kube_slice(["10.0.0.11", "10.0.0.12"]), kube_slice(["10.0.0.13"], ready=False),
             {"addressType": "IPv6", "ports": [{"name": "https", "port": 443}],
              "endpoints": [{"addresses": ["fd00::1"]}]},
             {"ports": [{"name": "metrics", "port": 9000}], "endpoints": [{"addresses": ["10.9.9.9"]}]}]
    assert slice_urls(items) == ["https://10.0.0.11:6443", "https://10.0.0.12:6443", "https://[fd00::1]:443"]


def test_url_key_spells_one_url_one_way():
    assert url_key("https://API.example:443/") == url_key("https://api.example") == "https://api.example:443"
    assert url_key("https://[FD00::1]:6443") == "https://[fd00::1]:6443"


# -- the decision rule ----------------------------------------------------------------------------------
def test_one_alive_apiserver_the_kubeconfig_url_counts():
    c = cluster()
    p = plan(c)
    assert p.mode == "single" and list(p) == ["https://lb.example:6443"] and p.warning is None
    assert p.to_dict()["apiservers_alive"] == 1 and p.polls == 1


def test_two_alive_and_only_the_kubeconfig_url_fails_closed_naming_what_to_set():
    c = cluster(leases=[("apiserver-a", 2.0), ("apiserver-b", 8.0)])
    with pytest.raises(BarrierRefusedError) as err:
        plan(c)
    msg = str(err.value)
    assert "2 apiservers are alive" in msg and "apiserver-a, apiserver-b" in msg
    assert "only 0 can be named and reached directly" in msg and "nothing written" in msg
    assert "https://lb.example:6443 may be a load balancer" in msg
    assert "crd_upgrade_apiserver_endpoints" in msg and "barrier_fallback=settle" in msg
    assert err.value.facts["mode"] == "refused" and err.value.facts["apiservers_alive"] == 2
    assert c.writes(include_events=True) == []


def test_explicit_list_covering_every_alive_apiserver_passes():
    c = cluster(leases=[("apiserver-a", 2.0), ("apiserver-b", 8.0)])
    p = plan(c, ["https://10.0.0.11:6443/", "https://10.0.0.12:6443"])
    assert p.mode == "endpoints"
    assert list(p) == ["https://lb.example:6443", "https://10.0.0.11:6443", "https://10.0.0.12:6443"]
    assert p.to_dict()["reached"] == ["https://10.0.0.11:6443", "https://10.0.0.12:6443"]


def test_explicit_list_shorter_than_the_alive_count_fails_closed():
    c = cluster(leases=[("apiserver-a", 2.0), ("apiserver-b", 8.0), ("apiserver-c", 1.0)])
    with pytest.raises(BarrierRefusedError) as err:
        plan(c, ["https://10.0.0.11:6443", "https://10.0.0.12:6443"])
    assert "3 apiservers are alive" in str(err.value) and "only 2 can be named" in str(err.value)


def test_endpoint_slice_addresses_that_answer_are_enough():
    c = cluster(leases=[("apiserver-a", 2.0), ("apiserver-b", 8.0)],
                slices=[kube_slice(["10.0.0.11", "10.0.0.12"])])
    p = plan(c)
    assert p.mode == "endpoints" and "https://10.0.0.12:6443" in p
    assert p.to_dict()["endpoint_slice"] == ["https://10.0.0.11:6443", "https://10.0.0.12:6443"]


def test_unreachable_endpoint_slice_addresses_do_not_count_and_are_named():
    c = cluster(leases=[("apiserver-a", 2.0), ("apiserver-b", 8.0)],
                slices=[kube_slice(["10.0.0.11", "10.0.0.12"])])
    dead = FakeCluster()
    dead.hooks.append(lambda *a: (_x for _x in ()).throw(CrdOpsError("GET /version: connection failed",
                                                                     api_message="ConnectTimeoutError")))
    c.endpoints_by_url["https://10.0.0.12:6443"] = dead
    with pytest.raises(BarrierRefusedError) as err:
        plan(c)
    msg = str(err.value)
    assert "only 1 can be named and reached directly" in msg and "Reached: https://10.0.0.11:6443" in msg
    assert "https://10.0.0.12:6443 (ConnectTimeoutError)" in msg


def test_explicit_and_slice_urls_are_never_added_up():
    # cp1.example and 10.0.0.11 may be the same apiserver: two names for one must not pass for two apiservers
    c = cluster(leases=[("apiserver-a", 2.0), ("apiserver-b", 8.0)], slices=[kube_slice(["10.0.0.11"])])
    with pytest.raises(BarrierRefusedError):
        plan(c, ["https://cp1.example:6443"])


def test_an_explicit_endpoint_that_does_not_answer_stays_a_target_so_the_barrier_waits_for_it():
    c = cluster(leases=[("apiserver-a", 2.0), ("apiserver-b", 8.0)])
    frozen = FakeCluster()
    frozen.hooks.append(lambda *a: status(503, "apiserver is shutting down"))
    c.endpoints_by_url["https://10.0.0.12:6443"] = frozen
    p = plan(c, ["https://10.0.0.11:6443", "https://10.0.0.12:6443"])
    assert p["https://10.0.0.12:6443"] is frozen and "https://10.0.0.12:6443" in p.to_dict()["not_reached"]
    clock = Clock(t=0.0)
    with pytest.raises(CrdOpsError) as err:
        wait_for_storage_version(p, get_crd(c, NAME), timeout=3, clock=clock, sleep=clock.sleep)
    assert "https://10.0.0.12:6443 (reports <not served>)" in str(err.value)


def test_unreadable_leases_fail_closed_unless_endpoints_are_given():
    c = cluster(leases=None)
    with pytest.raises(BarrierRefusedError) as err:
        plan(c)
    assert "number of apiservers is unknown: identity Leases not readable: HTTP 403" in str(err.value)
    p = plan(c, ["https://10.0.0.11:6443"])
    assert p.mode == "endpoints" and "trusting apiserver_endpoints (1 URL(s))" in p.warning


def test_bad_fallback_values_are_refused():
    c = cluster()
    with pytest.raises(BadInputError):
        plan(c, fallback="hope")
    with pytest.raises(BadInputError):
        plan(c, fallback="settle", fallback_settle=-1)
    with pytest.raises(BadInputError) as err:
        plan(c, ["10.0.0.11:6443", "https://10.0.0.12:6443"])
    assert "got 10.0.0.11:6443" in str(err.value)


# -- the opt-in settle fallback -----------------------------------------------------------------------
def test_settle_fallback_is_chosen_only_when_asked_and_says_its_risk():
    c = cluster(leases=[("apiserver-a", 2.0), ("apiserver-b", 8.0), ("apiserver-c", 1.0)])
    fresh = []

    def connect_fresh(url):
        fresh.append(url)
        return c

    clock = Clock(t=0.0)
    p = plan_barrier(c, [], c.for_endpoint, connect_fresh=connect_fresh, fallback="settle", fallback_settle=20,
                     wall=lambda: c.now, clock=clock, sleep=clock.sleep)
    assert p.mode == "settle-fallback" and p.polls == 15 and p.settle_floor == 20
    assert fresh == ["https://lb.example:6443"]
    assert "settle-fallback" in p.warning and "3 apiservers" in p.warning and "15 times" in p.warning
    assert "kubernetes#130235" in p.warning and p.to_dict()["warning"] == p.warning


def test_settle_fallback_with_unknown_count_polls_at_least_fifteen_times():
    p = plan(cluster(leases=None), fallback="settle")
    assert p.mode == "settle-fallback" and p.polls == 15 and "an unknown number of" in p.warning


def test_settle_fallback_waits_for_consecutive_agreeing_polls_then_the_settle_time():
    c = cluster(leases=[("apiserver-a", 2.0), ("apiserver-b", 8.0)])
    p = plan(c, fallback="settle", fallback_settle=30)
    answers = iter(["v2", "v1", "v2"] + ["v2"] * 20)  # a load balancer: sometimes the lagging member answers

    def lb_poll(method, path, q, body):
        if path.startswith("/apis/stable.example.com/"):
            c.stale_storage_view[NAME] = next(answers)
        return None

    c.hooks.append(lb_poll)
    clock = Clock(t=0.0)
    result = wait_for_storage_version(p, get_crd(c, NAME), timeout=60, settle=5, clock=clock, sleep=clock.sleep)
    assert result.passed and result.mode == "settle-fallback" and result.polls == 10
    assert clock.sleeps.count(0.5) == 11 and clock.sleeps[-1] == 30  # 1 + 1 + 10 rounds, then max(settle, floor)
    assert result.to_dict()["warning"] == p.warning


def test_settle_fallback_that_never_gets_enough_agreeing_polls_fails():
    c = cluster(leases=[("apiserver-a", 2.0), ("apiserver-b", 8.0)])
    p = plan(c, fallback="settle")
    flip = {"n": 0}

    def lb_poll(method, path, q, body):
        if path.startswith("/apis/stable.example.com/"):
            flip["n"] += 1
            c.stale_storage_view[NAME] = "v1" if flip["n"] % 4 == 0 else "v2"
        return None

    c.hooks.append(lb_poll)
    clock = Clock(t=0.0)
    with pytest.raises(CrdOpsError) as err:
        wait_for_storage_version(p, get_crd(c, NAME), timeout=20, clock=clock, sleep=clock.sleep)
    assert "HA barrier" in str(err.value)
