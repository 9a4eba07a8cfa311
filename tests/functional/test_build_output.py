"""What `sam build` ships (``.aws-sam/build``): bytecode for every module, the
layer's pinned requirements and nothing else, no second SDK, a bounded size;
the authorizer's own requirements (cryptography) with the authorizer only.

Lambda's code directories are read-only: a module shipped without valid
bytecode is compiled from source on every cold start. These tests fail when the
build stops writing it, writes bytecode that would be ignored, or when the layer
grows a dependency (a second boto3/botocore first of all) that nobody pinned.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from stack_model.functions import FunctionSpec, function_specs
from stack_model.template import PROJECT_ROOT, template

BUILD_DIR = PROJECT_ROOT / ".aws-sam" / "build"
LAYER_DIR = BUILD_DIR / "SharedLayer" / "python"
REQUIREMENTS = PROJECT_ROOT / "layers" / "shared" / "requirements.txt"
RUNTIME_REQUIREMENTS = PROJECT_ROOT / "layers" / "shared" / "lambda-runtime.txt"
# The one function with dependencies of its own, and what they are.
AUTHORIZER = "AuthorizerFunction"
AUTHORIZER_REQUIREMENTS = PROJECT_ROOT / "functions" / "authorizer" / "requirements.txt"
# What would cost every function's cold start if it reached the layer.
AUTHORIZER_ONLY = {"cryptography", "cffi", "_cffi_backend", "pycparser"}
# The layer measured 8.4 MB unzipped when this bound was set; the SDK alone would add 25 MB,
# pydantic 9 MB.
MAX_LAYER_BYTES = 12 * 1024 * 1024
PYC_TAG = "cpython-313"
# PEP 552: flags word of a .pyc: bit 0 = hash-based, bit 1 = check the source.
UNCHECKED_HASH = 0b01


def pinned(path: Path) -> dict[str, str]:
    """``name -> version`` of a requirements file, names normalized (PEP 503)."""
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement:
            name, _, version = requirement.partition("==")
            found[re.sub(r"[-_.]+", "-", name).lower()] = version
    return found


@pytest.fixture(scope="module")
def specs() -> dict[str, FunctionSpec]:
    specs = function_specs()
    missing = [path for path in [LAYER_DIR, *(BUILD_DIR / name for name in specs)] if not path.is_dir()]
    if missing:
        pytest.fail(f"no `sam build` output ({missing[0]}): run `make build` (make test does it first)")
    return specs


def shipped_modules(specs: dict[str, FunctionSpec]) -> list[Path]:
    roots = [LAYER_DIR, *(BUILD_DIR / name for name in specs)]
    return sorted(path for root in roots for path in root.rglob("*.py"))


def test_every_shipped_module_has_unchecked_hash_bytecode_of_its_source(specs: dict[str, FunctionSpec]) -> None:
    modules = shipped_modules(specs)
    assert len(modules) > 100, "the layer's dependencies are missing"
    problems = []
    for source in modules:
        pyc = source.parent / "__pycache__" / f"{source.stem}.{PYC_TAG}.pyc"
        if not pyc.is_file():
            problems.append(f"{source.relative_to(BUILD_DIR)}: no {pyc.name}")
            continue
        header = pyc.read_bytes()[:16]
        flags = int.from_bytes(header[4:8], "little")
        if header[:4] != importlib.util.MAGIC_NUMBER or flags != UNCHECKED_HASH:
            problems.append(f"{pyc.relative_to(BUILD_DIR)}: magic {header[:4]!r}, flags {flags:#b}")
        elif header[8:16] != importlib.util.source_hash(source.read_bytes()):
            problems.append(f"{pyc.relative_to(BUILD_DIR)}: compiled from another source")
    assert problems == []


def test_bytecode_is_for_the_runtime_python() -> None:
    # The build compiles with python3.13: this interpreter's magic number is the one checked above.
    assert sys.version_info[:2] == (3, 13)


def installed(directory: Path) -> dict[str, str]:
    """``name -> version`` of the distributions pip installed into ``directory``."""
    found = {}
    for dist_info in directory.glob("*.dist-info"):
        name, _, version = dist_info.name.removesuffix(".dist-info").partition("-")
        found[re.sub(r"[-_.]+", "-", name).lower()] = version
    return found


def top_level_names(directory: Path) -> set[str]:
    """Importable names at the top of ``directory`` (``_rust.abi3.so`` -> ``_rust``)."""
    return {path.name.split(".", 1)[0] for path in directory.iterdir() if not path.name.endswith(".dist-info")}


def authorizer_architectures() -> list[str]:
    resources, globals_ = template()["Resources"], template()["Globals"]["Function"]
    architectures: list[str] = resources[AUTHORIZER]["Properties"].get("Architectures", globals_["Architectures"])
    return architectures


def test_each_function_ships_its_handler_and_nothing_else(specs: dict[str, FunctionSpec]) -> None:
    for name, spec in specs.items():
        if name == AUTHORIZER:
            continue
        shipped = sorted(str(path.relative_to(BUILD_DIR / name)) for path in (BUILD_DIR / name).rglob("*"))
        module = spec.handler.rpartition(".")[0]
        assert shipped == ["__pycache__", f"__pycache__/{module}.{PYC_TAG}.pyc", f"{module}.py"], name


def test_the_authorizer_ships_its_handler_and_exactly_its_pinned_requirements(specs: dict[str, FunctionSpec]) -> None:
    directory = BUILD_DIR / AUTHORIZER
    assert installed(directory) == pinned(AUTHORIZER_REQUIREMENTS)
    assert (directory / f"{specs[AUTHORIZER].handler.rpartition('.')[0]}.py").is_file()
    assert top_level_names(directory) >= AUTHORIZER_ONLY
    # Linux x86_64 extension modules, as the template's Architectures asks.
    assert (directory / "cryptography" / "hazmat" / "bindings" / "_rust.abi3.so").read_bytes()[:4] == b"\x7fELF"
    # The Makefile's wheels are x86_64: a template that moves the authorizer to arm64 must move them too.
    assert authorizer_architectures() == ["x86_64"]


def test_the_authorizers_crypto_reaches_no_other_function_and_not_the_layer(specs: dict[str, FunctionSpec]) -> None:
    assert top_level_names(LAYER_DIR).isdisjoint(AUTHORIZER_ONLY), sorted(top_level_names(LAYER_DIR) & AUTHORIZER_ONLY)
    assert not set(pinned(REQUIREMENTS)) & {"cryptography", "pyjwt", "cffi", "pycparser"}
    for name in specs:
        if name != AUTHORIZER:
            assert top_level_names(BUILD_DIR / name).isdisjoint(AUTHORIZER_ONLY), name


def test_no_function_ships_pydantic(specs: dict[str, FunctionSpec]) -> None:
    # The OpenAPI document needs it at build time; a function would pay its import on every cold start.
    assert not set(pinned(REQUIREMENTS)) & {"pydantic", "pydantic-core"}
    for directory in (LAYER_DIR, *(BUILD_DIR / name for name in specs)):
        assert top_level_names(directory).isdisjoint({"pydantic", "pydantic_core"}), directory.name


def test_the_layer_ships_exactly_its_pinned_requirements_and_no_sdk(specs: dict[str, FunctionSpec]) -> None:
    assert installed(LAYER_DIR) == pinned(REQUIREMENTS)
    runtime = set(pinned(RUNTIME_REQUIREMENTS))
    assert {"boto3", "botocore"} <= runtime
    top_level = {re.sub(r"[-_.]+", "-", path.name.removesuffix(".py")).lower() for path in LAYER_DIR.iterdir()}
    # What the runtime already has is not shipped again (python-dateutil's package is "dateutil").
    assert top_level.isdisjoint(runtime | {"dateutil", "s3transfer"}), sorted(top_level & runtime)
    assert (LAYER_DIR / "support_tickets" / "__init__.py").is_file()


def test_the_layer_size_is_bounded(specs: dict[str, FunctionSpec]) -> None:
    size = sum(path.stat().st_size for path in LAYER_DIR.rglob("*") if path.is_file())
    assert size <= MAX_LAYER_BYTES, f"{size / 1e6:.1f} MB"
