#!/usr/bin/env bash
# The programs some tests drive, installed from Debian's packages when missing (root with
# apt-get only; elsewhere those tests skip and say why): stress-ng for the external-enemy
# example, sshd/ssh/ssh-keygen for the SSH target against a real sshd on loopback.
set -u
need=()
command -v stress-ng >/dev/null || need+=(stress-ng)
command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || need+=(openssh-client)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "test peers: ${need[*]} missing and not installable here (needs root and apt-get); their tests skip"
  exit 0
fi
echo "test peers: installing ${need[*]} (apt-get install)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1
# No service is started by the package (tests run their own sshd on loopback).
if ! apt-get install -y -qq --no-install-recommends "${need[@]}" >/tmp/xtalk-test-peers.log 2>&1; then
  echo "test peers: apt-get install failed (see /tmp/xtalk-test-peers.log); their tests skip"
fi
exit 0
