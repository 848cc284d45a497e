"""Container images without a registry: docker-archive tarballs built here, imported into containerd.

Nothing can be pulled on this machine, so each image is one layer of files we already have,
written as a docker-archive (``manifest.json`` + a config JSON + the layer tar) and loaded with
``ctr -n k8s.io images import``. Pods must use ``imagePullPolicy: IfNotPresent`` (the default for
a tag other than ``latest``) or ``Never``.

- pause: the pod sandbox; busybox-static sleeping (any static binary that sleeps will do).
- etcd: laid out like the official image (static ``etcd``, ``etcdctl``, ``etcdutl`` at
  ``/usr/local/bin``), tagged ``quay.io/coreos/etcd:v<the binary's own version>``; by default
  the per-version cache's build of the default spec.version.
- bitnami: laid out like Bitnami's etcd image (``bitnami_archive``), with traps where its
  scripts would be.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

from actors.model import DEFAULT_VERSION
from tests.harness import etcd_versions
from tests.harness.components import MissingComponent

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
ETCD_REPOSITORY = "quay.io/coreos/etcd"
OPERATOR_IMAGE = "etcd-supervisor:dev"  # what deploy/base's Deployment runs
BUSYBOX = Path("/bin/busybox")
BUSYBOX_IMAGE = "e2e.local/busybox:1"  # a test pod's tools: sh, httpd, wget, nslookup


# path in the image -> a file here, "->target" for a symlink, or DIRECTORY for an empty directory
Layer = Mapping[str, Path | str]
DIRECTORY = "<directory>"


def _layer_tar(files: Layer) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        made: set[str] = set()
        for dest in sorted(files):
            parts = Path(dest.lstrip("/")).parts
            for i in range(1, len(parts)):
                name = "/".join(parts[:i])
                if name not in made:
                    made.add(name)
                    info = tarfile.TarInfo(name)
                    # Readable by any user: the operator runs as 65532.
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            src = files[dest]
            if src == DIRECTORY:
                info = tarfile.TarInfo(dest.lstrip("/"))
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif isinstance(src, str):
                info = tarfile.TarInfo(dest.lstrip("/"))
                info.type, info.linkname = tarfile.SYMTYPE, src.removeprefix("->")
                tar.addfile(info)
            else:
                info = tar.gettarinfo(str(src), arcname=dest.lstrip("/"))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mode |= 0o444 | (0o111 if info.mode & 0o100 else 0)
                with open(src, "rb") as f:
                    tar.addfile(info, f)
    return buf.getvalue()


def write_docker_archive(
    out: Path,
    tag: str,
    layers: Sequence[Layer],
    *,
    entrypoint: list[str],
    env: Mapping[str, str] = {},
    cmd: list[str] | None = None,
    user: str | None = None,
) -> Path:
    """A docker-archive of ``layers`` (bottom first), as ``docker save`` writes one."""
    blobs = [_layer_tar(files) for files in layers]
    image_config: dict[str, object] = {
        "Entrypoint": entrypoint,
        "Env": [f"{k}={v}" for k, v in {"PATH": "/usr/local/bin:/usr/bin:/bin", **env}.items()],
    }
    if cmd is not None:
        image_config["Cmd"] = cmd
    if user is not None:
        image_config["User"] = user
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(b).hexdigest() for b in blobs]},
    }
    config_bytes = json.dumps(config).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    names = [f"layer{i}.tar" for i in range(len(blobs))]
    manifest = [{"Config": config_name, "RepoTags": [tag], "Layers": names}]
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, mode="w") as tar:
        for name, data in [
            *zip(names, blobs, strict=True),
            (config_name, config_bytes),
            ("manifest.json", json.dumps(manifest).encode()),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def pause_archive(out_dir: Path) -> Path:
    if not BUSYBOX.exists():
        raise MissingComponent("busybox-static missing (make node installs it)")
    return write_docker_archive(
        out_dir / "pause.tar",
        PAUSE_IMAGE,
        [{"/bin/busybox": BUSYBOX}],
        entrypoint=["/bin/busybox", "sleep", "2147483647"],
    )


def busybox_archive(out_dir: Path) -> Path:
    """busybox-static with the applets a network test runs in a pod (a web server, a client,
    a resolver that reads the pod's resolv.conf itself)."""
    if not BUSYBOX.exists():
        raise MissingComponent("busybox-static missing (make node installs it)")
    applets = ("sh", "httpd", "wget", "nslookup", "timeout", "sleep", "hostname", "cat", "echo", "mkdir")
    files: dict[str, Path | str] = {"/bin/busybox": BUSYBOX}
    files.update({f"/bin/{a}": "->busybox" for a in applets})
    return write_docker_archive(out_dir / "busybox.tar", BUSYBOX_IMAGE, [files], entrypoint=["/bin/sh"])


def default_etcd_dir() -> Path:
    """The default spec.version's build in the per-version cache (`make etcd-versions`): the
    e2e clusters run the version a user gets, not the wheel's 3.5.1 (which etcd warns against)."""
    found = etcd_versions.find_built(DEFAULT_VERSION)
    if isinstance(found, str):
        raise MissingComponent(found)
    return found.etcd.parent


def etcd_version(bin_dir: Path) -> str:
    out = subprocess.run([str(bin_dir / "etcd"), "--version"], capture_output=True, text=True, check=True)
    found = re.search(r"etcd Version: (\S+)", out.stdout)
    if not found:
        raise MissingComponent(f"cannot tell the version of {bin_dir / 'etcd'}")
    return found.group(1)


def _etcd_binaries(bin_dir: Path, image_bin_dir: str) -> tuple[dict[str, Path | str], str]:
    """The etcd binaries in ``bin_dir`` as a layer under ``image_bin_dir``, and their version."""
    for name in ("etcd", "etcdctl"):
        if not os.access(bin_dir / name, os.X_OK):
            raise MissingComponent(f"{bin_dir / name} missing: no etcd image can be built")
    # etcdutl exists from 3.5 on; the official 3.4 image has none either.
    names = [n for n in ("etcd", "etcdctl", "etcdutl") if (bin_dir / n).exists()]
    files: dict[str, Path | str] = {f"{image_bin_dir}/{n}": bin_dir / n for n in names}
    return files, etcd_version(bin_dir)


def etcd_archive(out_dir: Path, bin_dir: Path | None = None) -> tuple[Path, str]:
    """The official-image layout of the etcd binaries in ``bin_dir``; returns (archive, version)."""
    bin_dir = bin_dir or Path(os.environ.get("E2E_ETCD_BIN_DIR") or default_etcd_dir())
    files, version = _etcd_binaries(bin_dir, "/usr/local/bin")
    tag = f"{ETCD_REPOSITORY}:v{version}"
    return write_docker_archive(
        out_dir / f"etcd-{version}.tar", tag, [files], entrypoint=["/usr/local/bin/etcd"]
    ), version


def broken_etcd_archive(out_dir: Path, version: str) -> Path:
    """An official-layout image tagged `version` whose etcd exits at once, saying so: a release
    that fails to start. A static C program (the image has no shell)."""
    work = out_dir / f"broken-etcd-{version}"
    work.mkdir(parents=True, exist_ok=True)
    source = work / "etcd.c"
    source.write_text(
        '#include <stdio.h>\nint main(void) { fputs("etcd: this build is broken\\n", stderr); return 1; }\n'
    )
    binary = work / "etcd"
    subprocess.run(["gcc", "-static", "-O2", "-o", binary, source], check=True)
    files: dict[str, Path | str] = {f"/usr/local/bin/{n}": binary for n in ("etcd", "etcdctl", "etcdutl")}
    tag = f"{ETCD_REPOSITORY}:v{version}"
    return write_docker_archive(work / "image.tar", tag, [files], entrypoint=["/usr/local/bin/etcd"])


BITNAMI_REPOSITORY = "docker.io/bitnami/etcd"  # "bitnami/" in it: spec.image_family is Bitnami's
BITNAMI_SCRIPTS = "/opt/bitnami/scripts/etcd"
# What every trap prints to stderr; the e2e test looks for it in every container's log.
TRAP_LINE = "TRAP: bitnami {script} ran; the supervisor must never depend on it"


def _trap_script(out_dir: Path, script: str) -> Path:
    path = out_dir / "bitnami-traps" / script
    path.parent.mkdir(parents=True, exist_ok=True)
    line = TRAP_LINE.format(script=script)
    path.write_text(
        f"#!/bin/sh\n# A trap in place of Bitnami's {script}, not a copy of it.\necho '{line}' >&2\nexit 1\n"
    )
    path.chmod(0o755)
    return path


def bitnami_archive(out_dir: Path, bin_dir: Path) -> tuple[Path, str]:
    """An image of Bitnami's etcd layout, without any of Bitnami's scripts (they must not be in
    this repository); returns (archive, version).

    The etcd binaries of ``bin_dir`` at /opt/bitnami/etcd/bin, busybox for a shell and chown,
    user 1001, /bitnami/etcd for the volume, tagged ``docker.io/bitnami/etcd:<version>`` (no
    "v", as Bitnami tags). Its entrypoint, command and preStop script are traps: each prints
    TRAP_LINE to stderr and exits 1. Those scripts are how Bitnami's image manages membership
    on its own; a pod that ever runs one fails, and the test that made it sees the line.
    """
    if not BUSYBOX.exists():
        raise MissingComponent("busybox-static missing (make node installs it)")
    files, version = _etcd_binaries(bin_dir, "/opt/bitnami/etcd/bin")
    applets = ("sh", "chown", "stat", "ls", "id", "cat")
    files.update({"/bin/busybox": BUSYBOX, **{f"/bin/{a}": "->busybox" for a in applets}})
    files["/bitnami/etcd"] = DIRECTORY
    for script in ("entrypoint.sh", "run.sh", "prestop.sh"):
        files[f"{BITNAMI_SCRIPTS}/{script}"] = _trap_script(out_dir, script)
    return write_docker_archive(
        out_dir / f"bitnami-etcd-{version}.tar",
        f"{BITNAMI_REPOSITORY}:{version}",
        [files],
        entrypoint=[f"{BITNAMI_SCRIPTS}/entrypoint.sh"],
        cmd=[f"{BITNAMI_SCRIPTS}/run.sh"],
        user="1001",
        env={"PATH": "/opt/bitnami/etcd/bin:/usr/local/bin:/usr/bin:/bin"},
    ), version


def cached_etcd(minor: str) -> Path | None:
    """The newest etcd ``minor`` (e.g. "3.6") built into the per-version cache, if any (the
    etcd-versions build fills it; optional, like the version tests that use it)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "etcd-supervisor" / "etcd"
    found = [
        d for d in cache.glob(f"{minor}.*") if os.access(d / "etcd", os.X_OK) and (d / "etcdctl").exists()
    ]
    key = lambda d: tuple(int(x) for x in d.name.split(".") if x.isdigit())  # noqa: E731
    return max(found, key=key) if found else None


def built_etcd(minor: str) -> Path:
    """`cached_etcd(minor)`, for require(): MissingComponent when none is built."""
    found = cached_etcd(minor)
    if found is None:
        raise MissingComponent(f"no etcd {minor} in ~/.cache/etcd-supervisor/etcd (`make etcd-versions`)")
    return found


def _runtime_distributions(pyproject: Path) -> list[metadata.Distribution]:
    """The installed distributions of pyproject's dependencies (what ``pip install .`` in
    deploy/Dockerfile pulls in), transitively; extras left out."""
    roots = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    seen: dict[str, metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        req = todo.pop()
        key = re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0].lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = metadata.distribution(key)
        except metadata.PackageNotFoundError:
            if req in roots:
                raise MissingComponent(f"{key} not installed: no operator image (make install)") from None
            continue  # a dependency only some platforms or Python versions need
        seen[key] = dist
        todo += [r for r in dist.requires or [] if "extra ==" not in r]
    return list(seen.values())


def _shared_libraries(binaries: list[Path]) -> dict[str, Path]:
    """What the dynamic loader needs for ``binaries``: their ldd closure, at the same paths."""
    out: dict[str, Path] = {}
    for binary in binaries:
        proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
        for line in proc.stdout.splitlines():
            found = re.search(r"(?:=> )?(/\S+) \(0x", line)
            path = os.path.normpath(found.group(1)) if found else ""
            # The interpreter's own and the wheels' bundled libraries are in the layer already.
            if path and not path.startswith(("/opt/python", sys.base_prefix, sys.prefix)):
                out[path] = Path(path).resolve()
    return out


START_GATE_SOURCE = Path(__file__).resolve().parents[2] / "deploy" / "start-gate"


def start_gate_binary() -> Path:
    """deploy/start-gate, built static once per source version into the cache (as deploy/
    Dockerfile's gate stage does for the published image)."""
    sources = [*sorted(START_GATE_SOURCE.glob("*.go")), START_GATE_SOURCE / "go.mod"]
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in sources)).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    out = cache / "etcd-supervisor" / "start-gate" / digest / "start-gate"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_suffix(f".{os.getpid()}")
        build = ["go", "build", "-trimpath", "-ldflags=-s", "-o", str(partial), "."]
        try:
            subprocess.run(
                build,
                cwd=START_GATE_SOURCE,
                env={**os.environ, "CGO_ENABLED": "0"},
                check=True,
                capture_output=True,
            )
        except (OSError, subprocess.CalledProcessError) as exc:
            raise MissingComponent(f"start-gate not built (Go missing?): {exc}") from exc
        partial.rename(out)  # atomic: a concurrent caller never runs a half-written binary
    return out


