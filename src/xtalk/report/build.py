"""`xtalk report RESULTS`: compute every table, draw every figure, write the report.

    RESULTS/report/index.html      self-contained (open it offline, mail it)
    RESULTS/report/summary.md      verdicts, slowdowns, noise floor, misses, pWCET
    RESULTS/report/figures/        every figure as PNG (and SVG: `xtalk report --svg`)
    RESULTS/report/tables/         every table of the report as CSV
    RESULTS/report/csv/jobs.csv    one row per job (run labels on every row)
    RESULTS/report/csv/probes.csv  one row per probe sample (runs with probes only)
    RESULTS/report/applications/   each application's figures on a page of its own (several
                                   applications, more than INLINE_GROUPS applications × configurations)
"""

from __future__ import annotations

import datetime as dt
import os
import pickle
import signal
import threading
import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import pandas as pd

from .. import safepath
from ..errors import UsageError
from ..analysis import verdict as vd
from ..results import epsilon as eps
from . import figures as fg
from ..results import tables as tb
from . import applications as appsec
from . import cohabitation, counters_section, platform, portfolio
from . import victim_kinds as vk
from ..store.frames import ReportData, convert_stale, load, load_runs
from .culprits import ATTRIBUTION_CAPTION, POOLED_CAPTION, culprit_periods
from .export import export_jobs, export_probes, export_tables
from .html import Section, in_ms, page, verdict_list
from .segments import SEGMENTS_CAPTION, in_us
from .markdown import summary as md_summary

METRIC_LABEL = {"exec_ns": "execution time (ms)", "response_ns": "response time (ms)"}
#: The report's sections in order (one measured application).
SECTIONS = ("verdicts", "platform", "victim", "slowdown", "distributions", "series", "counters", "portfolio", "grid",
            "wakeup", "spikes", "pwcet")
#: Several applications: the leading section, then these for each application; those
#: report/applications.py defines are drawn per application × configuration (a figure each,
#: not one per scenario or run), the others are the single victim's.
APPLICATION_SECTIONS = ("verdicts", "slowdown", "distributions", "series", "counters", "portfolio", "spikes", "pwcet")
#: Sections that stay on index.html when each application's detail goes on its own page.
APPLICATION_HEAD = ("verdicts", "slowdown")
#: Applications × configurations whose figures index.html holds; beyond, each application's
#: figures go on a page of its own (applications/<name>.html), one click away.
INLINE_GROUPS = 6
#: Sections a second process shares (forked once the jobs are loaded, so it reads them
#: without a copy), on a machine with more than one core and from this many measured jobs
#: (below it the fork costs more than it saves): the child takes them one after another, the
#: parent takes what is left once its own sections are done, so the two finish together on
#: any machine (which side is slower differs: on a 16-CPU Xeon guest pinned to two CPUs the
#: wake-up section took half as long again as on the 2-vCPU EPYC guest). Largest first. They
#: read nothing another section computes; their tables, figures and HTML come back whole.
FORKED_SECTIONS = ("wakeup", "spikes", "pwcet", "series")
FORK_JOBS = 500_000
#: Name prefix of the CSV export's thread (the one thread besides the caller's a fork allows).
CSV_THREAD = "xtalk-report-csv"


def slowdown_display(sl: pd.DataFrame, floor: pd.DataFrame | None = None) -> pd.DataFrame:
    """The slowdown table with each ratio and its CI in one cell, the noise floor beside it."""
    if sl.empty:
        return sl
    from ..results.tables import ci_text, max_ci_text

    out = sl[["scenario", "configuration", "metric", "runs", "jobs", "median_ms", "max_ms"]].copy()
    out["slowdown median [95 % CI]"] = [ci_text(p, lo, hi) for p, lo, hi in zip(
        sl["slowdown_median"], sl["slowdown_median_lo"], sl["slowdown_median_hi"])]
    # A maximum from fewer runs than it carries is not shown (analysis.guards.MIN_RUNS_FOR_MAX).
    out["slowdown max [95 % CI]"] = [max_ci_text(p, lo, hi, n, sc == "solo") for p, lo, hi, n, sc in zip(
        sl["slowdown_max"], sl["slowdown_max_lo"], sl["slowdown_max_hi"], sl.get("runs_ok", sl["runs"]), sl["scenario"])]
    out["CI subsampled"] = sl["ci_subsampled"]
    if floor is not None and len(floor):
        f = floor[floor["statistic"] == "median"].set_index("metric")["floor"]
        out["noise floor (median)"] = [f"±{f[m] * 100:.1f} %" if m in f and f[m] == f[m] else "–" for m in sl["metric"]]
    return out


