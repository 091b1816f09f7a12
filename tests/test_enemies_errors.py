"""Bad enemy input: one line naming the field and the fix, exit code 2, nothing started
(host checks through the experiment schema and expansion, agent checks through check.rs)."""

import pytest

from conftest import processes_named, xtalk

GOOD = """
name = "e"
repetitions = 1
[victim]
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 5
cpus = "last"
[[scenario]]
name = "x"
enemies = [{ kind = "l2", cpus = "others" }]
"""


@pytest.mark.parametrize("enemy,needle", [
    ('kind = "rowhammer"', "scenario[0].enemies[0].kind"),
    ('kind = "l2", intensity = 150', "scenario[0].enemies[0].intensity"),
    ('kind = "l2", intensity = 0', "scenario[0].enemies[0].intensity"),
    ('kind = "syscall", rate = -5', "scenario[0].enemies[0].rate"),
    ('kind = "read", argv = ["ls"], bytes = "1MiB"', "'argv' is not a parameter of enemy 'read'"),
    ('kind = "read"', "enemy 'read' needs 'bytes'"),
    ('kind = "net"', "enemy 'net' needs 'proto'"),
    ('kind = "net", proto = "udp", message_bytes = "1MiB"', "enemies[0].load.message_bytes"),
    ('kind = "timer", interval = "10ns"', "scenario[0].enemies[0].interval: Input should be greater than or equal to 1000 ns"),
    ('kind = "chase", bytes = "1MiB", chains = 500', "scenario[0].enemies[0].chains"),
    ('kind = "icache", functions = 99999', "scenario[0].enemies[0].functions"),
    ('kind = "tlb", pages = 64, huge_pages = true', "enemies[0].huge_pages"),
    ('kind = "copy", bytes = "64TiB"', "only"),
    ('kind = "l2", cpus = [4096]', "CPU 4096 does not exist"),
    ('kind = "fileio", bytes = "1MiB", dir = "/nonexistent/xtalk"', "enemies[0].load.dir"),
    ('kind = "external"', "enemy 'external' needs 'argv'"),
    ('kind = "external", argv = ["xtalk-no-such-command"]', "enemies[0].load.argv[0]"),
    ('kind = "external", argv = ["sleep", "9"], rate_regex = "[0-9]+"', "needs one capture group"),
    ('kind = "external", argv = ["sleep", "9"], rate_regex = "(["', "enemies[0].load.rate_regex"),
])
def test_bad_enemy(tmp_path, enemy, needle):
    text = GOOD.replace('kind = "l2", cpus = "others"', enemy if "cpus" in enemy else enemy + ', cpus = "others"')
    f = tmp_path / "exp.toml"
    f.write_text(text)
    out = xtalk("run", f, "--results", tmp_path / "res")
    assert out.returncode == 2, out.stderr + out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert needle in lines[0], lines[0]
    assert not (tmp_path / "res").exists(), "nothing may start on bad input"
    assert not processes_named()
