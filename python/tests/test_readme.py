"""python/README.md's examples (its ```python blocks), run as a user copies them: each in a fresh namespace."""
import os
import re

import pytest

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")


NAMES = ["numpy", "torch"]


def blocks():
    if not os.path.exists(README):
        return []
    with open(README) as f:
        return re.findall(r"^```python\n(.*?)^```$", f.read(), re.S | re.M)


def test_the_readme_has_its_examples():
    if not os.path.exists(README):
        pytest.skip("no python/README.md beside the tests (an installed package's tests alone)")
    assert len(blocks()) == len(NAMES)


@pytest.mark.parametrize("code", blocks(), ids=NAMES[:len(blocks())])
def test_readme_example(code):
    exec(compile(code, README, "exec"), {"__name__": "readme"})
