"""Jobs from the scheduler trace (trace/activations.py): the derivation on traces written out
event by event (a planted preemption, a timer release, a missed switch-in, a start-up and a
cycle cut by the window), and the implied trace events of `jobs_from = { trace = ... }`."""

import re

import pytest

from xtalk.trace.activations import EVENTS, NoThread, activations, select, threads
from xtalk.trace.parse import parse_lines

P, T = 100, 101  # the process and its worker thread


def line(comm, pid, cpu, t_us, event, args):
    return f"{comm:>16}-{pid:<6} [{cpu:03d}] d..2. {t_us // 1_000_000}.{t_us % 1_000_000:06d}: {event}: {args}"


def switch(cpu, t, prev, prev_pid, state, nxt, next_pid):
    return line(prev, prev_pid, cpu, t, "sched_switch",
                f"prev_comm={prev} prev_pid={prev_pid} prev_prio=120 prev_state={state} ==> next_comm={nxt} "
                f"next_pid={next_pid} next_prio=120")


def wakeup(cpu, t, comm, pid):
    return line("swapper/0", 0, cpu, t, "sched_wakeup", f"comm={comm} pid={pid} prio=120 target_cpu={cpu:03d}")


def timer_start(cpu, t, pid, addr, soft_ns):
    return line("app", pid, cpu, t, "hrtimer_start", f"hrtimer={addr} function=hrtimer_wakeup expires={soft_ns + 50_000} "
                f"softexpires={soft_ns} mode=ABS")


def timer_fire(cpu, t, addr):
    return line("swapper/0", 0, cpu, t, "hrtimer_expire_entry", f"hrtimer={addr} function=hrtimer_wakeup now={t * 1000}")


def cycle(t0_us, tid=T, comm="worker", cpu=0, work_us=300, preempt_at=None, addr="00000000deadbeef"):
    """One activation of `tid` released at t0 (its timer armed beforehand), woken 10 µs later,
    switched in 5 µs after that, blocked `work_us` of CPU later (plus 100 µs off-CPU if preempted)."""
    out = [timer_fire(cpu, t0_us + 8, addr), wakeup(cpu, t0_us + 10, comm, tid),
           switch(cpu, t0_us + 15, "swapper/0", 0, "R", comm, tid)]
    end = t0_us + 15 + work_us
    if preempt_at is not None:
        out += [switch(cpu, t0_us + 15 + preempt_at, comm, tid, "R+", "hog", 7),
                switch(cpu, t0_us + 115 + preempt_at, "hog", 7, "S", comm, tid)]
        end += 100
    out += [timer_start(cpu, end - 1, tid, addr, (t0_us + 1000) * 1000),
            switch(cpu, end, comm, tid, "S", "swapper/0", 0)]
    return out


def fork(t, parent, child, comm="worker"):
    return line("app", parent, 0, t, "sched_process_fork", f"comm=app pid={parent} child_comm={comm} child_pid={child}")


def trace(*cycles_):
    lines = [fork(1, P, T), switch(0, 2, "app", P, "S", "swapper/0", 0),
             # start-up: the worker runs before its first sleep (not a job)
             switch(0, 3, "swapper/0", 0, "R", "worker", T), timer_start(0, 50, T, "00000000deadbeef", 1_000_000_000)]
    lines.append(switch(0, 51, "worker", T, "S", "swapper/0", 0))
    for c in cycles_:
        lines += c
    return parse_lines(lines)


def test_each_cycle_is_one_job_with_its_timer_release():
    ev = trace(*(cycle(1_000_000 + k * 1000) for k in range(5)))
    j = activations(ev, P, "worker", period_ns=1_000_000, deadline_ns=1_000_000)
    assert len(j) == 5 and list(j.job) == list(range(5))
    # release: the time the sleep asked for; start: the switch-in; end: the block
    assert list(j.release_ns) == [(1_000_000 + k * 1000) * 1000 for k in range(5)]
    assert (j.wakeup_latency_ns == 15_000).all() and (j.start_ns == j.wakeup_ns).all()
    assert (j.exec_ns == 300_000).all() and (j.cpu_time_ns == 300_000).all()
    assert (j.response_ns == 315_000).all() and not j.missed.any()
    assert (j.nvcsw == 1).all() and (j.nivcsw == 0).all() and (j.task == 0).all()


def test_a_preemption_stays_in_the_job_off_its_cpu_time():
    ev = trace(cycle(1_000_000), cycle(1_001_000, preempt_at=100), cycle(1_002_000))
    j = activations(ev, P, "worker", deadline_ns=350_000)
    assert len(j) == 3
    assert list(j.nivcsw) == [0, 1, 0]
    assert list(j.cpu_time_ns) == [300_000, 300_000, 300_000]
    assert list(j.exec_ns) == [300_000, 400_000, 300_000]
    assert list(j.missed) == [False, True, False]  # 415 µs response past a 350 µs deadline


