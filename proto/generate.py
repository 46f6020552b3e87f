"""Regenerate the committed Python stubs of Weir's gateway protocol.

The stubs in ``gateway/api/`` are generated from ``proto/gateway.proto`` with
``grpc_tools.protoc`` and committed, so that running Weir needs no code generator.
``--check`` regenerates into a temporary directory and fails when the committed
files differ, which keeps the .proto and the stubs from drifting apart.

Usage::

    python proto/generate.py           # rewrite gateway/api/*_pb2*.py[i]
    python proto/generate.py --check   # exit 1 if the committed stubs are stale
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = REPO_ROOT / "proto"
PROTO_FILE = "gateway.proto"
OUTPUT_DIR = REPO_ROOT / "gateway" / "api"
OUTPUT_PACKAGE = "gateway.api"
GENERATED_FILES = ("gateway_pb2.py", "gateway_pb2.pyi", "gateway_pb2_grpc.py")

# protoc writes a top-level import of the message module into the grpc module; inside a
# package that import must name the package.
_ABSOLUTE_IMPORT = re.compile(r"^import gateway_pb2 as (\w+)$", re.MULTILINE)


def _run_protoc(out_dir: Path) -> None:
    """Compile the .proto into ``out_dir``; the proto path is the proto dir so the
    descriptor's file name stays ``gateway.proto``."""
    from grpc_tools import protoc  # type: ignore[import-untyped]  # lazily: only needed to generate

    include = Path(protoc.__file__).resolve().parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"--proto_path={PROTO_DIR}",
        f"--proto_path={include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        PROTO_FILE,
    ]
    status = protoc.main(args)
    if status != 0:
        raise SystemExit(f"protoc failed with status {status}")


def _rewrite_imports(out_dir: Path) -> None:
    """Turn the grpc module's absolute import into a package import."""
    grpc_module = out_dir / "gateway_pb2_grpc.py"
    text = grpc_module.read_text(encoding="utf-8")
    rewritten, count = _ABSOLUTE_IMPORT.subn(rf"from {OUTPUT_PACKAGE} import gateway_pb2 as \1", text)
    if count != 1:
        raise SystemExit(f"expected one 'import gateway_pb2' line in {grpc_module.name}, found {count}")
    grpc_module.write_text(rewritten, encoding="utf-8")


def generate(out_dir: Path) -> None:
    """Write all generated files into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _run_protoc(out_dir)
    _rewrite_imports(out_dir)
    missing = [name for name in GENERATED_FILES if not (out_dir / name).is_file()]
    if missing:
        raise SystemExit(f"protoc did not produce {missing}")


def stale_files(committed_dir: Path) -> dict[str, str]:
    """Regenerate into a temp dir and return ``{file name: unified diff}`` for every
    committed file that differs from (or is missing next to) the fresh output."""
    differences: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="weir-proto-") as tmp:
        fresh_dir = Path(tmp)
        generate(fresh_dir)
        for name in GENERATED_FILES:
            fresh = (fresh_dir / name).read_text(encoding="utf-8")
            committed_path = committed_dir / name
            committed = committed_path.read_text(encoding="utf-8") if committed_path.is_file() else ""
            if fresh != committed:
                diff = difflib.unified_diff(
                    committed.splitlines(keepends=True),
                    fresh.splitlines(keepends=True),
                    fromfile=f"committed/{name}",
                    tofile=f"generated/{name}",
                )
                differences[name] = "".join(diff)
    return differences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the committed stubs differ from freshly generated ones",
    )
    args = parser.parse_args(argv)

    if args.check:
        differences = stale_files(OUTPUT_DIR)
        if differences:
            for name, diff in differences.items():
                print(f"stale: gateway/api/{name}", file=sys.stderr)
                print(diff[:4000], file=sys.stderr)
            print("run `make proto` (python proto/generate.py) and commit the result", file=sys.stderr)
            return 1
        print("gateway/api stubs are up to date")
        return 0

    generate(OUTPUT_DIR)
    print(f"generated {', '.join(GENERATED_FILES)} in {OUTPUT_DIR.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
