"""The image recipe, read without a container engine: base, user, ports, entrypoint and build inputs."""

from __future__ import annotations

import tomllib

from tests.deploy.manifests import CONTAINERFILE, RENDERINGS, parse_containerfile, render
from tests.harness import REPO


def test_every_stage_is_python_3_11_slim() -> None:
    image = parse_containerfile()
    assert image.bases, "no FROM"
    assert set(image.bases) == {"python:3.11-slim"}


def test_the_image_runs_as_a_numeric_non_root_user() -> None:
    uid, _, gid = parse_containerfile().user.partition(":")
    assert uid.isdigit(), "runAsNonRoot can only verify a numeric USER"
    assert int(uid) != 0 and (not gid or int(gid) != 0)


def test_entrypoint_is_the_weir_console_script() -> None:
    image = parse_containerfile()
    assert image.entrypoint == ["weir"]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["weir"] == "client.cli:main"
    assert image.cmd[0] == "start", "without args the image runs a single-node Weir"


def test_exposed_ports_are_the_ports_the_manifests_declare() -> None:
    declared: set[int] = set()
    for rendering in RENDERINGS:
        m = render(rendering)
        for workload in (m.broker_set, m.gateway):
            for c in workload["spec"]["template"]["spec"]["containers"]:
                declared |= {p["containerPort"] for p in c["ports"]}
    assert parse_containerfile().exposed == declared


def test_build_copies_every_package_and_what_pip_needs() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied: set[str] = set()
    for words in parse_containerfile().copies:
        if any(w.startswith("--from") for w in words):
            continue
        *sources, _destination = [w for w in words if not w.startswith("--")]
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: no such file in the repository"
            copied.add(source)
    assert packages <= copied, f"packages not copied into the build: {packages - copied}"
    assert {"pyproject.toml", pyproject["project"]["readme"]} <= copied


def test_build_context_ignores_local_state() -> None:
    ignored = {
        line.strip()
        for line in (CONTAINERFILE.parent / "Containerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv", "data"} <= ignored
    copied = {w for words in parse_containerfile().copies for w in words[:-1] if not w.startswith("--")}
    assert not copied & ignored, "the recipe copies something the ignore file leaves out of the context"
