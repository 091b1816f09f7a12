"""The board scripts' argument handling and the qemu command line they build (board/; the
board itself is too slow for `make test`: `make board-test`, docs/board.md). Nothing is
booted or installed here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from programs import need_program

ROOT = Path(__file__).resolve().parent.parent
BOARD = ROOT / "board" / "board.sh"


def _board(tmp_path, *args):
    env = dict(os.environ, XTALK_BOARD_DIR=str(tmp_path))
    return subprocess.run(["sh", str(BOARD), *args], capture_output=True, text=True, env=env, timeout=30)


def test_qemu_command_is_the_a53_board_with_its_pmu_and_ssh_on_loopback(tmp_path):
    # board.sh asks qemu for the virt machine's device tree: the board's tools, not the suite's.
    need_program("qemu-system-aarch64", "`make board` installs it (board/tools.sh, docs/board.md)")
    out = _board(tmp_path, "command", "rt", "2345")
    assert out.returncode == 0, out.stderr
    cmd = out.stdout
    assert "qemu-system-aarch64 -M virt -cpu cortex-a53,pmu=on -smp 4" in cmd
    assert "hostfwd=tcp:127.0.0.1:2345-:22" in cmd
    assert f"{tmp_path}/vmlinuz-rt" in cmd and f"{tmp_path}/initrd-rt" in cmd
    assert "snapshot=on" in cmd  # the cached image is never written


def test_a_wrong_kernel_or_subcommand_is_one_line_and_exit_2(tmp_path):
    for args, says in ((("up", "preempt"),  "kernel 'preempt': write stock or rt"),
                       (("command", "x"), "kernel 'x': write stock or rt"),
                       (("reboot",), "usage: board/board.sh up")):
        out = _board(tmp_path, *args)
        assert out.returncode == 2, (args, out)
        assert says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_up_without_an_image_says_to_build_it(tmp_path):
    out = _board(tmp_path, "up")
    assert out.returncode == 2 and "run 'make board' first" in out.stderr, out.stderr
    assert not (tmp_path / "run" / "qemu.pid").exists()


def test_board_test_refuses_a_wrong_kernel_before_starting_anything(tmp_path):
    env = dict(os.environ, XTALK_BOARD_DIR=str(tmp_path))
    out = subprocess.run(["sh", str(ROOT / "board" / "test.sh"), "preempt_rt"], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 2 and "kernel 'preempt_rt': write stock or rt" in out.stderr, out.stderr
    assert not (tmp_path / "run").exists()


def test_the_guest_clean_up_check_leaves_xtalk_s_furniture_alone(tmp_path):
    # `make guest-test` failed its own check on "/run/xtalk: tracefs.lock tracefs.users",
    # files every agent keeps there (tests/leftovers.py RUN_KEEP says so for this machine).
    import sys

    from leftovers import RUN_KEEP

    sys.path.insert(0, str(ROOT / "board"))
    try:
        import check_board
    finally:
        sys.path.remove(str(ROOT / "board"))
    assert set(RUN_KEEP) <= set(check_board.RUN_KEEP)
    for name in [*check_board.RUN_KEEP, "stray.pid"]:
        (tmp_path / name).write_text("")
    command = check_board.CLEAN["/run/xtalk"].replace("/run/xtalk", str(tmp_path))
    left = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=10).stdout.split()
    assert left == ["stray.pid"], left


def test_the_image_cache_and_its_keys_are_root_only(tmp_path):
    """The images hold the machines' SSH host private keys and root's authorized key: the
    cache directory is 0700 and every file in it 0600 (issue 31 item 5), files an earlier
    build left world-readable included. Checked on an already-built cache (the script
    closes it and stops; building an image takes minutes)."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    names = ["guest-rootfs.img", "guest-host_key.pub", "id_ed25519", "id_ed25519.pub",
             *(f"guest-{f}-{k}" for k in ("stock", "rt") for f in ("vmlinuz", "initrd", "version"))]
    for n in names:
        (cache / n).write_text("x")
        (cache / n).chmod(0o644)
    out = subprocess.run(["sh", str(ROOT / "board" / "build-image.sh"), "--guest", str(cache)], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0 and "already built" in out.stderr + out.stdout, out.stderr
    assert cache.stat().st_mode & 0o777 == 0o700
    assert {n: (cache / n).stat().st_mode & 0o777 for n in names} == {n: 0o600 for n in names}


def test_each_image_gets_host_keys_made_for_it_root_only():
    """The build removes any host key the root came with and makes the image's own, private
    keys 0600 (read from the script: running it needs root, a mirror and minutes)."""
    text = (ROOT / "board" / "build-image.sh").read_text()
    steps = [text.index(s) for s in ('rm -f "$root"/etc/ssh/ssh_host_*', 'ssh-keygen -q -A -f "$root"',
                                     'chmod 600 "$root"/etc/ssh/ssh_host_*_key', '(umask 077 && nice -n 19 mkfs.ext4',
                                     'private_files "$cache"')]
    assert steps == sorted(steps)
    assert "(umask 077 && nice -n 19 mkfs.ext4" in text