def test_a_missed_switch_in_starts_the_job_at_its_wakeup():
    # Some kernels record no sched_switch when a CPU leaves idle.
    c = [x for x in cycle(1_000_000) if "next_pid=101" not in x]
    j = activations(trace(c, cycle(1_001_000)), P, "worker")
    assert len(j) == 2
    assert j.start_ns[0] == 1_000_010_000 and j.end_ns[0] == 1_000_315_000


def test_a_wakeup_without_a_timer_is_its_own_release():
    ev = trace(cycle(1_000_000))
    j = activations(ev[~ev.event.str.startswith("hrtimer")], P, "worker")
    assert len(j) == 1 and j.release_ns[0] == j.wakeup_ns[0] - 5_000 == 1_000_010_000


def test_a_timer_expiry_missing_from_the_trace_still_releases_the_job():
    c = [x for x in cycle(1_000_000) if "hrtimer_expire_entry" not in x]
    j = activations(trace(c), P, "worker")
    assert len(j) == 1 and j.release_ns[0] == 1_000_000_000


def test_an_overrun_that_never_blocks_is_two_jobs():
    """A step that ends after the next release: its sleep timer fires while it runs."""
    addr = "00000000deadbeef"
    lines = cycle(1_000_000)[:3] + [
        timer_start(0, 1_001_200, T, addr, 1_001_000_000),  # step 0 ends 1.2 ms in, asks for 1.001 s: past
        timer_fire(0, 1_001_201, addr), wakeup(0, 1_001_202, "worker", T),
        timer_start(0, 1_001_500, T, addr, 1_002_000_000),  # step 1 ends, asks for 1.002 s
        switch(0, 1_001_501, "worker", T, "S", "swapper/0", 0)] + cycle(1_002_000)
    j = activations(trace(lines), P, "worker")
    assert len(j) == 3
    assert list(j.release_ns) == [1_000_000_000, 1_001_000_000, 1_002_000_000]
    assert j.end_ns[0] == 1_001_200_000 and j.start_ns[1] == 1_001_201_000 and j.end_ns[1] == 1_001_501_000
    assert j.wakeup_latency_ns[1] == 201_000 and j.cpu_time_ns[0] == 1_185_000


def test_the_tick_armed_in_its_context_is_no_sleep():
    """The kernel re-arms its tick (and other timers) in whatever task runs: not a step's end."""
    c = cycle(1_000_000)
    tick = [line("worker", T, 0, 1_000_100, "hrtimer_start", "hrtimer=00000000aaaa0000 function=tick_nohz_handler "
                 "expires=1000104000000 softexpires=1000104000000 mode=ABS"),
            line("worker", T, 0, 1_000_104, "hrtimer_expire_entry", "hrtimer=00000000aaaa0000 function=tick_nohz_handler "
                 "now=1000104000000")]
    j = activations(trace(c[:3] + tick + c[3:]), P, "worker")
    assert len(j) == 1 and j.exec_ns[0] == 300_000


def test_a_cycle_cut_by_the_window_is_no_job():
    ev = trace(cycle(1_000_000), cycle(1_001_000)[:3])  # woken and running when the trace ends
    assert len(activations(ev, P, "worker")) == 1


def test_thread_selection():
    ev = trace(cycle(1_000_000), cycle(1_001_000))
    assert threads(ev, P) == {P: "app", T: "worker"}
    assert select(ev, P, "worker") == [T]
    assert select(ev, P, "main") == [P]
    assert len(activations(ev, P, "main")) == 0  # the main thread never woke in this window
    with pytest.raises(NoThread, match=r"no thread named 'nope' in process 100 .*app, worker"):
        select(ev, P, "nope")
    # A thread of another process with the name is not this process's.
    with pytest.raises(NoThread):
        select(parse_lines([switch(0, 1, "worker", 555, "S", "swapper/0", 0)]), P, "worker")


