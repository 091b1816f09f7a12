"""UPPAAL export structure and the ``xtalk model`` CLI."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from typer.testing import CliRunner

from xtalk.model.cli import app
from xtalk.model.examples import SEED000_QUERY, seed000_platform
from xtalk.model.explorer import explore
from xtalk.model.uppaal import to_uppaal_xml

runner = CliRunner()
EXAMPLE = "examples/models/seed000-example.toml"


def test_uppaal_xml_is_well_formed_with_seed_query():
    p = seed000_platform()
    res = explore(p, witnesses=False)
    xml = to_uppaal_xml(p, res, observer=SEED000_QUERY, extra_queries=[SEED000_QUERY])
    root = ET.fromstring(xml.split("\n", 2)[2])  # skip the XML and DOCTYPE lines
    names = [t.findtext("name") for t in root.findall("template")]
    assert names == ["Transport", "Storage", "Task", "Scheduler", "Observer"]
    for tpl in root.findall("template"):
        ids = {loc.get("id") for loc in tpl.findall("location")}
        assert tpl.find("init").get("ref") in ids
        for tr in tpl.findall("transition"):
            assert tr.find("source").get("ref") in ids and tr.find("target").get("ref") in ids
    formulas = [q.findtext("formula") for q in root.iter("query")]
    assert "A[] not (nb_interferences_L2[0][SP0] > 3)" in formulas
    # the explorer's exact maximum gives a holding and a failing query
    m = res.max("SP0", "L2", 0)
    assert f"A[] not (nb_interferences_L2[0][SP0] > {m})" in formulas
    assert f"A[] not (nb_interferences_L2[0][SP0] > {m - 1})" in formulas
    decl = root.findtext("declaration")
    assert "int nb_interferences_L2[NS][NT];" in decl and "const int MU[NT][NS] = {{2, 3, 0}, {2, 0, 3}};" in decl
    assert "system Tr0, St0, St1, T_SP0, T_SP1, Sched, Obs;" in root.findtext("system")


def test_cli_example_reports_seed_bound():
    r = runner.invoke(app, ["example"])
    assert r.exit_code == 0, r.output
    assert "A[] not (nb_interferences_L2[0][SP0] > 3) holds" in r.output


def test_cli_explore_with_penalties_and_witness():
    r = runner.invoke(app, ["explore", EXAMPLE, "--penalty", "AHB=40", "--penalty", "L2=20",
                            "--penalty", "B=60", "--witness", "SP0:AHB:0"])
    assert r.exit_code == 0, r.output
    assert "SP0: interference bound" in r.output and "busy with SP1" in r.output


def test_cli_uppaal_writes_file(tmp_path):
    out = tmp_path / "m.xml"
    r = runner.invoke(app, ["uppaal", EXAMPLE, "-o", str(out), "--bound", "SP0:L2:0:3"])
    assert r.exit_code == 0, r.output
    assert "nb_interferences_L2[0][SP0] &gt; 3" in out.read_text()


def test_cli_bad_input_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "p.toml"
    bad.write_text((open(EXAMPLE).read()).replace("max_requests = 2", "max_requests = -2", 1))
    r = runner.invoke(app, ["explore", str(bad)])
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "task[0].segment[0].max_requests" in lines[0] and "fix:" in lines[0]
    r = runner.invoke(app, ["explore", EXAMPLE, "--penalty", "AHB"])
    assert r.exit_code == 2 and "--penalty" in r.output
