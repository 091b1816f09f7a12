"""The distributed campaign executor: `xtalk campaign run --cluster tls://HOST:PORT --tls-ca ... --tls-cert ... --tls-key ...`.

Each Dask worker owns one target and advertises the resource `xtalk_target=1`; every run is
a task that needs that resource, so a worker (a target) never holds two runs at once. The
worker's target is `$XTALK_TARGET` in its environment (`local`, the default: the board the
worker runs on; or `ssh://...`: a board the worker drives). Workers write each attempt into
the shared store (a path every worker and the driver see, or any fsspec URL) under
`staging/<run>@<session>`; the driver alone publishes it to `runs/` and writes the journal,
so the crash-safety rules of a local campaign hold unchanged (see docs/campaigns.md).

Whoever can talk to the scheduler can run any code on every worker, and workers run as root
on the boards. So the cluster speaks TLS with certificates by default (mutual: Dask requires
a certificate signed by the cluster's CA on both ends); a plain `tcp://` address is accepted
only when the user says `--insecure-cluster` explicitly, on loopback too (every local user
reaches a loopback port, and a root worker there is root for all of them).
`--cluster local[:N]` starts N workers on this machine behind a TLS scheduler on 127.0.0.1,
with a CA and certificate xtalk makes for that campaign in a root-only directory (`local_cluster`).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import re
import socket
import tempfile
import time
import uuid
from pathlib import Path

from rich.console import Console

from .. import safepath
from ..errors import AgentError, UsageError
from ..plan import Plan

RESOURCE = "xtalk_target"
_TARGETS: dict = {}
#: Schemes whose traffic Dask encrypts and authenticates (with a Security of certificates).
SECURE_SCHEMES = ("tls", "wss")


def _host_of(location: str) -> str:
    if location.startswith("["):  # [IPv6]:port
        return location[1:].partition("]")[0]
    return location.rpartition(":")[0] if location.count(":") == 1 else location


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine's loopback interface (only local users reach it)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def cluster_security(address: str, tls_ca: Path | None = None, tls_cert: Path | None = None,
                     tls_key: Path | None = None, insecure: bool = False):
    """The dask `Security` to reach the scheduler at `address` (None: plain TCP, allowed only on
    loopback or with `insecure`). UsageError, naming the option and the fix, otherwise."""
    scheme, sep, location = address.rpartition("://")
    scheme = scheme if sep else "tcp"
    files = {"--tls-ca": tls_ca, "--tls-cert": tls_cert, "--tls-key": tls_key}
    if scheme in SECURE_SCHEMES:
        missing = [k for k, v in files.items() if not v]
        if missing:
            raise UsageError(f"--cluster {address}: TLS needs the cluster CA and this client's certificate and key; "
                             f"give {', '.join(missing)} (docs/campaigns.md shows how to make them)")
        for option, f in files.items():
            if not Path(f).is_file():
                raise UsageError(f"{option} {f}: no such file; give the PEM file (docs/campaigns.md, `Securing a cluster`)")
        try:
            from distributed.security import Security
        except ImportError:
            raise UsageError("--cluster needs Dask: pip install 'xtalk[cluster]'") from None
        return Security(tls_ca_file=str(tls_ca), tls_client_cert=str(tls_cert), tls_client_key=str(tls_key),
                        require_encryption=True)
    given = [k for k, v in files.items() if v]
    if given:
        raise UsageError(f"--cluster {address}: {given[0]} is for a tls:// scheduler; write tls://{location}")
    if scheme in ("tcp", "ws", "inproc"):
        if scheme == "inproc" or insecure:  # inproc: this process alone
            return None
        if is_loopback(_host_of(location)):
            raise UsageError(f"--cluster {address}: plain {scheme}:// on loopback lets every local user run code as root "
                             "through the scheduler; use --cluster local (TLS, certificates made for you), or add "
                             "--insecure-cluster on a machine that is yours alone")
        raise UsageError(f"--cluster {address}: plain {scheme}:// lets anyone who reaches the scheduler run code as root on "
                         f"every board; use tls://{location} with --tls-ca/--tls-cert/--tls-key (docs/campaigns.md), "
                         "or add --insecure-cluster on a network that is yours alone")
    raise UsageError(f"--cluster {address}: unknown scheme {scheme!r}; write tls://HOST:PORT, or local[:N] for workers on this machine")


_LOCAL = re.compile(r"local(?::(\d+))?")


def local_workers(address: str) -> int | None:
    """The number of workers of `--cluster local[:N]` (None: `address` names a scheduler)."""
    m = _LOCAL.fullmatch(address)
    if not m:
        if address.startswith("local:"):
            raise UsageError(f"--cluster {address}: write local:N, N the number of workers (1 to 64)")
        return None
    n = int(m.group(1) or 1)
    if not 1 <= n <= 64:
        raise UsageError(f"--cluster {address}: between 1 and 64 local workers; write local:N")
    return n


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A CA and one certificate it signs (used by the scheduler, the workers and this client),
    written into `directory` (the caller's private one): ca.pem, node.pem, node.key (0600).
    The CA's key is never written: nothing can sign another certificate for this cluster."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        raise UsageError("--cluster local needs the cryptography package for its certificates: "
                         "pip install 'xtalk[cluster]'") from None
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "xtalk local cluster CA")])
    node_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "xtalk local cluster")])

    def cert(subject, public, ca: bool):
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name).public_key(public)
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=30))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        return b.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)

    files = {"ca.pem": cert(ca_name, ca_key.public_key(), True), "node.pem": cert(node_name, key.public_key(), False),
             "node.key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption())}
    for name, data in files.items():
        fd = safepath.open_fd(directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    return directory / "ca.pem", directory / "node.pem", directory / "node.key"


@contextlib.contextmanager
def local_cluster(n_workers: int, say=print):
    """A Dask cluster of `n_workers` on this machine, its scheduler on 127.0.0.1 over mutual TLS:
    yields (address, the client's Security). The certificates are made for this cluster in a
    fresh directory inside xtalk's private one (root: /run/xtalk, 0700) and removed with it."""
    try:
        from distributed import LocalCluster
        from distributed.security import Security
    except ImportError:
        raise UsageError("--cluster needs Dask: pip install 'xtalk[cluster]'") from None
    from ..targets.private_dir import private_dir

    with tempfile.TemporaryDirectory(prefix="cluster-", dir=private_dir()) as d:
        ca, cert, key = make_certificates(Path(d))
        files = {"tls_ca_file": str(ca)}
        for role in ("scheduler", "worker", "client"):
            files |= {f"tls_{role}_cert": str(cert), f"tls_{role}_key": str(key)}
        security = Security(**files, require_encryption=True)
        with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          protocol="tls://", security=security, dashboard_address=None,
                          resources={RESOURCE: 1}, silence_logs=50) as c:
            say(f"local cluster: {n_workers} worker(s) behind {c.scheduler_address} (TLS, certificates made for it in {d})")
            yield c.scheduler_address, security