def test_a_name_shared_with_the_main_thread_selects_the_others():
    """cyclictest's threads all carry its name: the name selects the measuring threads."""
    lines = [fork(1, P, T, "app"), fork(2, P, T + 1, "app"), switch(0, 3, "app", P, "S", "app", T),
             switch(0, 4, "app", T, "S", "app", T + 1), switch(0, 5, "app", T + 1, "S", "swapper/0", 0)]
    ev = parse_lines(lines + cycle(1_000_000, tid=T, comm="app") + cycle(1_000_500, tid=T + 1, comm="app", cpu=1))
    assert select(ev, P, "app") == [T, T + 1]
    j = activations(ev, P, "app")
    assert list(j.task) == [0, 1] and len(j) == 2
    # a single-threaded program is named by its own name
    assert select(parse_lines([switch(0, 3, "app", P, "S", "swapper/0", 0)]), P, "app") == [P]


def test_jobs_from_trace_implies_the_events_it_reads():
    from xtalk.config.experiment import Experiment
    from xtalk.config.processes import trace_of

    base = {"name": "x", "victim": {"body": "command", "argv": ["true"], "jobs_from": {"trace": "main"}}}
    t = trace_of(Experiment.model_validate(base))
    assert t is not None and set(EVENTS) <= set(t.events)
    # with [trace] events of its own, the needed ones are added, none removed
    t = trace_of(Experiment.model_validate(base | {"trace": {"events": ["irq:irq_handler_entry"], "buffer_kb": 128}}))
    assert t.events[0] == "irq:irq_handler_entry" and set(EVENTS) <= set(t.events) and t.buffer_kb == 128
    assert trace_of(Experiment.model_validate({"name": "x", "victim": {"body": "command", "argv": ["true"]}})) is None


def test_the_page_shows_the_example_files_and_commands_the_live_tests_run():
    """docs/your-application.md's trace and attach sections: each `[victim]` block is the
    example file's own (line by line), and each root command runs an example that
    tests/test_trace_jobs_live.py runs (shortened), so the page cannot drift from them."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    page = (root / "docs/your-application.md").read_text()
    examples = {n: (root / "examples" / n).read_text() for n in
                ("own-app-trace.toml", "own-app-cyclictest.toml", "own-app-attach.toml")}
    blocks = [b.split("```")[0] for b in page.split("```toml\n")[1:]]
    shown = [b for b in blocks if "trace =" in b or 'body = "attach"' in b]
    assert len(shown) == 3
    for block in shown:
        owner = [n for n, text in examples.items()
                 if all(line.split("#")[0].strip() in text for line in block.splitlines() if line.split("#")[0].strip())]
        assert owner, block
    runs = [line.split()[3] for line in page.splitlines() if line.startswith("# xtalk run ")]
    assert runs == ["examples/own-app-trace.toml", "examples/own-app-cyclictest.toml", "my-attach.toml",
                    "examples/own-app-attach.toml"]
    live = (root / "tests/test_trace_jobs_live.py").read_text()
    assert all(f'"{n}"' in live for n in examples)


@pytest.mark.parametrize("victim, message", [
    ({"duration": "1s"}, "body 'attach' needs 'pid'"),
    ({"pid": 4242}, "body 'attach' needs 'duration'"),
    ({"pid": 4242, "duration": "1s", "cpus": "last"}, "'cpus': xtalk never moves"),
    ({"pid": 4242, "duration": "1s", "policy": "fifo", "priority": 10}, "never moves, re-prioritises"),
    ({"pid": 4242, "duration": "1s", "argv": ["x"]}, "already running"),
    ({"pid": 4242, "duration": "1s", "jobs_from": {"probe": "step"}}, "come from the trace"),
    ({"pid": 1, "duration": "1s"}, "greater than or equal to 2"),
])
def test_attach_declarations_refused(victim, message):
    from pydantic import ValidationError

    from xtalk.config.experiment import Experiment

    with pytest.raises(ValidationError, match=re.escape(message)):
        Experiment.model_validate({"name": "x", "victim": {"body": "attach", **victim}})


def test_attach_plan_watches_the_window_and_keeps_the_period_for_its_jobs():
    from xtalk.config.experiment import Experiment
    from xtalk.config.processes import measured, trace_of
    from xtalk.targets.agent import TargetFacts

    exp = Experiment.model_validate({"name": "x", "victim": {"body": "attach", "pid": 4242, "duration": "2s",
                                                             "period": "5ms"}})
    facts = TargetFacts(online_cpus=[0, 1], caches={"l1d": 32768, "l2": 1 << 20, "llc": 8 << 20}, environment={})
    v = measured(exp.victim, "victim", facts, aocs_data=None)
    assert v.body.kind == "attach" and v.body.pid == 4242 and v.period_ns == 2_000_000_000 and v.jobs == 1
    assert v.body.jobs_from.trace == "main" and v.body.jobs_from.period_ns == 5_000_000
    assert v.placement.cpus is None and v.sched.policy == "other"
    assert set(EVENTS) <= set(trace_of(exp).events)
