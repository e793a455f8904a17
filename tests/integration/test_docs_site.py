"""The collection's docs site (`make docs`, antsibull-docs + Sphinx) opens in headless Chromium without errors
and documents every module, the inventory plugin and every role."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs")
    env = dict(os.environ, PATH="%s:%s" % (pathlib.Path(sys.executable).parent, os.environ.get("PATH", "")),
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / "build" / "collections"))
    proc = subprocess.run(["bash", str(ROOT / "docs" / "build.sh"), str(out)], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out / "html"


def test_site_has_a_page_per_module_plugin_and_role(site):
    pages = {p.name for p in (site / "collections" / "symphony" / "cluster").glob("*.html")}
    modules = {p.stem + "_module.html" for p in (ROOT / "plugins" / "modules").glob("*.py")}
    roles = {p.name + "_role.html" for p in (ROOT / "roles").iterdir() if (p / "meta" / "argument_specs.yml").exists()}
    assert modules and roles and modules | roles | {"twin_inventory.html"} <= pages, sorted(pages)


def test_index_opens_without_console_errors(site):
    playwright = pytest.importorskip("playwright.sync_api")
    errors = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"])
        page = browser.new_page()
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto((site / "index.html").as_uri())
        page.wait_for_load_state("load")
        title = page.title()
        page.goto((site / "collections" / "symphony" / "cluster" / "index.html").as_uri())
        page.wait_for_load_state("load")
        text = page.inner_text("body")
        browser.close()
    assert errors == []
    assert "symphony.cluster" in title
    assert "twin_audit" in text and "pre_deployment" in text