class _Builder:
    def __init__(self, data: ReportData, out: Path, epsilons: Sequence, n_boot: int, svg: bool = False):
        self.data, self.out, self.epsilons, self.n_boot = data, out, list(epsilons), n_boot
        self.fig_dir = out / "figures"
        #: Each figure also as SVG (a draw more each; the page embeds the PNG).
        self.svg = svg
        #: Prefix of figure file names (an application's sections: its name).
        self.prefix = ""
        #: One execution-time histogram per scenario (not in an application's sections).
        self.histograms = True
        #: The measured application these sections are of (several applications), else None.
        self.application: str | None = None
        #: Pages of their own written beside index.html (several applications, many configurations).
        self.pages: list[str] = []
        #: The guards that fired on the results (computed once: several applications share them).
        self.warned: pd.DataFrame | None = None
        self.tables: dict[str, pd.DataFrame] = {}
        self.figures: list[fg.Rendered] = []
        self.kind = vk.kind_of(data.runs)

    def fig(self, figure, name: str, title: str, caption: str = "") -> fg.Rendered | None:
        if figure is None:
            return None
        r = fg.render(figure, self.fig_dir, self.prefix + name, title, caption, svg=self.svg)
        self.figures.append(r)
        return r

    def keep(self, name: str, df: pd.DataFrame) -> pd.DataFrame:
        self.tables[name] = df
        return df

    def exec_floor(self) -> float:
        """The A/A noise floor of the median execution time the verdicts are judged against
        (NaN: not measured), so the guards judge the same CI by the same rule."""
        fl = tb.noise_floor(self.data, n_boot=self.n_boot)
        row = fl[(fl["metric"] == "exec") & (fl["statistic"] == "median")]
        return float(row["floor"].iloc[0]) if len(row) else math.nan

    # ------------------------------------------------------------------ sections

    def verdicts(self) -> Section:
        v = self.keep("verdicts", vk.adapt_verdicts(self.kind, tb.verdicts(self.data, self.epsilons, n_boot=self.n_boot),
                                                    self.data.runs, self.data.measured))
        self.keep("epsilon", tb.epsilon_table(self.data, self.epsilons, n_boot=self.n_boot))
        s = Section("verdicts", "Verdicts")
        s.raw(verdict_list([(r.status, r.verdict) for r in v.itertuples()]))
        if self.warned is None:
            self.warned = result_guards(self.data.path, self.data, self.exec_floor())
        warned = self.keep("warnings", self.warned)
        if len(warned):
            s.heading("Warnings")
            s.raw(verdict_list([(vd.GUARD, line) for line in warned["line"]]))
        if self.data.left_out:  # damaged runs the store left out (store/check.py), as the terminal says
            s.heading("Runs left out")
            s.raw(verdict_list([(vd.GUARD, f"{run}: {why}") for run, why in self.data.left_out.items()]))
        specs = tb.epsilon_specs(self.data, self.epsilons)
        s.text("ε bounds: " + ", ".join(eps.describe(e) for e in specs) if specs else
               "No ε bound given: pass one, e.g. `xtalk report RESULTS --epsilon exec:max:1.2x`, to get holds / violated / "
               "inconclusive per scenario.")
        s.text("Slowdown: ratio of the statistic under interference to the same statistic solo, 95 % CI (runs, then "
               "jobs within runs, resampled). 'within noise': the CI lies inside 1 ± the larger of the noise floor and "
               "min_effect; 'slowed down': its lower end is above 1 + floor (analysis/verdict.interference, the one rule "
               "the warnings use too). Serious miss: the job did not finish by the end of the next period "
               "(seed 000 §6.5.2), or never ran.")
        if not self.tables["epsilon"].empty:
            s.table(in_ms(self.tables["epsilon"]), "ε verdicts")
        return s

    def slowdown(self) -> Section:
        s = Section("slowdown", "Slowdown, noise floor, misses")
        sl = self.keep("slowdown", tb.slowdown(self.data, n_boot=self.n_boot))
        fl = self.keep("noise_floor", tb.noise_floor(self.data, n_boot=self.n_boot))
        ms = self.keep("misses", tb.misses(self.data))
        s.table(slowdown_display(sl, fl), "Slowdown against solo (ratio of medians and of maxima, 95 % CI)")
        if sl.get("ci_subsampled", pd.Series(dtype=bool)).any():
            s.text(f"CIs marked ci_subsampled were computed on a per-run subsample (≤ {tb.BOOT_JOBS} jobs per bootstrap "
                   "replicate, each run's slowest job kept) and moved to the all-jobs point estimate.")
        s.table(fl.assign(floor=[f"±{v * 100:.1f} %" if v == v else "–" for v in fl["floor"]]), "Noise floor of this machine")
        if len(fl) and fl["source"].iloc[0].startswith("solo runs"):
            s.text("This experiment has no A/A pair (two scenarios with identical enemies), so the floor shown is the "
                   "between-run spread of solo: the largest deviation from 1 of the CI of the ratio between two solo "
                   "repetitions. Add a scenario without enemies for a true A/A check.")
        s.table(in_ms(ms), "Deadline misses and serious misses")
        s.table(tb.runs(self.data), "Runs")
        self.keep("runs", tb.runs(self.data))
        return s

    def distributions(self) -> Section:
        s = Section("distributions", "Distributions")
        s.text("Whole distributions, not only min / mean / max (seed 004 §VIII). Histogram markers: best, median, first "
               "job (warm-up included: the first iteration often behaves differently), worst.")
        groups = tb.groups(self.data)
        for col in ("exec_ns", "response_ns"):
            name = col.removesuffix("_ns")
            d = self.keep(f"distribution_{name}", tb.distribution(self.data, col))
            vals = [(f"{sc}" if cf == "default" else f"{sc} ({cf})", tb.sorted_values(self.data, sc, cf, col))
                    for sc, cf in groups]
            s.figure(self.fig(fg.boxplots(vals, f"{name} per scenario", METRIC_LABEL[col]), f"box_{name}",
                              f"Boxplots of the {METRIC_LABEL[col]}", "Every job counted; the red dot is the maximum."))
            s.figure(self.fig(fg.ecdfs(vals, f"{name}: empirical CDF", METRIC_LABEL[col]), f"ecdf_{name}",
                              f"ECDF of the {METRIC_LABEL[col]}", "Right: the tail, 1 − F on a log scale."))
            shown = d.copy()
            stats_cols = [c for c in shown.columns if c not in ("scenario", "configuration", "column", "n")]
            shown[stats_cols] = shown[stats_cols] / 1e6
            s.table(shown, f"{METRIC_LABEL[col]} per scenario")
        for i, (sc, cf) in enumerate(groups if self.histograms else ()):
            marks = tb.group_markers(self.data, sc, cf, "exec_ns")
            v = tb.sorted_values(self.data, sc, cf, "exec_ns")
            s.figure(self.fig(fg.runtime_histogram(v, marks, f"{sc} ({cf}): execution time"), f"hist_exec_{i}",
                              f"Execution-time histogram, {sc} ({cf})", "Seed 004 Fig. 7 markers; counts on a log scale."))
        return s

    def series(self) -> Section:
        s = Section("series", "Per-job time series")
        s.text("Each run's execution time per job (grey; a min–max envelope when a run has many jobs) and the per-job "
               "minimum across runs, the reference curve of seed 000 Fig. 5.16: sporadic OS peaks do not hit the same "
               "job in every run, so the minimum filters them out.")
        for i, (sc, cf) in enumerate(tb.groups(self.data)):
            g = tb.subset(self.data, sc, cf, ["run_id", "job", "exec_ns"])
            ref = tb.per_job_reference(self.data, sc, "exec_ns", cf, rows=g)
            self.keep(f"reference_{sc}_{cf}", ref)
            # Only the drawn runs are split out (the first in the runs' order; _subset left no unused one).
            n_runs = len(g["run_id"].cat.categories)
            drawn = g[g["run_id"].cat.codes.to_numpy() < fg.MAX_RUNS_DRAWN]
            runs = [(str(r), x["job"].to_numpy(), x["exec_ns"].to_numpy()) for r, x in drawn.groupby("run_id", observed=True)]
            s.figure(self.fig(fg.per_job_series(runs, ref if n_runs > 1 else ref.iloc[0:0], f"{sc} ({cf})"),
                              f"series_{i}", f"Per-job execution time, {sc} ({cf})",
                              f"{len(runs)} of {n_runs} runs drawn; red: per-job minimum over all {n_runs} runs."))
        return s

    def counters(self) -> Section | None:
        return counters_section.section(self)

    def platform(self) -> Section:
        return platform.section(self)

    def applications(self) -> Section:
        return cohabitation.section(self)

    def victim(self) -> Section | None:
        return vk.section(self, self.kind)

    def portfolio(self) -> Section | None:
        return portfolio.section(self)

    def grid(self) -> Section:
        s = Section("grid", "Two-way grid")
        g = self.keep("grid", tb.parameter_grid(self.data))
        if g.empty:
            s.text("This experiment has fewer than two run parameters, so there is no two-way grid to draw (campaigns "
                   "over e.g. number of enemies × total load give one; seed 000 ch. 6).")
            return s
        s.figure(self.fig(fg.heatmap(g / 1e6, "median execution time (ms)", "ms"), "grid",
                          "Two-way grid of the median execution time", f"rows {g.index.name}, columns {g.columns.name}"))
        s.table(in_ms(g), "Median execution time per cell (ns)")
        return s

    def wakeup(self) -> Section:
        s = Section("wakeup", "Wake-up behaviour")
        s.text("rel(k) = w(k) − release(k) − the median lateness of the first idle measured jobs, and Δw(k) = "
               "w(k) − w(k−1) − P of the wake-up dates w(k) (seed 002 §VI-C). A slope of rel(k) over idle jobs is a "
               "drift of the timer against CLOCK_MONOTONIC; jobs released while the previous one ran (backlog, an "
               "overload) are counted apart, not fitted; distinct interval levels are a period quantised to a coarse tick.")
        d = self.keep("wakeup_drift", tb.wakeup_drift(self.data))
        q = self.keep("quantisation", tb.quantisation(self.data))
        s.table(d, "Timer drift of rel(k) per run, idle jobs (slope with its 95 % CI, Newey-West); backlog apart")
        s.table(q, "Period quantisation")
        if len(q) and not q["quantised"].any():
            s.text("No quantisation: every scenario's wake-up intervals form one level.")
        for i, (sc, cf) in enumerate(tb.groups(self.data)):
            ser = tb.wakeup(self.data, sc, cf)
            dd = d[(d["scenario"] == sc) & (d["configuration"] == cf)] if len(d) else d
            s.figure(self.fig(fg.wakeup_curves(ser, dd, f"{sc} ({cf})"), f"wakeup_{i}", f"Wake-up curves, {sc} ({cf})",
                              f"Left: rel(k) per run with its fitted drift; right: Δw(k). At most {fg.MAX_RUNS_DRAWN} runs drawn."))
        # No other section reads the groups' wake-up series (12 columns of every job: 0.9 GB
        # at 10^7 jobs): let them go before the next section (the spikes, in the same
        # process, would otherwise hold theirs beside them: the report's peak RSS).
        ser = None
        tb.forget(self.data, "wakeup")
        return s

    def spikes(self) -> Section:
        s = Section("spikes", "Spikes and culprits")
        s.text("A spike is a job whose execution time exceeds its run's median + 5 × 1.4826 × MAD (a robust threshold: "
               "the spikes do not inflate it). Periods are searched in time and in jobs (seed 000 §5.3.2).")
        s.table(in_ms(self.keep("spikes", tb.spikes(self.data))), "Spikes per run")
        per = self.keep("spike_periods", tb.spike_periods(self.data))
        s.table(in_ms(per), POOLED_CAPTION)
        w = tb.worst_job(self.data)
        if w is not None:
            det = tb.detected_spikes(self.data)
            run = det[det["run_id"] == w["run_id"]]
            s.figure(self.fig(fg.spike_series(run, f"run {w['run_id']}"), "spikes_worst_run",
                              f"Spikes of run {w['run_id']} (the run with the slowest job)", ""))
        traced = tb.traced_runs(self.data)
        if not traced:
            s.text("No run has a kernel trace, so no culprit can be named: add a [trace] table to the experiment and run "
                   "it as root.")
            return s
        s.table(in_ms(self.keep("culprits", tb.culprits(self.data))),
                "Culprits on the victim's CPU, by the time they held it off (blocked: preempted it, ran before it after "
                "its wake-up, interrupted it; present: on its CPU during its jobs)")
        s.table(in_ms(self.keep("wakers", tb.wakers(self.data))),
                "Who woke the victim, and its wake-up latency (waking → on its CPU)")
        seg = self.keep("segments", tb.segments(self.data, n_boot=self.n_boot))
        if len(seg):
            s.table(in_us(seg), SEGMENTS_CAPTION)
        att = self.keep("spike_attribution", tb.spike_attribution(self.data))
        s.table(in_ms(att), ATTRIBUTION_CAPTION)
        culprit_periods(s, self.keep("culprit_periods", tb.culprit_periods(self.data)))
        tl = self.keep("timeline", tb.timeline(self.data))
        if len(tl):
            a = tl.attrs
            s.figure(self.fig(fg.gantt(tl, f"run {tl['run_id'].iloc[0]}, job {a.get('job')}"), "timeline",
                              "What ran around the slowest traced job",
                              f"Kernel trace, ± 2 periods; victim on CPU {a.get('cpu')}. Thin bars: interrupts."))
        return s

    def pwcet(self) -> Section:
        s = Section("pwcet", "pWCET")
        s.text("Measurement-based probabilistic WCET: the i.i.d. checks MBPTA requires (Ljung-Box, KS between halves, "
               "runs test; Bonferroni), then a generalized Pareto tail over a threshold, with profile-likelihood bounds. "
               "When a check fails the estimate is refused, and that refusal is the result.")
        t = self.keep("pwcet", tb.pwcet(self.data))
        self.keep("pwcet_iid", tb.pwcet_iid(self.data))
        for i, (sc, cf, total, res) in enumerate(tb.pwcet_fits(self.data)):
            v, _ = tb.pwcet_series(self.data, sc, cf)
            if not res.ok:
                s.raw(f'<p class="refused">{fg_escape(sc)} ({fg_escape(cf)}): pWCET refused — {fg_escape(res.refused)}</p>')
            s.figure(self.fig(fg.pwcet_curve(v, res, f"{sc} ({cf})"), f"pwcet_{i}", f"Exceedance curve, {sc} ({cf})",
                              f"{res.n} jobs fitted of {total}."))
        s.table(in_ms(t[t["refused"].isna()]) if len(t) else t, "pWCET estimates")
        s.table(self.tables["pwcet_iid"], "i.i.d. checks")
        return s


