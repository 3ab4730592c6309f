"""Tools for developing thinkwire, not shipped in its package: the demo upstream, and a helper
that runs mitmdump / mitmweb as child processes (used by the tests, the benchmark and the demo)."""
