# The tests that run the program (marker needs_program) find it through ATTNSCOPE_BIN (scripts/test.sh sets it
# to build/bin/attnscope) and are skipped, with that reason, when it is unset.
import os

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_program: runs the attnscope program named by ATTNSCOPE_BIN")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("ATTNSCOPE_BIN"):
        return
    skip = pytest.mark.skip(reason="ATTNSCOPE_BIN is not set (scripts/test.sh sets it to build/bin/attnscope)")
    for item in items:
        if "needs_program" in item.keywords:
            item.add_marker(skip)