def _other_threads() -> list[threading.Thread]:
    """This process's threads besides the calling one and the report's own CSV export."""
    return [t for t in threading.enumerate() if t is not threading.current_thread() and not t.name.startswith(CSV_THREAD)]


def _usable_cpus() -> int:
    """The CPUs this process may run on: taskset or a cpuset give a report fewer than the
    machine has, and a second process on the same CPU would only take turns with the first."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _fork_worth(data: ReportData, names: list[str]) -> bool:
    """Whether to compute FORKED_SECTIONS in a child. Never when threads other than this one
    and the report's own CSV export run (a program that calls build() from a thread pool, a
    server): a lock one of them holds at the fork would stay held in the child."""
    return (hasattr(os, "fork") and _usable_cpus() > 1 and len(data.measured) >= FORK_JOBS
            and any(n in FORKED_SECTIONS for n in names) and not _other_threads())


class _Forked:
    """``names`` sections of builder ``b`` shared with a forked child. A pipe holds one byte
    per section (its index), written before the fork: whichever process reads a byte computes
    that section (`claim`), so each is computed once, by the side that is free first. The
    child sends back, pickled through a pipe, each section it computed with the tables and
    figures it added (figure files it writes itself); when it fails in any way (an
    exception, killed, a broken pipe) the parent computes the sections it did not get, so
    the report is the same either way."""

    def __init__(self, b: _Builder, names: list[str]):
        self.b, self.names = b, names
        self.pid, self.fd, self.tokens = None, None, None
        tokens, w_tokens = os.pipe()
        os.write(w_tokens, bytes(range(len(names))))
        os.close(w_tokens)  # drained, the pipe reads as end of file: nothing left to take
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            for fd in (r, w, tokens):
                os.close(fd)
            return
        if pid == 0:  # the child: compute, send, exit without running the parent's exit handlers
            code = 1
            try:
                os.close(r)
                self.tokens = tokens
                out = {}
                while (name := self.claim()) is not None:
                    t = time.perf_counter()
                    n_tables, n_figures = set(b.tables), len(b.figures)
                    sec = getattr(b, name)()
                    out[name] = (sec, {k: v for k, v in b.tables.items() if k not in n_tables},
                                 b.figures[n_figures:], time.perf_counter() - t)
                with os.fdopen(w, "wb") as f:
                    pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        self.pid, self.fd, self.tokens = pid, r, tokens

    def claim(self) -> str | None:
        """The next section nobody has taken, now this process's; None when none is left."""
        if self.tokens is None:
            return None
        got = os.read(self.tokens, 1)
        if not got:
            os.close(self.tokens)
            self.tokens = None
            return None
        return self.names[got[0]]

    def abandon(self) -> None:
        """The parent failed (or was interrupted): stop the child and reap it."""
        if self.tokens is not None:
            os.close(self.tokens)
            self.tokens = None
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(self.fd)
        os.waitpid(self.pid, 0)
        self.pid = None

    def join(self, timings: dict, done: dict[str, Section | None]) -> None:
        """Add to ``done`` the sections the child computed, and compute here any the
        parent did not take that the child did not send (it failed)."""
        out = None
        if self.pid is not None:
            try:
                with os.fdopen(self.fd, "rb") as f:
                    data = f.read()
                _, status = os.waitpid(self.pid, 0)
                if os.waitstatus_to_exitcode(status) == 0:
                    out = pickle.loads(data)
            except (OSError, EOFError, pickle.UnpicklingError):
                out = None
        for name in self.names:
            if name in done:
                continue  # the parent took it
            if out is None or name not in out:  # the child failed: compute here
                t = time.perf_counter()
                done[name] = getattr(self.b, name)()
                timings[name] = time.perf_counter() - t
                continue
            sec, tables, figures, seconds = out[name]
            self.b.tables.update(tables)
            self.b.figures += figures
            timings[name] = seconds
            done[name] = sec


