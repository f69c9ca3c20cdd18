"""Package discovery only (metadata lives in pyproject.toml).

The top-level ``widgets/`` folder is installed as ``tsevo.widgets``: in a wheel it is copied under
``tsevo/widgets``; in an editable install setuptools' finder maps the name onto the folder.
"""

from setuptools import find_packages, setup

core = find_packages(include=["tsevo", "tsevo.*"])
widgets = ["tsevo." + p for p in find_packages(include=["widgets", "widgets.*"])]

setup(packages=core + widgets, package_dir={"tsevo.widgets": "widgets"})
