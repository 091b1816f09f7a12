"""The distributed engine on a LocalCluster of 2 workers on 127.0.0.1 (`--cluster local:2`, TLS
with certificates xtalk makes): every run lands once in the shared store, and a worker (a
target) never holds two runs at once. No plain tcp:// scheduler without --insecure-cluster."""

from __future__ import annotations

import json

import pytest

import xtalk
from campaign_util import campaign_dirs, tiny
from conftest import processes_named, xtalk as run_xtalk
from xtalk.campaign import journal

distributed = pytest.importorskip("distributed")


def test_campaign_on_a_local_dask_cluster_speaks_tls_by_default(tmp_path):
    pytest.importorskip("cryptography")
    f = tiny(tmp_path, jobs=30)
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--cluster", "local:2", timeout=150)
    assert out.returncode == 0, out.stderr
    assert "6 done, 0 failed, 0 remaining of 6" in out.stdout, out.stdout
    # The scheduler xtalk started spoke TLS, with certificates it made in a private directory
    # and removed at the end.
    line = next(x for x in out.stdout.splitlines() if x.startswith("local cluster:"))
    assert "2 worker(s) behind tls://127.0.0.1:" in line, line
    certs = line.rpartition(" in ")[2].rstrip(")")
    from pathlib import Path

    from xtalk.targets.private_dir import private_dir

    assert Path(certs).parent == private_dir() and not Path(certs).exists(), line
    (store,) = campaign_dirs(tmp_path / "res")
    events = journal.read(store / "journal.jsonl")
    done = [e for e in events if e.get("state") == "done"]
    assert sorted(e["run"] for e in done) == sorted(r["run_id"] for r in json.loads((store / "campaign.json").read_text())["runs"])
    # One run at a time per worker: the intervals each worker spent on runs never overlap.
    by_worker: dict = {}
    for e in done:
        by_worker.setdefault(e["worker"], []).append((e["started"], e["ended"]))
    assert len(by_worker) == 2, by_worker  # both workers took work
    for spans in by_worker.values():
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])), spans
    assert not any((store / "staging").iterdir())
    assert len(xtalk.open(store).jobs()) == 6 * 30
    assert not processes_named()


# -- security: workers run as root, so the scheduler speaks TLS with certificates ----------------


def test_a_plain_tcp_scheduler_off_loopback_is_refused_before_anything_starts(tmp_path):
    f = tiny(tmp_path, jobs=10)
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--cluster", "tcp://10.1.2.3:8786")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "plain tcp:// lets anyone who reaches the scheduler run code as root" in out.stderr
    assert "tls://10.1.2.3:8786" in out.stderr and "--insecure-cluster" in out.stderr
    assert not campaign_dirs(tmp_path / "res")
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--cluster", "tls://10.1.2.3:8786")
    assert out.returncode == 2 and "give --tls-ca, --tls-cert, --tls-key" in out.stderr, out.stderr
    assert not campaign_dirs(tmp_path / "res")


def test_a_plain_tcp_scheduler_on_loopback_is_refused_too(tmp_path):
    f = tiny(tmp_path, jobs=10)
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--cluster", "tcp://127.0.0.1:8786")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "every local user run code as root" in out.stderr and "--insecure-cluster" in out.stderr
    assert "--cluster local" in out.stderr
    assert not campaign_dirs(tmp_path / "res")
    for bad in ("local:0", "local:x"):
        out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--cluster", bad)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--cluster", "local", "--insecure-cluster")
    assert out.returncode == 2 and "makes its own certificates" in out.stderr, out.stderr
    assert not campaign_dirs(tmp_path / "res")


@pytest.mark.parametrize("address,insecure,allowed", [
    ("tcp://127.0.0.1:8786", False, False),   # every local user reaches loopback
    ("tcp://127.3.4.5:8786", False, False),
    ("tcp://[::1]:8786", False, False),
    ("localhost:8786", False, False),
    ("tcp://127.0.0.1:8786", True, True),
    ("inproc://x/1/2", False, True),
    ("tcp://10.0.0.1:8786", False, False),
    ("tcp://board-farm:8786", False, False),  # a name may resolve anywhere
    ("10.0.0.1:8786", False, False),          # no scheme: Dask's default, tcp
    ("ws://10.0.0.1:8786", False, False),
    ("tcp://10.0.0.1:8786", True, True),      # the user said so
    ("ucx://10.0.0.1:8786", True, False),
])
def test_which_scheduler_addresses_may_go_without_tls(address, insecure, allowed):
    from xtalk.errors import UsageError
    from xtalk.campaign.dask import cluster_security

    if allowed:
        assert cluster_security(address, insecure=insecure) is None
    else:
        with pytest.raises(UsageError):
            cluster_security(address, insecure=insecure)


def _openssl(*args, cwd):
    import subprocess

    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d, name="cluster"):
    """A throwaway CA and one certificate signed by it (used for every role here)."""
    d.mkdir()
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", f"/CN={name} CA", cwd=d)
    _openssl("req", *ec, "-keyout", "node.key", "-out", "node.csr", "-subj", f"/CN={name} node", cwd=d)
    _openssl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "node.pem", "-days", "2", cwd=d)
    return d / "ca.pem", d / "node.pem", d / "node.key"


@pytest.fixture
def tls_cluster(tmp_path):
    import shutil

    from distributed import LocalCluster
    from distributed.security import Security

    if not shutil.which("openssl"):
        pytest.skip("needs the openssl command to make a throwaway CA")
    ca, cert, key = make_pki(tmp_path / "pki")
    sec = Security(tls_ca_file=str(ca), tls_scheduler_cert=str(cert), tls_scheduler_key=str(key),
                   tls_worker_cert=str(cert), tls_worker_key=str(key), tls_client_cert=str(cert),
                   tls_client_key=str(key), require_encryption=True)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", protocol="tls://",
                      security=sec, dashboard_address=None, resources={"xtalk_target": 1}, silence_logs=50) as c:
        yield c, (ca, cert, key)


def test_campaign_on_a_tls_cluster_with_certificates_and_a_stranger_refused(tls_cluster, tmp_path):
    cluster, (ca, cert, key) = tls_cluster
    address = cluster.scheduler_address
    assert address.startswith("tls://")
    f = tiny(tmp_path, jobs=10, **{"repetitions = 3": "repetitions = 1"})
    tls = ["--tls-ca", ca, "--tls-cert", cert, "--tls-key", key]
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--cluster", address, *tls, timeout=150)
    assert out.returncode == 0, out.stderr
    assert "2 done, 0 failed, 0 remaining of 2" in out.stdout, out.stdout
    # A client whose certificate another CA signed is not let in: one line, exit 3.
    oca, ocert, okey = make_pki(tmp_path / "other", name="stranger")
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res2", "--cluster", address,
                    "--tls-ca", ca, "--tls-cert", ocert, "--tls-key", okey, timeout=150)
    assert out.returncode == 3 and "no scheduler answers" in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert not processes_named()