def worker_target():
    """This worker process's target (created once)."""
    spec = os.environ.get("XTALK_TARGET", "local")
    if spec not in _TARGETS:
        from ..targets.spec import from_spec

        if spec.startswith("labgrid://"):  # a worker lives on: nothing would release its place
            raise UsageError("XTALK_TARGET=labgrid://...: a lab board is driven by the campaign's own executor; "
                             "give it as --target without --cluster (docs/lab.md)")

        t = from_spec(spec)
        if spec == "local":
            t.name = f"local@{socket.gethostname()}"
        _TARGETS[spec] = t
    return _TARGETS[spec]


def run_task(store_url: str, run_id: str, labels: dict, plan_json: str, session: str) -> dict:
    """Runs on a worker: one attempt into the shared store's staging area."""
    import fsspec

    from ..targets.base import TargetUnreachable
    from .execute import attempt
    from .grid import CampaignRun

    try:
        from distributed import get_worker

        worker = get_worker().name
    except (ImportError, ValueError):
        worker = "?"
    target = worker_target()
    run = CampaignRun(run_id, labels, Plan.model_validate_json(plan_json))
    fs, root = fsspec.core.url_to_fs(store_url)
    name = f"{run_id}@{session}"
    try:
        protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        if "file" in protocols:  # a shared file system (NFS on a lab): write in place
            staging = Path(root) / "staging" / name
            safepath.makedirs(staging.parent)
            end = attempt(staging, run, target, "dask")
        else:  # a remote store: run here, then upload the whole attempt
            with tempfile.TemporaryDirectory(prefix="xtalk-") as tmp:
                end = attempt(Path(tmp) / name, run, target, "dask")
                fs.put(str(Path(tmp) / name), f"{root}/staging/{name}", recursive=True)
    except TargetUnreachable as e:
        return {"unreachable": str(e), "worker": str(worker), "target": target.name}
    return {**end, "worker": str(worker), "target": target.name, "staging": name}


