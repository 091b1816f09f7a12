"""Writing under a results directory (src/xtalk/safepath.py): no link followed in any
component, files replaced through O_EXCL temporaries, and no module of xtalk writing a path
any other way (a grep over src/xtalk, so a plain write cannot come back)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import ROOT
from xtalk import safepath
from xtalk.errors import UsageError

SRC = ROOT / "src" / "xtalk"

#: Ways to write a path that bypass safepath: each follows links in the path.
PLAIN_WRITES = [
    (r"\bopen\([^)]*[\"'](?:w|a|x|r\+)b?[\"']", "open(..., 'w')"),
    (r"\.open\(\s*[\"'](?:w|a|x|r\+)b?[\"']", "Path.open('w')"),
    (r"\.write_text\(", "write_text"),
    (r"\.write_bytes\(", "write_bytes"),
    (r"\.to_csv\((?!\s*(?:index|sep|header)\s*=|\s*\))", "to_csv(path)"),
    (r"\.to_parquet\(", "to_parquet"),
    (r"\.to_json\(\s*[^)\s=]+\s*[,)]", "to_json(path)"),
    (r"\bwrite_table\(", "pq.write_table"),
    (r"\bsavefig\((?!\s*buf\b)", "savefig(path)"),
    (r"\.mkdir\(", "Path.mkdir"),
    (r"\bos\.(?:mkdir|makedirs|replace|rename|link|symlink)\(", "os.mkdir/replace/rename"),
    (r"\bshutil\.(?:copy|copyfile|copy2|copytree|move)\(", "shutil copy/move"),
    (r"\.(?:replace|rename)\(\s*(?:Path\(|[\w.]*(?:path|dir|out|dst|dest|final)\b)", "Path.replace/rename"),
    (r"\bos\.open\([^)]*O_(?:CREAT|WRONLY|RDWR|APPEND|TRUNC)", "os.open for writing"),
]
#: Lines allowed anyway, each for a reason written beside it in the source.
ALLOWED = [
    ("catalog.py", "with open(path, \"w\") as f:  # not a results path"),  # make docs rewrites docs/enemies.md
    ("targets/private_dir.py", "os.mkdir(path, 0o700)"),  # xtalk's own private directory, verified after
    ("targets/private_dir.py", "fd = os.open(path, flags | os.O_NOFOLLOW"),  # its files, checked after opening
]


def _plain_writes() -> list[str]:
    found = []
    for f in sorted(SRC.rglob("*.py")):
        rel = f.relative_to(SRC).as_posix()
        if rel == "safepath.py":
            continue
        for n, line in enumerate(f.read_text().splitlines(), 1):
            code = line.split("#", 1)[0] if not line.lstrip().startswith(("\"", "'")) else ""
            code = re.sub(r"\bsafepath\.\w+\(", "(", code)
            if any(rel == a and line.strip().startswith(text) for a, text in ALLOWED):
                continue
            for pattern, what in PLAIN_WRITES:
                if re.search(pattern, code):
                    found.append(f"src/xtalk/{rel}:{n}: {what}: {line.strip()}")
    return found


def test_no_module_writes_a_path_but_through_safepath():
    found = _plain_writes()
    assert not found, "write through xtalk.safepath (replace, write_text, write_parquet, write_csv, save_figure, " \
                      "makedirs, rename, open_fd):\n" + "\n".join(found)


def test_the_grep_sees_each_plain_write(tmp_path, monkeypatch):
    """The patterns catch what they are for (a grep that matches nothing proves nothing)."""
    lines = ['open(p, "w")', 'p.open("wb")', "p.write_text(s)", "p.write_bytes(b)", "df.to_csv(p, index=False)",
             "df.to_parquet(p)", "pq.write_table(t, p)", "fig.savefig(p)", "p.mkdir(parents=True)", "os.replace(a, b)",
             "shutil.copy(a, b)", "tmp.replace(path)", "os.open(p, os.O_WRONLY | os.O_CREAT)", "df.to_json(p)"]
    for line in lines:
        assert any(re.search(p, line) for p, _ in PLAIN_WRITES), line
    for line in ["print(df.to_csv(index=False))", "fig.savefig(buf, format='png')", "open(p)", 'open(p, "rb")',
                 "os.open(p, os.O_RDONLY)", "df.rename(columns=x)", "s.replace('a', 'b')", "plan.to_json()",
                 "table.to_json(orient='records')"]:
        assert not any(re.search(p, line) for p, _ in PLAIN_WRITES), line


@pytest.fixture(params=["openat2", "walk"])
def way(request, monkeypatch):
    """Both ways of reaching a directory: openat2 where the kernel has it, the walk otherwise."""
    if request.param == "walk":
        monkeypatch.setattr(safepath, "_have_openat2", False)
    else:
        fd = safepath._openat2("/", os.O_RDONLY | os.O_DIRECTORY)
        if fd is None:
            pytest.skip("this kernel has no openat2")
        os.close(fd)
    return request.param


def test_a_link_anywhere_on_the_way_is_refused_and_its_target_untouched(tmp_path, way):
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "summary.md").write_text("precious")
    (tmp_path / "link").symlink_to(secret)
    for write in (lambda: safepath.write_text(tmp_path / "link" / "summary.md", "x"),
                  lambda: safepath.write_text(tmp_path / "link" / "report" / "index.html", "x", parents=True),
                  lambda: safepath.makedirs(tmp_path / "link" / "runs"),
                  lambda: safepath.write_parquet(__import__("pandas").DataFrame({"a": [1]}), tmp_path / "link" / "j.parquet")):
        with pytest.raises(UsageError, match=r"link is a symbolic link.*give the real path"):
            write()
    assert os.listdir(secret) == ["summary.md"] and (secret / "summary.md").read_text() == "precious"


def test_a_link_or_file_planted_at_the_name_is_replaced_never_written_through(tmp_path, way):
    decoy = tmp_path / "decoy"
    decoy.write_text("precious")
    d = tmp_path / "r"
    d.mkdir()
    (d / "jobs.parquet").symlink_to(decoy)
    (d / "jobs.parquet.tmp").symlink_to(decoy)  # the old fixed temporary name
    os.link(decoy, d / "run.json")  # a hard link: replaced by rename, its other name untouched
    safepath.write_parquet(__import__("pandas").DataFrame({"a": [1, 2]}), d / "jobs.parquet")
    safepath.write_text(d / "run.json", "{}")
    assert decoy.read_text() == "precious"
    assert not (d / "jobs.parquet").is_symlink() and (d / "run.json").read_text() == "{}"
    assert sorted(os.listdir(d)) == ["jobs.parquet", "jobs.parquet.tmp", "run.json"], "no temporary left behind"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    p = tmp_path / "summary.md"
    p.write_text("old")
    with pytest.raises(RuntimeError):
        with safepath.replace(p) as f:
            f.write("half")
            raise RuntimeError("cut")
    assert p.read_text() == "old" and os.listdir(tmp_path) == ["summary.md"]


def test_results_dir_resolves_the_users_own_links(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "mine").symlink_to(tmp_path / "real")
    assert safepath.results_dir(tmp_path / "mine" / "new", "--results") == tmp_path / "real" / "new"
    assert safepath.results_dir(tmp_path / "real" / ".." / "real", "--out") == tmp_path / "real"


@pytest.mark.skipif(os.geteuid() != 0, reason="the trust rule applies to root")
def test_results_dir_refuses_what_others_can_change_as_root(tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with pytest.raises(UsageError, match=r"--results .*open: writable by group or others \(mode 0777\).*chmod go-w"):
        safepath.results_dir(open_dir, "--results")
    (open_dir / "r").mkdir()
    with pytest.raises(UsageError, match=r"its directory .*open is writable by group or others"):
        safepath.results_dir(open_dir / "r", "--results")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(UsageError, match=r"--out .*theirs/new \(in .*theirs\): owned by uid 65534"):
        safepath.results_dir(theirs / "new", "--out")
    link = tmp_path / "their-link"
    link.symlink_to(tmp_path)
    os.lchown(link, 65534, 65534)
    with pytest.raises(UsageError, match=r"a symbolic link owned by uid 65534"):
        safepath.results_dir(link / "x", "--results")
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    assert safepath.results_dir(sticky / "new", "--results") == sticky / "new", "a new directory in a sticky one, as /tmp"
    assert safepath.results_dir(sticky, "--results") == sticky, "a sticky one itself (a tmpfs mounted for results)"
    os.chmod(open_dir, 0o755)
    (open_dir / "sticky").mkdir(mode=0o1777)
    os.chmod(open_dir, 0o777)
    with pytest.raises(UsageError, match=r"its directory .*open is writable by group or others"):
        safepath.results_dir(open_dir / "sticky", "--results")
