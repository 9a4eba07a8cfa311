"""checkov's scan of template.yaml (and, in the same run, of a dedicated tenant's table's
template and the cells' control plane, templates/) is clean: each finding is fixed in the
template or suppressed on its resource (``Metadata: checkov: skip``) with the
reason it does not apply, or, for a check that applies to no function of the
template, once for the whole scan in .checkov.yaml (``skip-check``), its reason
in a comment above it.

checkov runs from a venv of its own (``make checkov``: .venv-checkov, from
requirements-checkov.txt), since its pins conflict with requirements-dev.txt;
``CHECKOV`` may name another checkov executable."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from stack_model.dedicated import DEDICATED_TEMPLATE_PATH
from stack_model.template import TEMPLATE_PATH, load_template
from tests.unit.test_template import with_tenant_isolation

ROOT = TEMPLATE_PATH.parent
CONFIG = ROOT / ".checkov.yaml"
CONTROL_PLANE_PATH = ROOT / "templates" / "control-plane.yaml"


def checkov() -> str:
    tool = os.environ.get("CHECKOV") or str(ROOT / ".venv-checkov" / "bin" / "checkov")
    assert Path(tool).is_file(), f"{tool} is missing: run `make checkov` (make test does)"
    return tool


def scan(*templates: Path) -> dict[str, Any]:
    result = subprocess.run(  # noqa: S603 - fixed arguments
        # The cloudformation framework is checkov's scan of SAM templates too (its
        # checks read AWS::Serverless::* resources and the Globals); nothing to download.
        [
            checkov(),
            *[argument for template in templates for argument in ("--file", str(template))],
            "--framework",
            "cloudformation",
            "--output",
            "json",
            "--skip-download",
            "--config-file",
            str(CONFIG),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert result.stdout, result.stderr
    report = json.loads(result.stdout)
    # One framework scanned: checkov answers with one report (a list when several).
    (report,) = report if isinstance(report, list) else [report]
    assert isinstance(report, dict)
    return report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One checkov run over every template the project deploys: checkov's start-up is most of its time.
    template.yaml with tenant isolation off (the template) and on (a copy whose default is
    PER_TENANT), the dedicated table's and the control plane's."""
    return scan(*product_templates(tmp_path_factory.mktemp("checkov")), DEDICATED_TEMPLATE_PATH, CONTROL_PLANE_PATH)


def product_templates(directory: Path) -> tuple[Path, Path]:
    return TEMPLATE_PATH, with_tenant_isolation(directory)


def test_checkov_finds_nothing_unsuppressed_in_the_template(report: dict[str, Any], tmp_path: Path) -> None:
    templates = product_templates(tmp_path)
    summary = report["summary"]
    failures = [
        f"{check['file_path']} {check['check_id']} {check['resource']}: {check['check_name']}"
        for check in report["results"]["failed_checks"]
    ]
    assert failures == [], "\n".join(failures)
    assert summary["parsing_errors"] == 0
    # It read every whole template (SAM resources included), not an empty or partial one.
    dedicated = load_template(DEDICATED_TEMPLATE_PATH)["Resources"]
    control_plane = load_template(CONTROL_PLANE_PATH)["Resources"]
    assert summary["resource_count"] == len(templates) * len(load_template()["Resources"]) + len(dedicated) + len(
        control_plane
    )
    assert summary["passed"] > 0
    for template in templates:
        skipped = {
            (check["check_id"], check["resource"].split(".", 1)[1])
            for check in report["results"]["skipped_checks"]
            if check["file_path"].endswith(f"/{template.name}")
        }
        assert skipped == suppressions(), template.name
    # The dedicated table's template suppresses nothing, and its key and table were checked.
    dedicated_checks = [
        check
        for kind in ("passed_checks", "skipped_checks")
        for check in report["results"][kind]
        if check["file_path"].endswith(f"/{DEDICATED_TEMPLATE_PATH.name}")
    ]
    assert {check["resource"] for check in dedicated_checks} >= {"AWS::DynamoDB::Table.Table", "AWS::KMS::Key.TableKey"}
    assert not any(check in report["results"]["skipped_checks"] for check in dedicated_checks)
    # The checks skipped for the whole scan were not run; every other one was, the
    # per-resource suppressions' included.
    ran = {check["check_id"] for kind in ("passed_checks", "skipped_checks") for check in report["results"][kind]}
    assert not (ran & set(skipped_everywhere()))
    assert {check_id for check_id, _ in suppressions()} <= ran


def skipped_everywhere() -> list[str]:
    """The checks .checkov.yaml skips for the whole scan, each below its reason."""
    lines = CONFIG.read_text(encoding="utf-8").splitlines()
    start = lines.index("skip-check:")
    found = []
    for number, line in enumerate(lines[start + 1 :], start + 1):
        if line.strip().startswith("- "):
            assert lines[number - 1].strip().startswith("#"), f"{line.strip()}: say why it does not apply"
            found.append(line.strip()[2:])
    assert found == ["CKV_AWS_116", "CKV_AWS_115", "CKV_AWS_173"]
    return found


def suppressions() -> set[tuple[str, str]]:
    """Every suppression in the template, each with its reason."""
    found = set()
    for name, resource in load_template()["Resources"].items():
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", []):
            assert len(skip["comment"]) > 20, f"{name} {skip['id']}: say why it does not apply"
            found.add((skip["id"], name))
    return found


def control_plane_suppressions() -> set[tuple[str, str]]:
    """Every suppression in the control plane's template, each with its reason."""
    found = set()
    for name, declared in load_template(CONTROL_PLANE_PATH)["Resources"].items():
        for skip in declared.get("Metadata", {}).get("checkov", {}).get("skip", []):
            assert len(skip["comment"]) > 20, f"{name} {skip['id']}: say why it does not apply"
            found.add((skip["id"], name))
    return found


def test_checkov_finds_nothing_unsuppressed_in_the_control_plane(report: dict[str, Any]) -> None:
    def of_the_control_plane(kind: str) -> list[dict[str, Any]]:
        return [
            check for check in report["results"][kind] if check["file_path"].endswith(f"/{CONTROL_PLANE_PATH.name}")
        ]

    failures = [
        f"{check['check_id']} {check['resource']}: {check['check_name']}"
        for check in of_the_control_plane("failed_checks")
    ]
    assert failures == [], "\n".join(failures)
    skipped = {
        (check["check_id"], check["resource"].split(".", 1)[1]) for check in of_the_control_plane("skipped_checks")
    }
    assert skipped == control_plane_suppressions()
    # Every suppression is of a check that ran (none left over from another checkov).
    ran = {check["check_id"] for kind in ("passed_checks", "skipped_checks") for check in of_the_control_plane(kind)}
    assert {check_id for check_id, _ in control_plane_suppressions()} <= ran
    assert of_the_control_plane("passed_checks")