class DaskExecutor:
    """Drive a campaign directory on a Dask cluster; the driver owns the journal."""

    def __init__(self, store: Path, address: str, console: Console | None = None, target_wait: float = 600.0,
                 security=None):
        self.store = Path(store)
        self.address = address
        self.security = security  # from `cluster_security`: certificates for a tls:// scheduler
        self.console = console or Console()
        self.target_wait = target_wait

    def run(self) -> dict:
        try:
            from distributed import Client, as_completed
        except ImportError:
            raise UsageError("--cluster needs Dask: pip install 'xtalk[cluster]'") from None
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from .estimate import eta_seconds, human
        from .execute import move_aside, publish, recover
        from .journal import FINAL, Journal, states
        from .layout import JOURNAL, CampaignLock, load

        doc, runs = load(self.store)
        session = uuid.uuid4().hex[:8]
        try:
            client = Client(self.address, timeout="20s", security=self.security)
        except (OSError, TimeoutError) as e:
            raise AgentError(f"--cluster {self.address}: no scheduler answers ({e})") from None
        with client, CampaignLock(self.store), Journal(self.store / JOURNAL) as journal:
            for note in recover(self.store, runs, journal):
                self.console.print(f"[dim]resume: {note}[/]")
            last = states(journal.events())
            finished = [e for e in last.values() if e.get("state") in FINAL]
            queue = [r for r in runs if last.get(r.run_id, {}).get("state") not in FINAL]
            workers = {w: i for w, i in client.scheduler_info()["workers"].items() if i.get("resources", {}).get(RESOURCE)}
            if not workers:
                raise AgentError(f"--cluster {self.address}: no worker offers the resource {RESOURCE}; start workers with "
                                 f"`dask worker {self.address} --nworkers 1 --nthreads 1 --resources {RESOURCE}=1`")
            n = len(workers)
            self.console.print(f"[bold]{doc['name']}[/]: {len(queue)} of {len(runs)} runs to go on {n} worker(s), about "
                               f"{human(eta_seconds([r.plan for r in queue], finished, 'dask', n))} → {self.store}")
            store_url = str(self.store.resolve())
            in_flight = {}
            down_since = None

            def submit(r):
                journal.append(r.run_id, "running", target="cluster")
                f = client.submit(run_task, store_url, r.run_id, r.labels, r.plan.to_json(), session,
                                  resources={RESOURCE: 1}, pure=False, key=f"xtalk-{session}-{r.run_id}")
                in_flight[f.key] = r
                return f

            ac = as_completed()
            # Two tasks per worker in flight: the next run starts at once, the queue stays here.
            while queue and len(in_flight) < 2 * n:
                ac.add(submit(queue.pop(0)))
            cols = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[runs]}"), TimeElapsedColumn(),
                    TextColumn("ETA {task.fields[eta]}")]
            with Progress(*cols, console=self.console) as bar:
                task = bar.add_task("campaign", total=len(runs), runs="", eta="?")
                for fut in ac:
                    r = in_flight.pop(fut.key)
                    try:
                        res = fut.result()
                    except Exception as e:  # the worker died (KilledWorker) or the task failed
                        res = {"unreachable": f"{type(e).__name__}: {e}", "target": "cluster"}
                    if "unreachable" in res:
                        journal.append(r.run_id, "requeued", target=res.get("target"), reason=f"target unreachable: {res['unreachable']}")
                        self.console.print(f"[yellow]{res.get('target')} does not answer ({res['unreachable']}); "
                                           f"{r.run_id} back in the queue[/]")
                        down_since = down_since or time.monotonic()
                        if time.monotonic() - down_since > self.target_wait:
                            raise AgentError(f"targets not answering for {human(self.target_wait)}; "
                                             f"`xtalk campaign resume {self.store} --cluster {self.address}` later")
                        queue.insert(0, r)
                        time.sleep(1.0)
                    else:
                        down_since = None
                        staging = self.store / "staging" / res.pop("staging")
                        publish(self.store, staging, r.run_id)
                        journal.append(r.run_id, res.pop("state"), **{k: v for k, v in res.items() if k != "worker"},
                                       worker=res["worker"])
                        finished.append(res)
                        if res["status"] != "completed":
                            self.console.print(f"[yellow]run {r.run_id}: {res['status']}: {res['reason']}[/]")
                    if queue:
                        ac.add(submit(queue.pop(0)))
                    left = [x.plan for x in queue] + [x.plan for x in in_flight.values()]
                    bar.update(task, completed=len(runs) - len(left),
                               runs=f"{len(runs) - len(left)}/{len(runs)}", eta=human(eta_seconds(left, finished, "dask", n)))
            for d in (self.store / "staging").glob(f"*@{session}") if (self.store / "staging").exists() else []:
                move_aside(self.store, d)
            c = {"done": 0, "failed": 0}
            for e in states(journal.events()).values():
                if e["state"] in c:
                    c[e["state"]] += 1
            return c