def operator_archive(out_dir: Path, *, tag: str = OPERATOR_IMAGE, changed: Mapping[str, str] = {}) -> Path:
    """The operator image (deploy/base's ``etcd-supervisor:dev``) without a base image to pull.

    deploy/Dockerfile installs the project on python:3.11-slim; here the same two parts are
    layers of our own: this interpreter with the project's runtime dependencies and the
    shared libraries they load (ldd), then the project's packages. Same entrypoint, same
    non-root user (the Deployment's runAsUser), nothing else in the image.
    """
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    prefix = Path(sys.base_prefix)
    site = f"/opt/python/lib/{ver}/site-packages"
    runtime: dict[str, Path | str] = {
        f"/opt/python/bin/{ver}": Path(sys.executable).resolve(),
        "/opt/python/bin/python3": f"->{ver}",
    }
    stdlib = prefix / "lib" / ver
    unneeded = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "site-packages", "lib2to3"}
    for path in stdlib.rglob("*"):
        rel = path.relative_to(stdlib)
        if rel.parts[0] not in unneeded and "__pycache__" not in rel.parts and path.is_file():
            runtime[f"/opt/python/lib/{ver}/{rel}"] = path
    for lib in (prefix / "lib").glob("libpython*.so*"):
        runtime[f"/opt/python/lib/{lib.name}"] = lib.resolve()
    repo = Path(__file__).resolve().parents[2]
    for dist in _runtime_distributions(repo / "pyproject.toml"):
        for f in dist.files or []:
            if ".." not in f.parts and "__pycache__" not in f.parts:
                runtime[f"{site}/{f}"] = Path(str(dist.locate_file(f)))
    binaries = [
        v
        for k, v in runtime.items()
        if isinstance(v, Path) and (k.endswith(".so") or ".so." in k or k.endswith(ver))
    ]
    runtime.update(_shared_libraries(binaries))
    entry = out_dir / "etcd-supervisor"
    out_dir.mkdir(parents=True, exist_ok=True)
    entry.write_text(
        "#!/opt/python/bin/python3\nimport sys\nfrom supervisor.cli import main\nsys.exit(main())\n"
    )
    entry.chmod(0o755)
    # The Dockerfile's useradd: libraries look the user's home up (kubernetes_asyncio does).
    passwd, group = out_dir / "passwd", out_dir / "group"
    passwd.write_text("root:x:0:0:root:/root:/bin/false\nsupervisor:x:65532:65532::/nonexistent:/bin/false\n")
    group.write_text("root:x:0:\nsupervisor:x:65532:\n")
    runtime.update({"/etc/passwd": passwd, "/etc/group": group})
    # python:3.11-slim has ca-certificates: the S3 client (reqwest) refuses to start without them.
    runtime["/etc/ssl/certs/ca-certificates.crt"] = Path("/etc/ssl/certs/ca-certificates.crt")
    project: dict[str, Path | str] = {
        "/usr/local/bin/etcd-supervisor": entry,
        "/usr/local/bin/start-gate": start_gate_binary(),
    }
    for package in ("supervisor", "actors", "proto"):
        for path in (repo / package).rglob("*.py"):
            if "__pycache__" not in path.parts:
                project[f"/app/{path.relative_to(repo)}"] = path
    # Another build of the project (`changed`: a path under /app and its new text), tagged
    # `tag`: what an operator upgrade brings.
    for path, text in changed.items():
        edited = out_dir / "changed" / path.lstrip("/")
        edited.parent.mkdir(parents=True, exist_ok=True)
        edited.write_text(text)
        project[path] = edited
    return write_docker_archive(
        out_dir / "operator.tar",
        tag,
        [runtime, project],
        entrypoint=["etcd-supervisor"],
        env={"PYTHONPATH": "/app", "LD_LIBRARY_PATH": "/opt/python/lib", "PYTHONDONTWRITEBYTECODE": "1"},
    )


def import_archive(archive: Path, *, address: Path) -> None:
    """Into containerd's k8s.io namespace, where the CRI plugin (the kubelet's view) finds images."""
    subprocess.run(
        ["ctr", f"--address={address}", "-n", "k8s.io", "images", "import", str(archive)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )


if __name__ == "__main__":  # build an archive by hand: python -m tests.harness.images OUT_DIR
    print(etcd_archive(Path(sys.argv[1]))[0])