def _applications(b: _Builder, timings: dict) -> list[Section]:
    """Several measured applications: the leading section (matrix, ε, propagation), the
    platform, then each application's own sections (highest criticality first), its
    ``alone:<A>`` runs as solo and its ε as the bound. Their tables are kept as
    ``<application>_<table>``; the verdict, slowdown, noise-floor, misses, pWCET and warning
    tables as well, with an ``application`` column, for summary.md."""
    t = time.perf_counter()
    sections = [b.applications(), b.platform()]
    timings["applications"] = time.perf_counter() - t
    merged: dict[str, list[pd.DataFrame]] = {}
    warned = result_guards(b.data.path, b.data)  # the summary's: each warning names its application, "<A> · <scenario>"
    apps = cohabitation.ordered(b.data)
    groups = sum(len(appsec.configurations(cohabitation.application_data(b.data, a))) for a in apps)
    pages = groups > INLINE_GROUPS
    for app in apps:
        t = time.perf_counter()
        sub = _Builder(cohabitation.application_data(b.data, app), b.out,
                       [*b.epsilons, *([app.epsilon] if app.epsilon is not None else [])], b.n_boot, b.svg)
        sub.kind, sub.prefix, sub.histograms, sub.application = vk.PERIODIC, f"{app.name}_", False, app.name
        sub.warned = warned[warned["scenario"].astype(str).str.startswith(f"{app.name} · ")].reset_index(drop=True)
        detail = []
        for name in APPLICATION_SECTIONS:
            own = getattr(appsec, name, None)
            sec = own(sub) if own is not None else getattr(sub, name)()
            if sec is not None:
                sec.id, sec.title = f"{app.name}-{sec.id}", f"{app.name}: {sec.title}"
                (sections if not pages or name in APPLICATION_HEAD else detail).append(sec)
        if detail:
            sections.append(_detail_page(b, app.name, detail))
        for k, v in sub.tables.items():
            b.tables[f"{app.name}_{k}"] = v
            if k in ("verdicts", "slowdown", "noise_floor", "misses", "pwcet", "warnings") and v is not None:
                merged.setdefault(k, []).append(v.assign(application=app.name) if k != "warnings" else v)
        b.figures += sub.figures
        timings[app.name] = time.perf_counter() - t
    for k, parts in merged.items():
        b.tables[k] = pd.concat(parts, ignore_index=True)
        if k == "warnings":
            b.tables[k] = b.tables[k].drop_duplicates("line").reset_index(drop=True)
    b.tables.setdefault("verdicts", pd.DataFrame(columns=["status", "verdict"]))
    b.tables.setdefault("warnings", pd.DataFrame(columns=["line"]))
    return sections


