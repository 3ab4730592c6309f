"""The splitter as it was before issue 34 rewrote it (thinkwire.splitter and thinkwire.lines at
commit 008924c), frozen for tests/test_splitter_differential.py: the rewrite must give exactly
what this gives, pieces and state, on every real output at every chunking. Not shipped, never
edited (but for the imports); it goes once the rewrite has settled."""
