#!/bin/sh
# A board of the lab test (tests/test_lab.py), powered by labgrid's ExternalPowerDriver:
# `on DIR KERNEL` is its boot (the kernel asked for appended to DIR/boots, then an sshd of its
# own on loopback, from DIR/sshd_config), `off DIR` its power cut. A DIR with a file `dead`
# is a board that powers on and never answers (a broken image); DIR/oom_score_adj, a board whose
# settings differ from the others': its sshd, and so every session on it, gets that value.
set -eu
cmd=$1 dir=$2 kernel=${3:-}
case $cmd in
on)
    echo "${kernel:-default}" >> "$dir/boots"
    [ -e "$dir/dead" ] && exit 0
    if [ -f "$dir/oom_score_adj" ]; then cat "$dir/oom_score_adj" > /proc/self/oom_score_adj; fi
    exec "${SSHD:-/usr/sbin/sshd}" -f "$dir/sshd_config" -E "$dir/sshd.log" ;;
off)
    if [ -f "$dir/sshd.pid" ]; then kill "$(cat "$dir/sshd.pid")" 2>/dev/null || true; rm -f "$dir/sshd.pid"; fi
    echo off >> "$dir/power" ;;
*) echo "usage: $0 on|off DIR [KERNEL]" >&2; exit 2 ;;
esac
