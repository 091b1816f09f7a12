"""manifest.json: every file of the bundle with its SHA-256, the inputs' hashes and the
environment; its OpenSSH signature (`ssh-keygen -Y sign`, namespace NAMESPACE); and the check
of both (`xtalk evidence verify`). No cryptography of our own: hashlib and ssh-keygen."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .. import safepath
from ..errors import UsageError

MANIFEST, SIGNATURE, SIGNER = "manifest.json", "manifest.json.sig", "signer.pub"
#: What the signature is for (ssh-keygen's namespace): a key's signature of something else
#: cannot pass for one of a bundle.
NAMESPACE = "xtalk-evidence"
FORMAT = "xtalk-evidence/1"
#: Files of an input directory whose hashes the manifest keeps (the job logs are in jobs.parquet).
INPUT_FILES = ("experiment.toml", "experiment.json", "campaign.toml", "campaign.json", "runs/*/run.json", "runs/*/plan.json", "runs/*/jobs.parquet",
               "runs/*/*/jobs.parquet")


def sha256(path: Path) -> str:
    """The file's SHA-256, read without following a link (a link is not a file of the bundle)."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def bundle_files(root: Path) -> dict[str, Path]:
    """Every entry under ``root`` but the manifest and its signature, by its path relative to
    root; links are listed (and later refused as files), directories are walked, not followed."""
    out = {}
    for d, dirs, files in os.walk(root, followlinks=False):
        for n in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            rel = os.path.relpath(os.path.join(d, n), root)
            if rel not in (MANIFEST, SIGNATURE):
                out[rel] = Path(d) / n
    return dict(sorted(out.items()))


def input_hashes(path: Path) -> dict[str, str]:
    """The hashes of an input directory's experiment, plans, run outcomes and job tables."""
    out = {}
    for pattern in INPUT_FILES:
        for p in sorted(path.glob(pattern)):
            if p.is_file() and not p.is_symlink():
                out[str(p.relative_to(path))] = sha256(p)
    return out


def write(root: Path, header: dict, inputs: list[dict]) -> dict:
    """manifest.json over every file now in ``root``; returns it."""
    doc = {"format": FORMAT, **header, "inputs": inputs,
           "files": {rel: sha256(p) for rel, p in bundle_files(root).items()}}
    safepath.write_text(root / MANIFEST, json.dumps(doc, indent=2, sort_keys=False) + "\n")
    return doc


def _keygen() -> str:
    exe = shutil.which("ssh-keygen")
    if exe is None:
        raise UsageError("--key: ssh-keygen is not installed (apt-get install openssh-client); it makes and checks "
                         "the signature")
    return exe


