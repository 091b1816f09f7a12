"""What a board sends back is unpacked only below the run directory (targets/ssh.unpack): a
hostile board's archive with links, absolute or `..` paths or devices writes nothing outside,
and is refused naming the member; an agent's ordinary output comes through whole."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from xtalk.targets.ssh import UnsafeArchive, unpack


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    buf.seek(0)
    return buf


def _file(name: str, data: bytes = b"x", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info, data


def _link(name: str, target: str, kind=tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def _dir(name: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    return info, None


def test_an_agents_output_comes_through_whole(tmp_path):
    dest = tmp_path / "run" / ".fetch"
    unpack(_tar([_dir("out"), _file("out/run.json", b"{}"), _file("out/jobs.bin", b"\0" * 64),
                 _file("agent.log", b"ok\n", mode=0o4755)]), dest)
    assert (dest / "out" / "run.json").read_bytes() == b"{}" and (dest / "out" / "jobs.bin").stat().st_size == 64
    # No set-uid bit survives, and the files are the unpacking user's.
    st = (dest / "agent.log").stat()
    assert not st.st_mode & 0o6000 and st.st_uid == os.getuid()


@pytest.mark.parametrize("evil, why", [
    (_file("../escaped"), "'..' path"),
    (_file("out/../../escaped"), "'..' path"),
    (_file("/tmp/xtalk-test-escaped-abs"), "absolute path"),
    (_link("out/link", "/etc"), "symbolic link to '/etc'"),
    (_link("out/rel", "../../.."), "symbolic link"),
    (_link("out/hard", "/etc/passwd", tarfile.LNKTYPE), "hard link"),
    (_link("out/fifo", "", tarfile.FIFOTYPE), "not a regular file or directory"),
])
def test_a_hostile_archive_writes_nothing_outside_and_is_refused_by_member(tmp_path, evil, why):
    dest = tmp_path / "results" / "run" / ".fetch"
    dest.parent.mkdir(parents=True)
    # The hostile member, then one that would write through it if it had been made.
    stream = _tar([_dir("out"), _file("out/run.json", b"{}"), evil, _file("out/link/escaped-through")])
    with pytest.raises(UnsafeArchive, match=why):
        unpack(stream, dest)
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(["results", "run", ".fetch", "out", "run.json"])
    assert not Path("/tmp/xtalk-test-escaped-abs").exists() and not Path("/etc/escaped-through").exists()
