"""The readers behind benchmarks/noise_sources.py: the apiserver's collections on the observers' clock, the host's steal over a
window, and an old row's idle window found again from its summary."""
from __future__ import annotations

import math
import random
import time

from benchmarks.crdops_bench import host_stat, server_gc
from benchmarks.crdops_bench.probe import percentile
from benchmarks.crdops_bench.noise import idle_span

GC_LOG = """\
I1207 03:59:20.500000   29310 options.go:261] external host was not specified, using 127.0.0.1
gc 1 @0.015s 2%: 0.010+1.5+0.004 ms clock, 0.021+0.2/1.1/0+0.009 ms cpu, 3->4->1 MB, 4 MB goal, 0 MB stacks, 2 P
W1207 03:59:21.000000   29310 something.go:1] unrelated
gc 2 @100.250s 1%: 1.0+647+0.5 ms clock, 2.1+1.0/337/595+0.015 ms cpu, 498->509->277 MB, 556 MB goal, 2 P
"""


def _wall_to_monotonic(text: str) -> float:
    import datetime

    wall = datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
    return wall.timestamp() - (time.time() - time.monotonic())


def test_collections_are_placed_from_the_process_start_and_take_both_pauses_and_the_mark(tmp_path):
    log = tmp_path / "kube-apiserver.log"
    log.write_text(GC_LOG)
    found = server_gc.collections(log, 2026)
    start = _wall_to_monotonic("2026-12-07 03:59:20.500000")
    assert len(found) == 2
    assert abs(found[1].start - (start + 100.25)) < 0.01
    assert math.isclose(found[1].seconds, 0.6485)
    assert (found[1].heap_before_mb, found[1].live_mb) == (498, 277)
    assert server_gc.within(found, start + 50, start + 101) == [found[1]]
    assert server_gc.during_any(found, start + 100.5)
    assert server_gc.during_any(found, start + 100.21)  # sent just before, answered in it
    assert not server_gc.during_any(found, start + 101.0)


def test_a_log_without_gctrace_has_no_collections_and_one_without_klog_lines_is_refused(tmp_path):
    plain = tmp_path / "plain.log"
    plain.write_text(GC_LOG.splitlines()[0] + "\n")
    assert server_gc.collections(plain, 2026) == []
    bare = tmp_path / "bare.log"
    bare.write_text("gc 1 @0.015s 2%: 0.010+1.5+0.004 ms clock, 3->4->1 MB\n")
    try:
        server_gc.collections(bare, 2026)
    except ValueError as err:
        assert "no klog line" in str(err)
    else:
        raise AssertionError("a log with no start time was read")


def test_steal_is_its_share_of_all_cpu_time_between_the_first_and_last_sample_in_the_window(tmp_path):
    path = tmp_path / host_stat.FILE_NAME
    #            user nice system idle iowait irq softirq steal
    path.write_text("10.0 100 0 50 800 0 0 0 50\n"
                    "11.0 150 0 60 880 0 0 0 60\n"
                    "12.0 200 0 70 900 0 0 0 130\n"
                    "not a sample\n")
    samples = host_stat.read(path)
    assert len(samples) == 3
    # from 10.0 to 12.0: 100 user + 20 system + 100 idle + 80 steal
    assert math.isclose(host_stat.share(samples, 9.5, 12.5), 80 / 300)
    assert math.isclose(host_stat.share(samples, 10.5, 12.0), 70 / 150)
    assert math.isnan(host_stat.share(samples, 10.5, 11.5))  # one sample: no interval to read


def test_an_old_rows_idle_window_is_found_again_from_its_count_percentiles_and_max():
    draw = random.Random(7)
    samples = [(100.0 + i * 0.05, round(draw.uniform(2.0, 9.0), 3)) for i in range(400)]
    window = samples[120:220]
    values = [ms for _at, ms in window]
    summary = {"get": {"n": 100, "max": max(values), **{f"p{q}": percentile(values, q) for q in (50, 90, 95, 99)}}}
    row = {"t0": 125.0, "exempt_idle": summary}
    # a window one sample later or earlier may summarise the same: found to within the samples at its edges
    start, end = idle_span(row, samples, "apf-exempt")
    assert abs(start - window[0][0]) <= 0.25 and math.isclose(end - start, samples[220][0] - window[0][0])
    row["exempt_idle"] = dict(summary, t0=101.0, t1=103.0)  # recorded: taken as it is
    assert idle_span(row, samples, "apf-exempt") == (101.0, 103.0)
    other = {"get": dict(summary["get"], p50=99.0)}
    assert idle_span({"t0": 125.0, "exempt_idle": other}, samples, "apf-exempt") is None


def test_the_sample_reader_is_shared_and_a_half_written_last_line_is_left_for_later(tmp_path):
    from benchmarks.crdops_bench import noise, observers
    from benchmarks.crdops_bench.probe import FLOW_SCHEMA_LINE, SampleStream, parse_samples

    text = f"{FLOW_SCHEMA_LINE}uid-1\n1.0 get 4.5 200\n1.05 get 9.0 429\n1.1 list 12.0 200\n2.0 get 6.25 200\n2.05 ge"
    path = observers.sample_file(tmp_path, "sa")
    path.write_text(text)
    samples, uid = parse_samples(text[:text.rfind("\n") + 1])
    assert uid == "uid-1" and [s.kind for s in samples] == ["get", "get", "list", "get"]
    assert noise.get_samples(tmp_path, "sa") == [(1.0, 4.5), (2.0, 6.25)]
    assert noise.inside(noise.get_samples(tmp_path, "sa"), 1.0, 2.0) == [(1.0, 4.5)]
    stream = SampleStream(None, "get", path)
    assert stream.read() == 4 and stream.flow_schema_uid == "uid-1"
    with open(path, "a") as fh:
        fh.write("t 7.0 200\n")
    assert stream.read() == 1 and stream.samples[-1].ms == 7.0 and stream.flow_schema_uid == "uid-1"


def test_a_windows_gets_are_split_by_whether_a_collection_ran_when_they_were_sent():
    from benchmarks.crdops_bench import noise

    sources = noise.Sources.__new__(noise.Sources)
    sources.collections = [server_gc.Collection(start=10.0, seconds=0.5, heap_before_mb=400, live_mb=200)]
    sources.samples = {"sa": [(9.0, 3.0), (9.95, 20.0), (10.2, 30.0), (10.6, 4.0), (12.0, 5.0)]}
    inside_gc, outside_gc = sources.split("sa", 9.5, 12.0)
    assert inside_gc == [20.0, 30.0] and outside_gc == [4.0]  # sent just before it and answered in it counts