def public_key(key: Path) -> str:
    """The public half of the private key ``key`` (KEY.pub, else derived by ssh-keygen -y)."""
    pub = Path(str(key) + ".pub")
    if pub.is_file():
        return pub.read_text().strip()
    r = subprocess.run([_keygen(), "-y", "-f", str(key)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise UsageError(f"--key {key}: not a private key ssh-keygen reads ({r.stderr.strip()}); give e.g. ~/.ssh/id_ed25519")
    return r.stdout.strip()


def fingerprint(public: str) -> str:
    """The public key's SHA-256 fingerprint as ssh-keygen prints it (`SHA256:...`)."""
    r = subprocess.run([_keygen(), "-l", "-f", "-"], input=public + "\n", capture_output=True, text=True)
    return r.stdout.split()[1] if r.returncode == 0 and len(r.stdout.split()) > 1 else public.split()[0]


def check_key(key: Path) -> str:
    """Refuse a key that cannot sign before any work (exit 2); its public half."""
    if not key.is_file():
        raise UsageError(f"--key {key}: no such file; give your SSH private key (ssh-keygen -t ed25519 makes one)")
    return public_key(key)


def sign(root: Path, key: Path) -> None:
    """manifest.json.sig and signer.pub beside the manifest (signer.pub is not in the manifest's
    list: it must be written before, see bundle.py). ssh-keygen reads the manifest on stdin and
    writes the signature on stdout, so it opens no path of the bundle itself."""
    data = (root / MANIFEST).read_bytes()
    r = subprocess.run([_keygen(), "-Y", "sign", "-f", str(key), "-n", NAMESPACE], input=data, capture_output=True)
    if r.returncode != 0:
        raise UsageError(f"--key {key}: ssh-keygen could not sign: {r.stderr.decode(errors='replace').strip()}")
    safepath.write_bytes(root / SIGNATURE, r.stdout)


def _signature_problem(root: Path, signer: str) -> str | None:
    """None when manifest.json's signature was made by the public key ``signer``."""
    with tempfile.TemporaryDirectory(prefix="xtalk-evidence-") as tmp:
        allowed = Path(tmp) / "allowed_signers"
        safepath.write_text(allowed, f"{NAMESPACE} {signer}\n")
        r = subprocess.run([_keygen(), "-Y", "verify", "-f", str(allowed), "-I", NAMESPACE, "-n", NAMESPACE,
                            "-s", str(root / SIGNATURE)], input=(root / MANIFEST).read_bytes(), capture_output=True)
    if r.returncode == 0:
        return None
    why = (r.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
    return f"signature: {SIGNATURE} was not made by the key {fingerprint(signer)} ({why})"


def signed_by(root: Path, signer_key: Path | None) -> str:
    """Who signed an intact bundle, as a reader must take it: the key given, or the bundle's own
    (which anyone who rewrote the bundle could have put there)."""
    if not (root / SIGNATURE).is_file():
        return "not signed"
    if signer_key is not None:
        return f"signed by the key given ({fingerprint(Path(signer_key).read_text().strip())})"
    return (f"signed by {fingerprint((root / SIGNER).read_text().strip())}, the bundle's own {SIGNER}: pass "
            "--signer-key with the signer's public key to check who signed")


def verify(root: Path, signer_key: Path | None = None) -> list[str]:
    """Every problem of the bundle, one line each (empty: intact): files changed, missing or
    extra against manifest.json; the signature against ``signer_key`` (a public key file), else
    against the bundle's own signer.pub (which proves integrity, not who signed)."""
    root = Path(root)
    if not (root / MANIFEST).is_file():
        raise UsageError(f"{root}: no {MANIFEST}; give a directory `xtalk evidence` wrote")
    try:
        doc = json.loads((root / MANIFEST).read_text())
        listed = dict(doc["files"])
    except (ValueError, KeyError, TypeError) as e:
        return [f"{MANIFEST}: damaged ({e}); the bundle cannot be checked"]
    problems = []
    present = bundle_files(root)
    for rel, want in listed.items():
        p = present.get(rel)
        if p is None:
            problems.append(f"missing: {rel}")
        elif p.is_symlink() or not p.is_file():
            problems.append(f"changed: {rel} (now a link or not a file)")
        elif sha256(p) != want:
            problems.append(f"changed: {rel}")
    problems += [f"extra: {rel}" for rel in present if rel not in listed]
    if signer_key is not None:
        try:
            signer = Path(signer_key).read_text().strip()
        except OSError as e:
            raise UsageError(f"--signer-key {signer_key}: cannot be read ({e.strerror}); give the signer's .pub file") from None
    elif (root / SIGNER).is_file():
        signer = (root / SIGNER).read_text().strip()
    else:
        signer = None
    if not (root / SIGNATURE).is_file():
        if signer_key is not None:
            problems.append(f"signature: the bundle is not signed ({SIGNATURE} missing), so --signer-key cannot be checked")
    elif signer is None:
        problems.append(f"signature: no {SIGNER} in the bundle; pass --signer-key with the signer's public key")
    else:
        why = _signature_problem(root, signer)
        if why:
            problems.append(why)
    return problems
