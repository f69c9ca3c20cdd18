"""``python -m tsevo.studies SPEC``: the same as ``tsevo study run SPEC``."""

from tsevo.studies.command import main

if __name__ == "__main__":
    raise SystemExit(main())