def _detail_page(b: _Builder, name: str, detail: list[Section]) -> Section:
    """Write one application's figure sections to applications/<name>.html (self-contained
    like index.html); the section that links to it on index.html."""
    from .campaign_report import slug

    rel = f"applications/{slug(name)}.html"
    safepath.makedirs(b.out / "applications")
    back = Section(f"{name}-back", name).raw('<p><a href="../index.html">← the report</a></p>')
    b.pages.append(rel)
    safepath.write_text(b.out / rel, page(f"xtalk report: {b.data.path.name}, {name}", "distributions, series, spikes, pWCET, "
                                          "probes", [back, *detail], "Part of the report of several applications."))
    s = Section(f"{name}-detail", f"{name}: figures")
    return s.raw(f'<p><a href="{fg_escape(rel)}">{fg_escape(name)}: distributions, per-job series, spikes, pWCET'
                 f"{', probes' if any(x.id.endswith('-portfolio') for x in detail) else ''}</a> "
                 f"({len(detail)} sections on a page of their own: this report has more than {INLINE_GROUPS} "
                 "applications × configurations).</p>")


def fg_escape(s) -> str:
    import html

    return html.escape(str(s))


def result_guards(path: Path, data: ReportData | None = None, floor: float = math.nan) -> pd.DataFrame:
    """The guards that fire on the results (analysis/guards.py), one row each with its line:
    computed now from the cells the report renders (``data``, loaded when not given) and the
    inputs the summary reads (each run's run.json, experiment.json's enemies alone), by
    summary.summary_table, so they are the list summary.json holds by construction. A
    summary.json on disk is not read: it may be older than the data or the code. ``floor``:
    the report's A/A noise floor of the median execution time, judged by the same rule as
    the report's interference words (analysis/verdict.interference)."""
    from ..analysis.guards import Guard, Kind
    from ..report.summary import summary_table
    from ..store import open as open_results

    rows = [w for ws in summary_table(open_results(path), data, floor)["warnings"] for w in ws]
    lines = [Guard(Kind(w["kind"]), w["configuration"], w["scenario"], w["message"]).line() for w in rows]
    return pd.DataFrame({"kind": [w["kind"] for w in rows], "configuration": [w["configuration"] for w in rows],
                         "scenario": [w["scenario"] for w in rows], "line": lines})


