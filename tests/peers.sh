#!/usr/bin/env bash
# The programs some tests drive, installed from Debian's packages when missing (root with
# apt-get only; elsewhere those tests skip and say why):
#   stress-ng         the external-enemy example (examples/enemies-external.toml)
#   openssh-server/-client  the SSH target against a real sshd on loopback
#   rt-tests          cyclictest, the reference the latency victim is compared with
#   chromium          the HTML report loaded in a real headless browser; the evidence bundle's PDF
#   poppler-utils     pdftoppm: page 1 of the evidence PDF as an image (tests/test_evidence.py)
#   pkg-config        the installed xtalk-probe.pc read as a build would (tests/test_installed.py)
#   trace-cmd         `trace-cmd report` on the agent's trace.dat (tests/test_trace.py)
# Every program the tests start is one of these, the base system, or looked up by its test
# (tests/programs.py checks it at the end of every session).
# Says which were present, which it installs, and why it could not.
set -u
need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
have stress-ng || need+=(stress-ng)
have sshd || need+=(openssh-server)
{ have ssh && have ssh-keygen; } || need+=(openssh-client)
have cyclictest || need+=(rt-tests)
have chromium || have chromium-browser || have google-chrome || need+=(chromium)
have pkg-config || need+=(pkg-config)
have pdftoppm || need+=(poppler-utils)
have trace-cmd || need+=(trace-cmd)
if [ ${#need[@]} -eq 0 ]; then
  echo "test peers: stress-ng, sshd/ssh, cyclictest, chromium, pkg-config, pdftoppm and trace-cmd are present"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "test peers: ${need[*]} missing and not installable here (needs root and apt-get); their tests skip, each with the reason"
  exit 0
fi
echo "test peers: installing ${need[*]} from Debian's packages (apt-get install; log in /tmp/xtalk-test-peers.log)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/tmp/xtalk-test-peers.log 2>&1
# No service is started by the package: the tests run their own sshd on loopback.
if ! apt-get install -y -qq --no-install-recommends "${need[@]}" >>/tmp/xtalk-test-peers.log 2>&1; then
  echo "test peers: apt-get install failed (see /tmp/xtalk-test-peers.log); the tests that need ${need[*]} skip, each with the reason"
fi
exit 0
