"""`eigenjury view`: a local, read-only web app over run folders (server: the API and
the page; index: byte offsets into a run's long JSON-lines files)."""