def build(path, out: Path | None = None, epsilons: Sequence = (), *, csv: bool = True, n_boot: int = 2000,
          console=None, cell_figures: bool = False, map_stat: str | None = None, svg: bool = False) -> Path:
    """Write the report of results directory ``path``; returns the HTML file. ``cell_figures``
    (campaigns): also one figure per cell on the group pages; ``map_stat`` (campaigns): the
    statistic of the maps (results/campaign_maps.py); ``svg``: every figure also as SVG (PNG
    only by default: index.html embeds the PNGs)."""
    t0 = time.perf_counter()
    for e in epsilons:  # bad ε input fails before any work
        if not isinstance(e, eps.EpsilonSpec):
            eps.parse(e)
    from ..results import campaign_maps
    from ..results.campaign_cells import is_campaign

    campaign_maps.parse(map_stat)
    if not isinstance(path, ReportData) and is_campaign(path):  # a campaign leads with its grids and verdicts
        from .campaign_report import build_campaign

        return build_campaign(path, out, epsilons, csv=csv, console=console, cell_figures=cell_figures,
                              map_stat=map_stat, svg=svg)
    if map_stat:
        raise UsageError(f"--map: {path} is an experiment, not a campaign; --map picks the statistic of a campaign's "
                         "maps, drop it")
    runs = path.runs if isinstance(path, ReportData) else load_runs(path)
    convert_stale(runs)  # before the export thread reads the Parquet files
    root = path.path if isinstance(path, ReportData) else Path(path)
    out = Path(out) if out is not None else root / "report"
    safepath.makedirs(out)
    # The CSV export is I/O and pyarrow (which releases the GIL): it runs beside the loading
    # and the statistics, from the run table alone.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=CSV_THREAD)
    exported = pool.submit(lambda: (export_jobs(runs, out / "csv" / "jobs.csv"),
                                    export_probes(runs, out / "csv" / "probes.csv"))) if csv else None
    data = path if isinstance(path, ReportData) else load(path, runs)
    timings = {"load": time.perf_counter() - t0}
    b = _Builder(data, out, epsilons, n_boot, svg)
    sections = []
    multi = cohabitation.is_multi(data.measured)
    if multi:
        sections = _applications(b, timings)
    hidden = vk.hidden(b.kind)  # generic sections that say nothing true about this victim
    names = [] if multi else [n for n in SECTIONS if n not in hidden]
    forked = _Forked(b, [n for n in FORKED_SECTIONS if n in names]) if _fork_worth(data, names) else None
    done: dict[str, Section | None] = {}
    try:
        for name in names:
            if forked is not None and name in forked.names:
                continue
            t = time.perf_counter()
            done[name] = getattr(b, name)()
            timings[name] = time.perf_counter() - t
        while forked is not None and (name := forked.claim()) is not None:  # what the child has not taken yet
            t = time.perf_counter()
            done[name] = getattr(b, name)()
            timings[f"{name} (here)"] = time.perf_counter() - t
    except BaseException:
        if forked is not None:
            forked.abandon()
        raise
    if forked is not None:
        t = time.perf_counter()
        forked.join(timings, done)
        timings["forked (waited)"] = time.perf_counter() - t
    sections += [done[n] for n in names if done.get(n) is not None]
    t = time.perf_counter()
    files = ["index.html", "summary.md", "figures/*.png, figures/*.svg" if svg else "figures/*.png", "tables/*.csv"]
    if b.pages:
        files.append(f"applications/*.html ({len(b.pages)} pages, each application's figures)")
    exports = Section("files", "Files")
    if exported is not None:
        n_jobs, n_probes = exported.result()
        files.append(f"csv/jobs.csv ({n_jobs} rows, one per job)")
        files.append(f"csv/probes.csv ({n_probes} rows, one per probe sample)" if n_probes else
                     "no probes.csv: no run recorded probe samples")
    pool.shutdown()
    timings["csv (after the rest)"] = time.perf_counter() - t
    export_tables(b.tables, out / "tables")
    exports.raw("<ul>" + "".join(f"<li>{fg_escape(f)}</li>" for f in files) + "</ul>")
    exports.text("Python API: every table above is a function of xtalk.results.tables returning a pandas DataFrame.")
    sections.append(exports)
    title = f"xtalk report: {data.path.name}"
    exp = data.experiment.get("experiment") or {}
    subtitle = (f"{exp.get('description') or ''} — {len(data.runs)} runs, {len(data.measured)} measured jobs, "
                f"generated {dt.datetime.now().strftime('%Y-%m-%d %H:%M:%S')}")
    elapsed = time.perf_counter() - t0
    html_path = out / "index.html"
    safepath.write_text(html_path, page(title, subtitle, sections, f"Built in {elapsed:.1f} s by xtalk report."))
    from . import verdicts as vdoc
    from .summary import verdicts_document
    from ..store import open as open_results

    doc = verdicts_document(open_results(data.path), data)  # RESULTS/verdicts.json, one source with the summary
    # The run-time notices `xtalk run` kept (failed runs, feasibility, noise, an enemy's note),
    # grouped as the terminal printed them, before the report's own guards.
    notices = vdoc.printed_lines([w for w in doc["warnings"] if w["kind"] in vdoc.NOTICE_KINDS])
    warned = notices + [x for x in b.tables["warnings"]["line"] if x not in notices]
    md = md_summary(title, b.tables["verdicts"][["status", "verdict"]] if len(b.tables["verdicts"])
                    else pd.DataFrame(columns=["status", "verdict"]),
                    b.tables.get("slowdown"), b.tables.get("noise_floor"),
                    in_ms(b.tables["misses"]) if "misses" in b.tables else None,
                    b.tables.get("pwcet"), files, warned,
                    extra=["## Platform", ""] + [f"- {x}" for x in platform.lines(platform.facts(data))]
                    + [""] + ([] if multi else vk.markdown(b, b.kind)))
    if multi:  # the applications' verdicts and matrices lead
        head, rest = md.split("\n", 1)
        md = head + "\n\n" + "\n".join(cohabitation.markdown(cohabitation.of_report(data, n_boot))) + rest
    safepath.write_text(out / "summary.md", md)
    vdoc.write(data.path, doc)
    if console is not None:
        if multi:  # each application's own lines are in its section and summary.md
            for line in cohabitation.console_lines(cohabitation.of_report(data, n_boot)):
                console.print(line, highlight=False)
        for r in () if multi else b.tables["verdicts"].itertuples():
            console.print(f"[bold]{r.status}[/]: {r.verdict}", highlight=False)
        for line in warned:
            console.print(f"[yellow]warning: {line}[/]", highlight=False)
        console.print(f"report: {html_path} ({len(b.figures)} figures, {html_path.stat().st_size / 1e6:.1f} MB) in {elapsed:.1f} s: "
                      + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()), highlight=False, soft_wrap=True)
    return html_path

