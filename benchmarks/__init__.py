"""asv benchmark suites of ksvd-bench (see asv.conf.json at the repository root)."""
